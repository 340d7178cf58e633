"""Slave side of replication (RocketMQ 4.9 ``HAService.HAClient``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from tidemq.store.ha.appender import SlaveCommitLogAppender
from tidemq.store.ha.service import HAConfig
from tidemq.store.ha.wire import HEADER, HEADER_SIZE, REPORT

log = logging.getLogger(__name__)

RECONNECT_INTERVAL = 1.0
"""Seconds between connection attempts to the master (RocketMQ waits 5 s)."""


class HAClient:
    """Connects to the master's HA port, reports its offset and appends what the master sends.

    Reports its max commit-log offset on connect, after every append and every
    ``heartbeat_interval_ms``; drops the link when the master is silent for
    ``housekeeping_interval_ms`` or sends data for an offset other than the slave's end (RocketMQ's
    "master pushed offset not equal the max phy offset in slave"), then reconnects every second.

    Args:
        appender: writes into the slave's store.
        master_address: ``ip:port`` of the master's HA port, or None until the name server tells
            (:meth:`update_ha_master_address`).
        config: :class:`~tidemq.store.ha.service.HAConfig`.

    Attributes:
        connected: whether a link to the master is up.
        master_offset: the master's offset from the last frame header (end of that frame), -1 before.
        last_read_time: ``time.monotonic()`` of the last frame from the master.
    """

    def __init__(
        self, appender: SlaveCommitLogAppender, master_address: str | None, config: HAConfig | None = None
    ) -> None:
        self.appender = appender
        self.master_address = master_address
        self.config = config or HAConfig()
        self.connected = False
        self.master_offset = -1
        self.last_read_time = 0.0
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._changed = asyncio.Event()

    def update_ha_master_address(self, address: str | None) -> None:
        """Use ``address`` from now on (``updateMasterAddress``); a change drops the current link."""
        if address and address != self.master_address:
            log.info("HA: master address %s -> %s", self.master_address, address)
            self.master_address = address
            self._changed.set()
            if self._writer is not None:
                self._writer.close()

    def start(self) -> None:
        """Start the connect / replicate loop on the running event loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-client")

    async def shutdown(self) -> None:
        """Stop replicating and close the link."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            addr = self.master_address
            if not addr:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), RECONNECT_INTERVAL)
                continue
            try:
                await self._replicate(addr)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("HA: link to master %s failed: %s", addr, exc)
            finally:
                self.connected = False
                if self._writer is not None:
                    self._writer.close()
                    self._writer = None
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), RECONNECT_INTERVAL)

    def _report(self, writer: asyncio.StreamWriter) -> int:
        offset = self.appender.store.get_max_phy_offset()
        writer.write(REPORT.pack(offset))
        return offset

    async def _replicate(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 3.0)
        self._writer = writer
        self.connected = True
        self.last_read_time = time.monotonic()
        log.info("HA: connected to master %s", addr)
        cfg = self.config
        reported = self._report(writer)
        await writer.drain()
        last_report = time.monotonic()
        heartbeat = cfg.heartbeat_interval_ms / 1000.0
        housekeeping = cfg.housekeeping_interval_ms / 1000.0
        loop = asyncio.get_running_loop()
        while True:
            try:
                head = await asyncio.wait_for(reader.readexactly(HEADER_SIZE), heartbeat)
            except TimeoutError:
                if time.monotonic() - self.last_read_time > housekeeping:
                    log.warning("HA: master %s silent for %.0f s; reconnecting", addr, housekeeping)
                    return
                reported = self._report(writer)
                await writer.drain()
                last_report = time.monotonic()
                continue
            offset, size = HEADER.unpack(head)
            body = await reader.readexactly(size) if size > 0 else b""
            self.last_read_time = time.monotonic()
            self.master_offset = offset + size
            slave_max = self.appender.store.get_max_phy_offset()
            if slave_max != 0 and slave_max != offset:
                log.error("HA: master %s pushed offset %d but the slave ends at %d", addr, offset, slave_max)
                return
            if body:
                ok = await loop.run_in_executor(None, self.appender.append, offset, body)
                if not ok:
                    return
            now = time.monotonic()
            current = self.appender.store.get_max_phy_offset()
            if current != reported or now - last_report >= heartbeat:
                reported = self._report(writer)
                await writer.drain()
                last_report = now
