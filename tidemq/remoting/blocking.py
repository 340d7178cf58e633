"""A blocking RocketMQ connection: requests written and answers read by the calling thread.

The event loop's :class:`~tidemq.remoting.channel.Channel` is how most of tidemq talks. Two hot paths
skip the loop and use one blocking socket from their own thread instead (the loop's two thread
wake-ups per call cost more than the call): the sync producer's sends and the lite pull consumer's
commits and pulls (:mod:`tidemq.client.direct`), and the Spark source's pulls on executors
(:mod:`tidemq.spark.conn`). Both go through :class:`BlockingConnection`. It mirrors what RocketMQ's
``NettyRemotingClient.invokeSync`` does for a Java caller thread: write the request, block for the
answer whose ``opaque`` matches. Framing and header decoding are the protocol's frame codec
(:func:`~tidemq.protocol.command.decode_frame_head`, the same code as the event loop's
:class:`~tidemq.protocol.command.FrameDecoder`).

Reading. One receive buffer per connection (64 KiB, grown to fit the largest frame seen); the kernel
copies into it with ``recv_into`` and an answer's body is handed out as a memoryview of it (no other
copy: the Spark source decodes pull bodies into Arrow from there). The buffer is reused from its start
once nothing handed out still refers to it; while something does (a body kept, or an Arrow array
over it), later frames go after it or into a new buffer, so a body never changes under its holder.

Costs. The socket stays in blocking mode; the wait limits are the kernel's ``SO_RCVTIMEO`` /
``SO_SNDTIMEO``, set only when they change, so a request and its answer are one ``send`` and one
``recv`` (a Python socket timeout adds a ``poll`` before each).

Times: every ``deadline`` is a :func:`time.monotonic` value in seconds; every ``timeout`` is in
seconds. A read ends at its deadline (give or take a millisecond, the kernel timer's unit; an answer
already arrived is still taken); a write gives up when the kernel has taken nothing for the time
that was left when it started.

Errors: every failure is a :class:`~tidemq.errors.RemotingError` that names the peer's address and
what was waited for, and leaves the connection closed (a late answer can never be taken for the answer
to a later request): :class:`~tidemq.errors.RemotingConnectError` (connect),
:class:`~tidemq.errors.RemotingTimeoutError` (deadline passed),
:class:`~tidemq.errors.RemotingSendRequestError` (closed by the peer, reset, write failed),
:class:`~tidemq.errors.RemotingCommandError` (a malformed or oversized frame).
"""

from __future__ import annotations

import math
import socket
import struct
import sys
import time
from collections.abc import Callable

