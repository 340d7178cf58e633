"""NameServer: the name server process wiring. Mirrors RocketMQ's ``NamesrvController``.

A RemotingServer with the DefaultRequestProcessor registered for every name server code, a
channel listener that drops a broker the moment its connection closes
(``BrokerHousekeepingService``), and a periodic scan dropping brokers silent for longer than
``broker_channel_expired_time`` (first after 5 s, then every 10 s by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import replace
from typing import Any

from tidemq.remoting.channel import Channel
from tidemq.remoting.server import RemotingServer

from .config import NamesrvConfig
from .kv_config import KVConfigManager
from .processor import DefaultRequestProcessor
from .route_info import RouteInfoManager

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class _BrokerHousekeepingService:
    """Drops a broker's routes when its connection closes. Mirrors ``BrokerHousekeepingService``."""

    def __init__(self, route_info_manager: RouteInfoManager) -> None:
        self.route_info_manager = route_info_manager

    def on_channel_connect(self, channel: Channel) -> None:
        return None

    def on_channel_close(self, channel: Channel) -> None:
        self.route_info_manager.on_channel_destroy(channel.remote_addr, channel)


class NameServer:
    """An in-process RocketMQ name server. Mirrors ``NamesrvController``.

    Args:
        config: options (default ``NamesrvConfig()``); keyword ``overrides`` replace fields,
            e.g. ``NameServer(broker_channel_expired_time=1.0)``.
        host: interface to listen on (default all).
        port: TCP port (default 9876; 0 picks a free one, see :attr:`port`).

    Example::

        namesrv = NameServer(port=0)
        await namesrv.start()
        print(namesrv.addr)          # "127.0.0.1:40123"
        await namesrv.shutdown()

    Raises (from :meth:`start`):
        OSError: the port cannot be bound.
    """

    def __init__(
        self, config: NamesrvConfig | None = None, host: str = "0.0.0.0", port: int = 9876, **overrides: Any
    ) -> None:
        self.config = replace(config or NamesrvConfig(), **overrides)
        self.host = host
        self.route_info_manager = RouteInfoManager(int(self.config.broker_channel_expired_time * 1000))
        self.kv_config_manager = KVConfigManager(self.config.kv_config_path)
        self.processor = DefaultRequestProcessor(self.route_info_manager, self.kv_config_manager, self.config)
        self.remoting_server = RemotingServer(host, port)
        for code in self.processor.request_codes:
            self.remoting_server.register_processor(code, self.processor)
        self.remoting_server.add_channel_listener(_BrokerHousekeepingService(self.route_info_manager))
        self._scan_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The port listened on (the real one after :meth:`start`)."""
        return self.remoting_server.port

    @property
    def addr(self) -> str:
        """``"host:port"`` clients can use (``127.0.0.1`` when listening on all interfaces)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"{host}:{self.port}"

    async def start(self) -> None:
        """Load KV config, start listening and start the broker expiry scan."""
        self.kv_config_manager.load()
        await self.remoting_server.start()
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="namesrv-scan")
        log.info("name server started on %s", self.addr)

    async def shutdown(self) -> None:
        """Stop the scan and the server (closing every connection)."""
        task, self._scan_task = self._scan_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.remoting_server.shutdown()
        log.info("name server on %s shut down", self.addr)

    def scan_not_active_broker(self, now: int | None = None) -> list[str]:
        """Run one expiry scan now; closes the connections of expired brokers.

        Args:
            now: current time in ms (default: the wall clock).

        Returns:
            The broker addresses dropped.
        """
        expired = self.route_info_manager.scan_not_active_broker(_now_ms() if now is None else now)
        for _, live in expired:
            if isinstance(live.channel, Channel):
                live.channel.close("broker registration expired")
        return [addr for addr, _ in expired]

    async def _scan_loop(self) -> None:
        await asyncio.sleep(self.config.scan_not_active_broker_delay)
        while True:
            try:
                self.scan_not_active_broker()
            except Exception:
                log.exception("scanning for inactive brokers failed")
            await asyncio.sleep(self.config.scan_not_active_broker_interval)
