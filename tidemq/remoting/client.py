"""RemotingClient: request/response over one connection per peer address.

Mirrors RocketMQ's ``NettyRemotingClient`` (``invokeSync``, ``invokeOneway``, ``channelTables``,
``registerProcessor`` for server-initiated requests such as NOTIFY_CONSUMER_IDS_CHANGED).
"""

from __future__ import annotations

import asyncio
import functools
import logging

from tidemq.errors import RemotingConnectError, RemotingTimeoutError
from tidemq.protocol.command import MAX_FRAME_SIZE, RemotingCommand
from tidemq.remoting.channel import Channel
from tidemq.remoting.processor import (
    ChannelListener,
    RequestDispatcher,
    RequestProcessor,
    RPCHook,
    call_listener,
)

log = logging.getLogger(__name__)


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``"host:port"`` (or ``"[v6]:port"``) into ``(host, port)``.

    Raises:
        RemotingConnectError: ``addr`` has no valid port.
    """
    host, sep, port_text = addr.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise RemotingConnectError(f"invalid address {addr!r}: expected 'host:port'")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


class RemotingClient:
    """A RocketMQ remoting client. Mirrors ``NettyRemotingClient``.

    One connection per address, created on first use; concurrent callers share one connect.
    A closed connection is dropped and re-created by the next call.

    Args:
        max_frame_size: largest accepted frame in bytes (default 16 MiB).
        connect_timeout: seconds allowed for a TCP connect (default 3.0, RocketMQ's
            ``connectTimeoutMillis``).

    Example::

        client = RemotingClient()
        request = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        response = await client.invoke("127.0.0.1:9876", request, timeout=3.0)
        await client.close()
    """

    def __init__(self, *, max_frame_size: int = MAX_FRAME_SIZE, connect_timeout: float = 3.0) -> None:
        self.max_frame_size = max_frame_size
        self.connect_timeout = connect_timeout
        self._dispatcher = RequestDispatcher()
        self._listeners: list[ChannelListener] = []
        self._hooks: list[RPCHook] = []
        self._channels: dict[str, Channel] = {}
        self._connecting: dict[str, asyncio.Task[Channel]] = {}
        self._closed = False

    @property
    def channels(self) -> dict[str, Channel]:
        """Open connections by the address they were opened for."""
        return {addr: ch for addr, ch in self._channels.items() if ch.is_active}

    def register_processor(self, code: int, processor: RequestProcessor) -> None:
        """Handle server-initiated requests with ``code`` (e.g. NOTIFY_CONSUMER_IDS_CHANGED)."""
        self._dispatcher.register_processor(code, processor)

    def register_default_processor(self, processor: RequestProcessor) -> None:
        """Handle server-initiated requests with no registered processor."""
        self._dispatcher.register_default_processor(processor)

    def register_rpc_hook(self, hook: RPCHook) -> None:
        """Call ``hook`` on every outgoing request and its response (e.g. ACL signing)."""
        self._hooks.append(hook)

    def add_channel_listener(self, listener: ChannelListener) -> None:
        """Tell ``listener`` about connections opening and closing."""
        self._listeners.append(listener)

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``request`` to ``addr`` and wait for the response. Mirrors ``invokeSync``.

        Args:
            addr: ``"host:port"``.
            request: the request (see ``RemotingCommand.create_request``).
            timeout: seconds for connecting (if needed) plus waiting for the response.

        Returns:
            The response command; its ``code`` may be an error code, which is not raised here.

        Raises:
            RemotingConnectError: cannot connect to ``addr``.
            RemotingTimeoutError: no response within ``timeout`` (message names addr, code, timeout).
            RemotingSendRequestError: the connection closed before the response arrived.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for hook in self._hooks:
            hook.do_before_request(addr, request)
        channel = await self.get_channel(addr, deadline=deadline)
        if loop.time() >= deadline:
            raise RemotingTimeoutError(
                f"invoke to <{addr}> timeout, {timeout:g}s spent connecting, request code {request.code}"
            )
        response = await channel.invoke(request, timeout, deadline=deadline)
        for hook in self._hooks:
            hook.do_after_response(addr, request, response)
        return response

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send ``request`` to ``addr`` as oneway; nothing comes back. Mirrors ``invokeOneway``.

        Raises:
            RemotingConnectError: cannot connect to ``addr``.
            RemotingSendRequestError: the connection is closed.
        """
        for hook in self._hooks:
            hook.do_before_request(addr, request)
        channel = await self.get_channel(addr)
        await channel.invoke_oneway(request)

    async def get_channel(self, addr: str, *, deadline: float | None = None) -> Channel:
        """Return the open connection to ``addr``, connecting if needed.

        Args:
            addr: ``"host:port"``.
            deadline: optional ``loop.time()`` after which this caller stops waiting.

        Raises:
            RemotingConnectError: the connect failed, timed out, or the client is closed.
        """
        channel = self._channels.get(addr)
        if channel is not None and channel.is_active:
            return channel
        if self._closed:
            raise RemotingConnectError(f"client is closed, cannot connect to {addr}")
        task = self._connecting.get(addr)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(addr))
            self._connecting[addr] = task
            task.add_done_callback(functools.partial(self._connect_done, addr))
        if deadline is None:
            return await asyncio.shield(task)
        # asyncio.wait, not asyncio.timeout: a pull may get here eagerly, before its own task exists
        await asyncio.wait((task,), timeout=max(0.0, deadline - asyncio.get_running_loop().time()))
        if not task.done():
            raise RemotingConnectError(f"connect to {addr} did not complete in time")
        return task.result()

    def close_channel(self, addr: str) -> None:
        """Close the connection to ``addr`` (if any); its pending requests fail."""
        channel = self._channels.pop(addr, None)
        if channel is not None:
            channel.close("closed by client")

    async def close(self) -> None:
        """Close every connection and refuse new ones."""
        self._closed = True
        for task in list(self._connecting.values()):
            task.cancel()
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            channel.cancel_tasks()
            channel.close("client closed")
        if channels:
            await asyncio.wait([asyncio.ensure_future(c.wait_closed()) for c in channels], timeout=2.0)
        for channel in channels:
            if channel.is_active:
                channel.abort()

    async def _connect(self, addr: str) -> Channel:
        host, port = parse_addr(addr)
        loop = asyncio.get_running_loop()
        channel = Channel(
            self._dispatcher,
            max_frame_size=self.max_frame_size,
            on_open=self._on_open,
            on_close=self._on_close,
        )
        channel.attrs["addr"] = addr
        try:
            async with asyncio.timeout(self.connect_timeout):
                await loop.create_connection(channel.protocol, host, port)
        except TimeoutError:
            raise RemotingConnectError(
                f"connect to {addr} timed out after {self.connect_timeout:g}s"
            ) from None
        except OSError as exc:
            raise RemotingConnectError(f"connect to {addr} failed: {exc}") from exc
        if self._closed:
            channel.close("client closed")
            raise RemotingConnectError(f"client is closed, cannot connect to {addr}")
        self._channels[addr] = channel
        return channel

    def _connect_done(self, addr: str, task: asyncio.Task[Channel]) -> None:
        if self._connecting.get(addr) is task:
            del self._connecting[addr]
        if not task.cancelled() and task.exception() is not None:
            log.debug("connect to %s failed: %s", addr, task.exception())

    def _on_open(self, channel: Channel) -> None:
        for listener in self._listeners:
            try:
                call_listener(listener.on_channel_connect(channel))
            except Exception:
                log.exception("channel listener failed on connect to %s", channel.remote_addr)

    def _on_close(self, channel: Channel) -> None:
        addr = channel.attrs.get("addr")
        if isinstance(addr, str) and self._channels.get(addr) is channel:
            del self._channels[addr]
        log.debug("connection to %s closed (%s)", channel.remote_addr, channel.close_reason or "peer")
        for listener in self._listeners:
            try:
                call_listener(listener.on_channel_close(channel))
            except Exception:
                log.exception("channel listener failed on close of %s", channel.remote_addr)