from tidemq.errors import (
    RemotingCommandError,
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import (
    MAX_FRAME_SIZE,
    RPC_ONEWAY,
    RPC_TYPE_RESPONSE,
    RemotingCommand,
    decode_frame_head,
    encode_command,
    frame_length_error,
)
from tidemq.remoting.client import parse_addr

__all__ = ["BUFFER_SIZE", "BlockingConnection", "Taker"]

Taker = Callable[[RemotingCommand | None], object]
"""Takes the answer to a request written with :meth:`BlockingConnection.send` (``body`` as bytes),
or None when the connection closed first. Runs on the reading thread; must not raise."""

BUFFER_SIZE = 64 * 1024
"""Initial receive buffer, bytes (below glibc's mmap threshold; a send's answer is ~200 bytes)."""

_READ_AHEAD = 64 * 1024
STALE_CHECK_S = 1.0
"""Seconds a connection sits unwritten before :meth:`BlockingConnection.stale` peeks at it."""
"""Bytes read at most from a frame's start when it is smaller (or its length not known yet)."""
_INT = struct.Struct(">i")
_TIMEVAL = struct.Struct("@ll")


class BlockingConnection:
    """One connected TCP socket to a RocketMQ peer, written and read by one thread at a time.

    Requests are written with :meth:`send` (several may be in flight; one write for a batch) or
    :meth:`send_oneway`. An answer is matched to its request by ``opaque``: :meth:`answer` blocks for
    one, :meth:`wait_takers` for those given a :data:`Taker`, :meth:`read_ready` takes what has
    arrived without waiting. Answers that come before they are asked for are kept for their own
    :meth:`answer`; frames that answer no request of this connection (a request or oneway from the
    peer, an unknown opaque) are skipped and counted in :attr:`skipped`.

    Args:
        sock: a connected socket (put into blocking mode here).
        addr: the peer's ``host:port``, for error messages.
        max_frame_size: largest accepted frame length ``L``, bytes (16 MiB; RocketMQ's
            ``frameMaxLength``).
        buffer_size: initial receive buffer, bytes.
    """

    def __init__(
        self,
        sock: socket.socket,
        addr: str,
        *,
        max_frame_size: int = MAX_FRAME_SIZE,
        buffer_size: int = BUFFER_SIZE,
    ) -> None:
        sock.settimeout(None)  # blocking; waits are bounded by SO_RCVTIMEO / SO_SNDTIMEO
        self.addr = addr
        self.max_frame_size = max_frame_size
        self.skipped = 0
        self.closed = False
        """True once closed (by :meth:`close` or a failure)."""
        self._sock: socket.socket | None = sock
        self._buf = bytearray(buffer_size)
        self._view = memoryview(self._buf)
        self._not_lent = sys.getrefcount(self._buf)
        """``sys.getrefcount`` of the receive buffer when nothing handed out refers to it (measured
        here, as the checks measure it: the attribute and the persistent view, on this interpreter).
        Each body handed out is a view of its own over the buffer and holds one more reference, as
        does anything built on it (a slice, a numpy or Arrow array): the buffer is reused only at
        this count."""
        self._start = 0  # the unread bytes are _buf[_start:_end]
        self._end = 0
        self._rcv_ms = 0
        self._snd_ms = 0
        self._last_write = time.monotonic()
        self._expected: dict[int, tuple[int, float, Taker | None]] = {}
        """Requests written and not answered yet: opaque -> (code, when written, taker or None)."""
        self._takers = 0
        """How many of :attr:`_expected` have a taker."""
        self._early: dict[int, tuple[RemotingCommand, memoryview]] = {}

    @classmethod
    def connect(
        cls,
        addr: str,
        timeout: float,
        *,
        connect_timeout: float = 3.0,
        max_frame_size: int = MAX_FRAME_SIZE,
        buffer_size: int = BUFFER_SIZE,
    ) -> BlockingConnection:
        """Connect to ``addr`` (``host:port``) within ``min(timeout, connect_timeout)`` seconds
        (``connect_timeout``: RocketMQ's ``connectTimeoutMillis``, 3 s), with ``TCP_NODELAY``.

        Raises:
            RemotingConnectError: refused, unreachable, timed out, or a malformed address.
        """
        try:
            host, port = parse_addr(addr)
            sock = socket.create_connection((host, port), timeout=max(min(timeout, connect_timeout), 0.001))
        except TimeoutError:
            raise RemotingConnectError(f"connect to {addr} timed out") from None
        except (OSError, ValueError) as exc:
            raise RemotingConnectError(f"connect to {addr} failed: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock, addr, max_frame_size=max_frame_size, buffer_size=buffer_size)

    @property
    def pending(self) -> int:
        """Requests written whose answer has not been read yet."""
        return len(self._expected)

    @property
    def idle(self) -> bool:
        """Open, and every answer read and taken (fit for another user)."""
        return self._sock is not None and not self._expected and not self._early

    def stale(self, now: float) -> bool:
        """Whether this connection is closed or its peer has closed it while it sat idle (a broker
        restarted meanwhile): then a request written on it would never be read. Looked at only when
        nothing is in flight and nothing was written for :data:`STALE_CHECK_S` seconds (``now``: a
        :func:`time.monotonic` value), with one non-blocking peek, so a busy connection pays nothing;
        RocketMQ's Netty channel learns the same from its event loop (``channelInactive``)."""
        sock = self._sock
        if sock is None:
            return True
        if self._expected or now - self._last_write < STALE_CHECK_S:
            return False
        try:
            return not sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True

    def close(self) -> None:
        """Close the socket (idempotent). Takers still waiting get None; answers not asked for yet
        are dropped."""
        sock, self._sock = self._sock, None
        self.closed = True
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
        expected, self._expected = self._expected, {}
        self._takers = 0
        self._early.clear()
        for _, _, taker in expected.values():
            if taker is not None:
                taker(None)

    def abort(self) -> None:
        """From any thread: shut the socket down so that a thread blocked on it wakes up (its call
        then fails and closes the connection)."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def send(
        self, requests: list[RemotingCommand], deadline: float, takers: list[Taker] | None = None
    ) -> None:
        """Write ``requests`` in one write by ``deadline``, without waiting for their answers: each
        answer is for :meth:`answer`, or goes to ``takers[i]`` (same order as ``requests``) when a
        later read of this connection reads it. A request marked oneway expects no answer.

        Raises:
            LocalProtocolError: a request cannot be encoded (nothing written, nothing expected).
            RemotingTimeoutError / RemotingSendRequestError: the write failed (closed; the takers got None).
        """
        if len(requests) == 1:
            data = encode_command(requests[0], self.max_frame_size)
        else:
            data = b"".join([encode_command(r, self.max_frame_size) for r in requests])
        now = self._last_write = time.monotonic()
        expected = self._expected
        for i, r in enumerate(requests):
            if not r.flag & RPC_ONEWAY:
                taker = takers[i] if takers is not None else None
                expected[r.opaque] = (r.code, now, taker)
                if taker is not None:
                    self._takers += 1
        sock = self._sock
        try:
            if sock is None:
                raise RemotingSendRequestError(f"connection to {self.addr} is closed")
            ms = max(1, math.ceil((deadline - now) * 1000))
            if ms != self._snd_ms:
                sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_SNDTIMEO, _TIMEVAL.pack(ms // 1000, ms % 1000 * 1000)
                )
                self._snd_ms = ms
            sock.sendall(data)  # EAGAIN (BlockingIOError) once SO_SNDTIMEO expires: a timeout
        except BaseException as exc:
            plural = "s" if len(requests) > 1 else ""
            raise self._fail(exc, f"writing {len(requests)} request{plural} ({len(data)} bytes)") from None

    def send_oneway(self, request: RemotingCommand, deadline: float) -> None:
        """Mark ``request`` oneway (the peer does not answer) and write it by ``deadline``.

        Raises:
            LocalProtocolError: ``request`` cannot be encoded.
            RemotingTimeoutError / RemotingSendRequestError: the write failed (closed).
        """
        request.mark_oneway()
        self.send([request], deadline)

    def answer(self, opaque: int, deadline: float) -> tuple[RemotingCommand, memoryview]:
        """Block by ``deadline`` for the answer to the request ``opaque`` written by :meth:`send`
        without a taker: its command (``body`` empty) and its body, a view of the receive buffer
        (valid as long as it is referenced). Answers for takers read meanwhile go to them.

        Raises:
            RemotingTimeoutError / RemotingSendRequestError / RemotingCommandError: see the module
                docstring (the connection is closed).
        """
        early = self._early.pop(opaque, None)
        if early is not None:
            return early
        if self._sock is not None and opaque not in self._expected:
            raise RemotingSendRequestError(f"no request {opaque} waits on the connection to {self.addr}")
        try:
            while True:
                frame = self._frame(deadline)
                assert frame is not None
                cmd = frame[0]
                ours = cmd.flag & RPC_TYPE_RESPONSE and cmd.opaque == opaque
                if ours and self._expected.pop(opaque, None) is not None:
                    return frame
                self._hand_out(frame)
                del frame, cmd  # the buffer is not lent to a frame already dealt with
        except BaseException as exc:
            raise self._fail(exc, self._waited_for(opaque)) from None

    def wait_takers(self, deadline: float) -> None:
        """Block by ``deadline`` until every answer for a :data:`Taker` has been read and taken.

        Raises:
            RemotingTimeoutError / RemotingSendRequestError / RemotingCommandError: the connection is
                closed and the takers still waiting got None.
        """
        try:
            while self._takers and (frame := self._frame(deadline)) is not None:
                self._hand_out(frame)
                del frame  # the buffer is not lent to a frame already dealt with
        except BaseException as exc:
            raise self._fail(exc, self._waited_for(None)) from None

    def read_ready(self) -> None:
        """Read what has arrived, without waiting, and hand the answers for takers to them.

        Raises:
            RemotingSendRequestError / RemotingCommandError: the connection is closed and the takers
                still waiting got None.
        """
        if self._sock is None or not self._expected:
            return
        try:
            while (frame := self._frame(None)) is not None:
                self._hand_out(frame)
                del frame
        except BaseException as exc:
            raise self._fail(exc, self._waited_for(None)) from None

    def _hand_out(self, frame: tuple[RemotingCommand, memoryview]) -> None:
        """Give a frame that is not the answer being waited for to its taker (with its body copied),
        keep it for :meth:`answer` (an answer without a taker), or count it skipped (not expected:
        a late answer, a request from the peer)."""
        cmd = frame[0]
        expected = self._expected.pop(cmd.opaque, None) if cmd.flag & RPC_TYPE_RESPONSE else None
        if expected is None:
            self.skipped += 1
        elif expected[2] is None:
            self._early[cmd.opaque] = frame
        else:
            self._takers -= 1
            cmd.body = bytes(frame[1])
            expected[2](cmd)

    def _frame(self, deadline: float | None) -> tuple[RemotingCommand, memoryview] | None:
        """The next whole frame: its command (``body`` empty) and its body as a view of the buffer;
        reads until ``deadline``, or (None) only what has arrived (None when that is no whole frame)."""
        sock = self._sock
        if sock is None:
            raise RemotingSendRequestError(f"connection to {self.addr} is closed")
        while True:
            start, end = self._start, self._end
            need = 4
            if end - start >= 4:
                (length,) = _INT.unpack_from(self._view, start)
                if length < 4 or length > self.max_frame_size:
                    raise frame_length_error(length, self.max_frame_size)
                need += length
                if start + need <= end:
                    self._start = start + need
                    cmd, body_at = decode_frame_head(self._view, start + 4, start + need)
                    return cmd, memoryview(self._buf)[body_at : start + need]
            elif start == end and start and sys.getrefcount(self._buf) <= self._not_lent:
                self._start = self._end = start = end = 0  # all read, nothing handed out in use: reuse
            if start + need > len(self._buf) or (start == end and len(self._buf) - end < len(self._buf) >> 2):
                self._make_room(need)
            # Read at most 64 KiB past a frame's start, and a larger frame up to its end only: a
            # large frame then starts the buffer again (no move of its first bytes to make room).
            into = self._view[self._end : self._start + max(need, _READ_AHEAD)]
            if deadline is None:
                try:
                    n = sock.recv_into(into, 0, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    return None
            else:
                ms = math.ceil((deadline - time.monotonic()) * 1000)
                if ms > self._rcv_ms or ms < self._rcv_ms - 1:
                    self._set_rcv_timeout(sock, ms)
                try:
                    n = sock.recv_into(into)
                except BlockingIOError:  # SO_RCVTIMEO expired
                    if time.monotonic() >= deadline:
                        raise TimeoutError from None
                    continue
            if not n:
                raise EOFError
            self._end += n

    def _set_rcv_timeout(self, sock: socket.socket, ms: int) -> None:
        """Let a ``recv`` wait at most ``ms`` milliseconds (at least 1: past the deadline, what has
        arrived is still taken)."""
        ms = max(ms, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _TIMEVAL.pack(ms // 1000, ms % 1000 * 1000))
        self._rcv_ms = ms

    def _make_room(self, need: int) -> None:
        """Make the buffer hold ``need`` bytes from the unread ones' start (moved to its start):
        in place when nothing handed out refers to it, else in a new buffer (grown to 1.25 ``need``
        when too small)."""
        start, end = self._start, self._end
        size = len(self._buf)
        if need <= size and sys.getrefcount(self._buf) <= self._not_lent:
            self._buf[: end - start] = self._buf[start:end]  # a copy first: the ranges may overlap
        else:
            if need > size:
                size = need + need // 4
            buf = bytearray(size)
            buf[: end - start] = self._view[start:end]
            self._buf, self._view = buf, memoryview(buf)
        self._start, self._end = 0, end - start

    def _waited_for(self, opaque: int | None) -> str:
        """What a read waited for, for its error: the answer to ``opaque``, else the takers' answers."""
        now = time.monotonic()
        if opaque is not None:
            found = self._expected.get(opaque)
            items = [(opaque, found)] if found is not None else []
        else:
            items = [(o, e) for o, e in self._expected.items() if e[2] is not None]
        if not items:
            return (
                "waiting for an answer" if opaque is None else f"waiting for the answer to request {opaque}"
            )
        text = ", ".join(f"{o} ({_code_name(e[0])}, written {now - e[1]:.3g} s before)" for o, e in items[:3])
        more = f" and {len(items) - 3} more" if len(items) > 3 else ""
        plural = "s" if len(items) > 1 else ""
        return f"waiting for the answer{plural} to request{plural} {text}{more}"

    def _fail(self, exc: BaseException, what: str) -> BaseException:
        """Close the connection after ``exc`` (raised while ``what``) and return what to raise."""
        self.close()
        error: BaseException
        if isinstance(exc, RemotingCommandError):
            error = RemotingCommandError(f"malformed frame from {self.addr} while {what}: {exc}")
        elif isinstance(exc, RemotingError):
            return exc
        elif isinstance(exc, (TimeoutError, BlockingIOError)):
            return RemotingTimeoutError(f"wait response on the channel <{self.addr}> timeout, {what}")
        elif isinstance(exc, EOFError):
            return RemotingSendRequestError(f"connection to {self.addr} closed by the peer while {what}")
        elif isinstance(exc, OSError):
            error = RemotingSendRequestError(f"connection to {self.addr} failed while {what}: {exc}")
        else:
            return exc
        error.__cause__ = exc
        return error


def _code_name(code: int) -> str:
    """``PULL_MESSAGE (11)`` for a known request code, else the number."""
    try:
        return f"{RequestCode(code).name} ({code})"
    except ValueError:
        return f"code {code}"
