"""RemotingServer: accepts connections and routes their requests to processors by code.

Mirrors RocketMQ's ``NettyRemotingServer`` (``registerProcessor``, ``registerDefaultProcessor``,
``ChannelEventListener``), on asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tidemq.protocol.command import MAX_FRAME_SIZE
from tidemq.remoting.busy_poll import IdlePoller
from tidemq.remoting.channel import Channel
from tidemq.remoting.idle import IdleChannelReaper
from tidemq.remoting.processor import (
    ChannelListener,
    FastPath,
    RequestDispatcher,
    RequestProcessor,
    RPCHook,
    call_listener,
)

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 1024
"""Pending-connection queue of the listening socket (RocketMQ's ``serverSocketBacklog``, 1024).
asyncio's default of 100 made clients connecting all at once (1,000 in ``bench.chaos``'s load
scenario) time out while the accept queue was full."""

DEFAULT_IDLE_TIMEOUT = 120.0
"""Seconds of silence before a connection is closed (``serverChannelMaxIdleTimeSeconds``)."""
SHUTDOWN_GRACE = 2.0
"""Seconds :meth:`RemotingServer.shutdown` waits for connections to close before aborting them."""


class RemotingServer:
    """A RocketMQ remoting server. Mirrors ``NettyRemotingServer``.

    Args:
        host: address to listen on (default all interfaces).
        port: TCP port; 0 picks a free one (read :attr:`port` after :meth:`start`).
        max_frame_size: largest accepted frame in bytes (default 16 MiB); a larger frame
            closes that connection.
        idle_timeout: seconds after which a connection that sent nothing (or stopped reading our
            responses) is closed (RocketMQ's ``serverChannelMaxIdleTimeSeconds``, default 120).
        idle_poll_us: while reads come close together, keep the loop polling for this many µs after
            each read instead of sleeping (:class:`~tidemq.remoting.busy_poll.IdlePoller`); 0
            (default) = off. Only for a server that owns its process: the polling holds the GIL
            between its system calls.

    Example::

        server = RemotingServer("127.0.0.1", 0)
        server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, processor)
        await server.start()
        ...
        await server.shutdown()
    """

    def __init__(
        self,
        host: str = "0.0.0.0",
        port: int = 0,
        *,
        max_frame_size: int = MAX_FRAME_SIZE,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        idle_poll_us: int = 0,
    ) -> None:
        self.host = host
        self.idle_poll_us = idle_poll_us
        self.idle_poller: IdlePoller | None = None
        """Set by :meth:`start` when ``idle_poll_us`` > 0 (tidemq/remoting/busy_poll.py)."""
        self._requested_port = port
        self.max_frame_size = max_frame_size
        self._dispatcher = RequestDispatcher()
        self._listeners: list[ChannelListener] = []
        self._channels: set[Channel] = set()
        self._server: asyncio.AbstractServer | None = None
        self._port = port
        self.idle_reaper = IdleChannelReaper(lambda: self._channels, idle_timeout)
        """Closes connections silent (or not reading) for ``idle_timeout`` s (tidemq/remoting/idle.py)."""

    @property
    def port(self) -> int:
        """The port listened on (the real one once started, even when created with port 0)."""
        return self._port

    @property
    def channels(self) -> list[Channel]:
        """Currently open connections."""
        return list(self._channels)

    def register_processor(self, code: int, processor: RequestProcessor) -> None:
        """Route requests with ``code`` to ``processor``. Mirrors ``registerProcessor``."""
        self._dispatcher.register_processor(code, processor)

    def register_fast_path(self, code: int, fast_path: FastPath) -> None:
        """Answer requests with ``code`` through ``fast_path`` where it can
        (:meth:`RequestDispatcher.register_fast_path`)."""
        self._dispatcher.register_fast_path(code, fast_path)

    def register_default_processor(self, processor: RequestProcessor) -> None:
        """Route requests with no registered processor to ``processor``."""
        self._dispatcher.register_default_processor(processor)

    def processor_for(self, code: int) -> RequestProcessor | None:
        """The processor registered for ``code`` (else the default one; None when neither): what an
        in-process caller (the gRPC proxy's local mode) runs a request with, past the RPC hooks."""
        dispatcher = self._dispatcher
        return dispatcher.processors.get(int(code), dispatcher.default_processor)

    def register_rpc_hook(self, hook: RPCHook) -> None:
        """Call ``hook`` around every incoming request (e.g. ACL checks)."""
        self._dispatcher.rpc_hooks.append(hook)

    @property
    def rpc_hooks(self) -> tuple[RPCHook, ...]:
        """The hooks registered, in call order (``NettyRemotingAbstract.rpcHooks``)."""
        return tuple(self._dispatcher.rpc_hooks)

    def add_channel_listener(self, listener: ChannelListener) -> None:
        """Tell ``listener`` about connections opening and closing."""
        self._listeners.append(listener)

    async def start(self) -> None:
        """Bind and start accepting connections.

        Raises:
            OSError: the address cannot be bound.
        """
        if self._server is not None:
            return
        loop = asyncio.get_running_loop()
        if self.idle_poll_us > 0:  # before accepting: every connection's reads touch it
            self.idle_poller = IdlePoller(self.idle_poll_us, loop)
        self._server = await loop.create_server(
            self._new_protocol,
            self.host,
            self._requested_port,
            reuse_address=True,
            backlog=LISTEN_BACKLOG,
        )
        sockets = self._server.sockets
        if sockets:
            self._port = int(sockets[0].getsockname()[1])
        self.idle_reaper.start()
        log.info("remoting server listening on %s:%d", self.host, self._port)

    async def shutdown(self) -> None:
        """Stop accepting, close every connection and cancel in-flight request tasks."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        if self.idle_poller is not None:
            self.idle_poller.close()
            self.idle_poller = None
        await self.idle_reaper.stop()
        channels = list(self._channels)
        for channel in channels:
            channel.cancel_tasks()
            channel.close("server shutdown")
        if channels:
            waits = [asyncio.ensure_future(c.wait_closed()) for c in channels]
            _, pending = await asyncio.wait(waits, timeout=SHUTDOWN_GRACE)
            for fut in pending:
                fut.cancel()
            for channel in channels:
                if channel.is_active:
                    channel.abort()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), SHUTDOWN_GRACE)

    def _new_protocol(self) -> asyncio.Protocol:
        channel = Channel(
            self._dispatcher,
            max_frame_size=self.max_frame_size,
            on_open=self._on_open,
            on_close=self._on_close,
            pause_reading_on_backpressure=True,
        )
        poller = self.idle_poller
        return channel.protocol(poller.touch if poller is not None else None)

    def _on_open(self, channel: Channel) -> None:
        self._channels.add(channel)
        log.debug("connection from %s", channel.remote_addr)
        for listener in self._listeners:
            try:
                call_listener(listener.on_channel_connect(channel))
            except Exception:
                log.exception("channel listener failed on connect of %s", channel.remote_addr)

    def _on_close(self, channel: Channel) -> None:
        self._channels.discard(channel)
        log.debug("connection from %s closed (%s)", channel.remote_addr, channel.close_reason or "peer")
        for listener in self._listeners:
            try:
                call_listener(listener.on_channel_close(channel))
            except Exception:
                log.exception("channel listener failed on close of %s", channel.remote_addr)
