"""Channel: one TCP connection carrying RemotingCommands in both directions.

Mirrors the per-connection half of RocketMQ's ``NettyRemotingAbstract`` (``responseTable``,
``invokeSyncImpl`` / ``invokeOnewayImpl``, ``processMessageReceived``) plus Netty's
``NettyDecoder`` / ``NettyEncoder`` pipeline, over an ``asyncio.Protocol``.

Invariants:

* one :class:`~tidemq.protocol.command.FrameDecoder` per connection; a malformed or oversized
  frame closes this connection only (warning logged with the peer address and the reason);
* responses are matched to requests by ``opaque`` within this connection (``_pending``);
* every incoming request runs at once (``RequestDispatcher.process``); one that has to wait goes on
  in its own task;
* writes made in one event-loop iteration are coalesced into one ``transport.write``; writers of
  requests, oneway requests and late responses wait while the transport is paused (backpressure);
* when the connection closes every pending request fails with ``RemotingSendRequestError``.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
from collections.abc import Callable
from typing import Any, cast

import orjson

from tidemq.errors import (
    RemotingCommandError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from tidemq.protocol.command import (
    MAX_FRAME_SIZE,
    RPC_ONEWAY,
    FrameDecoder,
    RemotingCommand,
    encode_command,
    next_opaque,
)
from tidemq.remoting.eager import start_eagerly
from tidemq.remoting.log_limit import bad_frame_log
from tidemq.remoting.processor import RequestDispatcher

log = logging.getLogger(__name__)

_LENGTHS = struct.Struct(">iI").unpack_from
"""A frame's first 8 bytes: (length after the first 4, serialize type << 24 | header length)."""

_reading = threading.local()
"""``after``: the callbacks to run once the responses of the read being handled on this thread are
written (None outside a read)."""


def call_after_write(callback: Callable[[], None]) -> bool:
    """Run ``callback`` just after the answer of the request this thread is handling goes out.

    Work that must follow a request but need not delay its answer (the store's consume-queue
    dispatch after a put) runs in the same loop turn, after the write: sooner than ``call_soon`` and
    without a loop turn of its own. A request answered within its read: after that read's one write;
    one that answers later (a SYNC_FLUSH send waiting for its fsync): right after its own answer.
    Returns False, doing nothing, when no read is being handled.
    """
    after: list[Callable[[], None]] | None = getattr(_reading, "after", None)
    if after is None:
        return False
    after.append(callback)
    return True


ChannelCallback = Callable[["Channel"], None]


def format_addr(sockname: Any) -> str:
    """``("10.0.0.5", 9876)`` -> ``"10.0.0.5:9876"``; IPv6 hosts are bracketed (``"[::1]:9876"``)."""
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        host, port = sockname[0], sockname[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(sockname)


class _ChannelProtocol(asyncio.Protocol):
    """asyncio glue: forwards transport events to the :class:`Channel` that made it, through the
    hooks it was handed (bound methods: no reach into the channel, no lookup per event)."""

    __slots__ = ("_after_read", "_attach", "_on_data", "_on_lost", "_set_write_paused")

    def __init__(
        self,
        attach: Callable[[asyncio.Transport], None],
        on_data: Callable[[bytes], None],
        on_lost: Callable[[Exception | None], None],
        set_write_paused: Callable[[bool], None],
        after_read: Callable[[], None] | None = None,
    ) -> None:
        self._attach = attach
        self._on_data = on_data
        self._on_lost = on_lost
        self._set_write_paused = set_write_paused
        self._after_read = after_read

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._attach(cast(asyncio.Transport, transport))

    def data_received(self, data: bytes) -> None:
        self._on_data(data)
        if self._after_read is not None:
            self._after_read()

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(exc)

    def pause_writing(self) -> None:
        self._set_write_paused(True)

    def resume_writing(self) -> None:
        self._set_write_paused(False)


class Channel:
    """One connection to a peer. Mirrors Netty's ``Channel`` as RocketMQ's remoting uses it.

    Created by :class:`~tidemq.remoting.server.RemotingServer` (accepted connections) and
    :class:`~tidemq.remoting.client.RemotingClient` (outgoing ones); not built by users.

    Attributes:
        remote_addr: the peer as ``"ip:port"``.
        local_addr: our end as ``"ip:port"``.
        attrs: free-use dict for upper layers (client id, ACL identity...).

    Args:
        dispatcher: processor table for requests arriving on this connection.
        max_frame_size: largest accepted frame (bytes).
        on_open, on_close: called once when the connection is made / lost.
        pause_reading_on_backpressure: stop reading from the peer while our writes to it are
            paused (server side: a peer that does not read responses cannot make us buffer
            without bound). Clients leave it off, so two tidemq peers never deadlock.
    """

    def __init__(
        self,
        dispatcher: RequestDispatcher,
        *,
        max_frame_size: int = MAX_FRAME_SIZE,
        on_open: ChannelCallback | None = None,
        on_close: ChannelCallback | None = None,
        pause_reading_on_backpressure: bool = False,
    ) -> None:
        self.remote_addr = "?"
        self.local_addr = "?"
        self.attrs: dict[str, Any] = {}
        self.max_frame_size = max_frame_size
        self._dispatcher = dispatcher
        self._on_open = on_open
        self._on_close = on_close
        self._pause_reading_on_backpressure = pause_reading_on_backpressure
        self._decoder = FrameDecoder(max_frame_size)
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._wbuf: list[bytes] = []
        self._flush_scheduled = False
        self._in_read = False
        self._write_paused = False
        self._drained = asyncio.Event()
        self._drained.set()
        self._closed = False
        self._closed_event = asyncio.Event()
        self.close_reason: str | None = None
        self.last_read_time = self._loop.time()
        """``loop.time()`` of the last bytes received (the idle reaper closes silent connections)."""

    def protocol(self, after_read: Callable[[], None] | None = None) -> asyncio.Protocol:
        """The ``asyncio.Protocol`` to hand to ``create_server`` / ``create_connection``;
        ``after_read`` (optional) is called after each chunk of received bytes is handled (the
        server's :class:`~tidemq.remoting.busy_poll.IdlePoller`)."""
        return _ChannelProtocol(
            self._attach, self._on_data, self._on_lost, self._set_write_paused, after_read
        )

    def __repr__(self) -> str:
        state = "active" if self.is_active else "closed"
        return f"<Channel {self.local_addr} -> {self.remote_addr} {state}>"

    # ------------------------------------------------------------------ public API

    @property
    def is_active(self) -> bool:
        """True while the connection is open and not closing."""
        return self._transport is not None and not self._closed and not self._transport.is_closing()

    @property
    def pending_count(self) -> int:
        """Requests sent on this channel still waiting for a response."""
        return len(self._pending)

    async def invoke(
        self,
        request: RemotingCommand,
        timeout: float,
        *,
        deadline: float | None = None,
    ) -> RemotingCommand:
        """Send ``request`` and wait for its response. Mirrors ``invokeSyncImpl``.

        Args:
            request: a request command (its ``opaque`` is replaced if already in flight here).
            timeout: seconds to wait for the response (including any backpressure wait).
            deadline: optional ``loop.time()`` by which to give up instead of ``now + timeout``
                (for callers that already spent part of ``timeout``, e.g. connecting).

        Raises:
            RemotingTimeoutError: no response within ``timeout`` (names the peer, code, timeout).
            RemotingSendRequestError: the channel is closed or closes before the response.
            LocalProtocolError: the request cannot be encoded (e.g. larger than the frame cap).
        """
        if deadline is None:
            deadline = self._loop.time() + timeout
        if self._write_paused:
            await self._wait_drain(deadline, request, timeout)
        if request.opaque in self._pending:
            request.opaque = next_opaque()
        opaque = request.opaque
        fut: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self.write_command(request)
        self._pending[opaque] = fut
        handle = self._loop.call_at(deadline, self._on_timeout, fut, request.code, timeout)
        try:
            return await fut
        finally:
            handle.cancel()
            if self._pending.get(opaque) is fut:
                del self._pending[opaque]

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send ``request`` with the oneway flag; no response is expected. Mirrors ``invokeOnewayImpl``.

        Waits while the transport is paused (backpressure).

        Raises:
            RemotingSendRequestError: the channel is closed.
        """
        request.mark_oneway()
        self.write_command(request)
        if self._write_paused:
            await self._wait_drain(None, request, None)

    async def send_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Answer ``request`` later (after a processor returned ``None``, e.g. long polling).

        Sets the response's opaque and flag and writes it as :meth:`respond_now`. Does nothing for
        oneway requests. Waits while the transport is paused.

        Raises:
            RemotingSendRequestError: the channel is closed.
        """
        self.respond_now(request, response)
        if self._write_paused and not request.is_oneway:
            await self._wait_drain(None, request, None)

    def respond_now(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Answer ``request`` later, written at once (not at the end of the loop turn) unless this
        channel's own read is being handled, whose answers go out together. For an answer made
        outside the request's read, such as a long-polling pull woken by another client's put.

        Raises:
            RemotingSendRequestError: the channel is closed.
        """
        if request.flag & RPC_ONEWAY:
            return
        response.response_to(request)
        self.write_command(response)
        if not self._in_read:
            self._flush()

    def write_command(self, cmd: RemotingCommand) -> None:
        """Encode ``cmd`` and queue it; queued frames go out together at the end of this loop turn.

        Raises:
            RemotingSendRequestError: the channel is closed.
            LocalProtocolError: ``cmd`` cannot be encoded or exceeds the frame cap.
        """
        transport = self._transport  # is_active, without a property call (every answer)
        if transport is None or self._closed or transport.is_closing():
            raise RemotingSendRequestError(
                f"channel to {self.remote_addr} is closed, cannot send code {cmd.code}"
            )
        self._wbuf.append(encode_command(cmd, self.max_frame_size))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def close(self, reason: str | None = None) -> None:
        """Close the connection (queued writes are flushed first). Idempotent."""
        if reason and self.close_reason is None:
            self.close_reason = reason
        if self._transport is not None and not self._transport.is_closing():
            self._flush()
            self._transport.close()

    def abort(self) -> None:
        """Close the connection at once, discarding queued writes."""
        if self._transport is not None:
            self._transport.abort()

    async def wait_closed(self) -> None:
        """Wait until the connection is closed and pending requests have been failed."""
        await self._closed_event.wait()

    def cancel_tasks(self) -> None:
        """Cancel the request tasks still running for this channel (used at shutdown)."""
        for task in list(self._tasks):
            task.cancel()

    # ------------------------------------------------------------------ internals

    def _attach(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self.remote_addr = format_addr(transport.get_extra_info("peername"))
        self.local_addr = format_addr(transport.get_extra_info("sockname"))
        if self._on_open is not None:
            self._on_open(self)

    def _on_data(self, data: bytes) -> None:
        self.last_read_time = self._loop.time()
        dispatcher = self._dispatcher
        if dispatcher.fast_paths and not dispatcher.rpc_hooks and self._answer_fast(data):
            return
        try:
            commands = self._decoder.feed(data)
        except RemotingCommandError as exc:
            bad_frame_log.warning(self.remote_addr, "closing connection from %s: %s", self.remote_addr, exc)
            self.close(f"malformed frame: {exc}")
            return
        if not commands:
            return
        # Responses written while these commands are handled go out in one write at the end.
        flushing = self._flush_scheduled
        self._flush_scheduled = True
        outer = getattr(_reading, "after", None)
        after: list[Callable[[], None]] = []
        _reading.after = after
        self._in_read = True
        try:
            for cmd in commands:
                if cmd.is_response:
                    fut = self._pending.pop(cmd.opaque, None)
                    if fut is None:
                        log.debug(
                            "%s: response to unknown opaque %d (timed out?)", self.remote_addr, cmd.opaque
                        )
                    elif not fut.done():
                        fut.set_result(cmd)
                else:
                    self._start_request(cmd, after)
        finally:
            _reading.after = outer
            self._in_read = False
            if not flushing:
                self._flush()
            self._run_after(after)

    def _answer_fast(self, data: bytes) -> bool:
        """Answer ``data`` through its code's fast path (:meth:`RequestDispatcher.register_fast_path`)
        when it is exactly one whole frame with a JSON header, nothing is buffered before it, and the
        fast path takes it; False (nothing done) otherwise: then the frame decoder takes ``data``.
        The answer goes out as :meth:`_on_data` writes answers (with others written meanwhile, in one
        write), then the work asked to run after it (:func:`call_after_write`)."""
        size = len(data)
        if size < 8 or not self._decoder.clean:
            return False
        length, hlen = _LENGTHS(data)
        body_at = 8 + hlen  # hlen > 0xFFFFFF: not a JSON header
        if (
            length != size - 4
            or body_at > size
            or hlen > 0xFFFFFF
            or length > self.max_frame_size
            or not data.startswith(self._dispatcher.fast_prefixes, 8)
        ):
            return False
        try:
            header = orjson.loads(data[8:body_at])
            code = header["code"]
        except (orjson.JSONDecodeError, TypeError, KeyError):
            return False
        fast = self._dispatcher.fast_paths.get(code) if type(code) is int else None
        if fast is None:
            return False
        flushing = self._flush_scheduled
        self._flush_scheduled = True
        outer = getattr(_reading, "after", None)
        after: list[Callable[[], None]] = []
        _reading.after = after
        self._in_read = True
        try:
            answer = fast(self, header, data[body_at:])
        except Exception as exc:
            opaque = header.get("opaque")
            answer = self._dispatcher.fast_path_failed(self, code, opaque if type(opaque) is int else 0, exc)
        finally:
            _reading.after = outer
            self._in_read = False
        if answer is None:  # the general path takes it, as if this had not run
            self._flush_scheduled = flushing
            return False
        transport = self._transport
        if not answer:  # ANSWER_LATER: through answer_later()
            pass
        elif transport is None or self._closed or transport.is_closing():
            log.debug("%s: channel closed before the answer to code %d", self.remote_addr, code)
        elif flushing or self._wbuf:  # with the answers written meanwhile
            self._wbuf.append(answer)
        else:  # the usual: nothing else to write
            transport.write(answer)
        if not flushing:
            self._flush()
        if after:
            self._run_after(after)
        return True

    def answer_later(self) -> Callable[[bytes], None]:
        """For a fast path that answers after its read (it returns
        :data:`~tidemq.remoting.processor.ANSWER_LATER`): the function to call once with the answer
        frame. The work asked to run after the request's answer (:func:`call_after_write`) waits for
        that write, as for a request whose processor has to wait."""
        after: list[Callable[[], None]] | None = getattr(_reading, "after", None)
        mine = after[:] if after else []
        if after:
            after.clear()

        def write(frame: bytes) -> None:
            transport = self._transport
            if transport is None or self._closed or transport.is_closing():
                log.debug("%s: channel closed before a late answer", self.remote_addr)
            else:
                self._wbuf.append(frame)
                if not self._in_read:  # else the read being handled writes it with its own
                    self._flush()
            if mine:
                self._run_after(mine)

        return write

    def _run_after(self, callbacks: list[Callable[[], None]]) -> None:
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("%s: work after a write failed", self.remote_addr)

    def _start_request(self, cmd: RemotingCommand, after: list[Callable[[], None]]) -> None:
        """Run the request's processor at once; only one that has to wait gets a task (what Python
        3.12's eager tasks do): most requests (a send under ASYNC_FLUSH, a pull that finds messages,
        an offset commit) complete without a Task, a loop hop or a second write. The work it asked to
        run after its answer (:func:`call_after_write`, added to ``after``) moves to the end of its
        task when it has to wait: its answer comes first."""
        mark = len(after)
        try:
            task = start_eagerly(self._dispatcher.process(self, cmd), self._loop)
        except Exception:  # process() maps processor errors to responses; this is a bug
            log.exception("%s: request code %d failed", self.remote_addr, cmd.code)
            return
        if task is None:
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if len(after) > mark:
            mine = after[mark:]
            del after[mark:]
            task.add_done_callback(lambda _task: self._run_after(mine))

    def _on_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._wbuf.clear()
        if exc is not None and self.close_reason is None:
            self.close_reason = str(exc)
        if self._pending:
            why = f" ({self.close_reason})" if self.close_reason else ""
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(
                        RemotingSendRequestError(f"connection to {self.remote_addr} closed{why}")
                    )
            self._pending.clear()
        self._drained.set()
        self._closed_event.set()
        if self._on_close is not None:
            self._on_close(self)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._wbuf:
            return
        data = self._wbuf[0] if len(self._wbuf) == 1 else b"".join(self._wbuf)
        self._wbuf.clear()
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def _set_write_paused(self, paused: bool) -> None:
        self._write_paused = paused
        if paused:
            self._drained.clear()
        else:
            self._drained.set()
        transport = self._transport
        if self._pause_reading_on_backpressure and transport is not None and not transport.is_closing():
            # A peer that sends requests but does not read our responses stops being read.
            if paused:
                transport.pause_reading()
            else:
                transport.resume_reading()

    @property
    def write_paused(self) -> bool:
        """True while the transport's write buffer is above its high-water mark."""
        return self._write_paused

    def _on_timeout(self, fut: asyncio.Future[RemotingCommand], code: int, timeout: float) -> None:
        if not fut.done():
            fut.set_exception(
                RemotingTimeoutError(
                    f"wait response on the channel <{self.remote_addr}> timeout, "
                    f"{timeout:g}s, request code {code}"
                )
            )

    async def _wait_drain(
        self, deadline: float | None, request: RemotingCommand, budget: float | None
    ) -> None:
        if deadline is None:
            await self._drained.wait()
        else:
            # asyncio.wait, not asyncio.timeout: this may run eagerly, before its own task exists
            drained = self._loop.create_task(self._drained.wait())
            try:
                await asyncio.wait((drained,), timeout=max(0.0, deadline - self._loop.time()))
            finally:
                drained.cancel()
            if not drained.done():  # still waiting at the deadline (cancel() only asked it to stop)
                raise RemotingTimeoutError(
                    f"send to <{self.remote_addr}> blocked by backpressure for {budget:g}s, "
                    f"request code {request.code}"
                )
        if self._closed:
            raise RemotingSendRequestError(f"connection to {self.remote_addr} closed")
