"""Blocking request/response on the caller's own thread: the sync producer's fast path.

The blocking facades normally hand each call to the client's event loop and wait for the answer
(two thread wake-ups per call, plus the loop's turn). For a single ``Producer.send`` that hop costs
more than the client's own work, so the sync producer sends over a :class:`DirectConnection`: a
plain blocking socket per broker address, written and read by the calling thread (the loop is not
involved at all; the GIL is released while the thread waits in ``recv``). This mirrors what
RocketMQ's ``NettyRemotingClient.invokeSync`` does for a Java caller thread: write the request,
block on the response future.

Framing and header coding are the shared sans-I/O ones (``encode_command`` / ``FrameDecoder``).
A connection is used by one thread at a time (:meth:`DirectPool.try_acquire` hands it out or says
it is busy, and the caller then takes the event-loop path). Any transport error or timeout closes
the connection (a late answer can never be read as the answer to the next request); the next call
connects again.

Cost per call: the socket stays in blocking mode and the timeout is the kernel's (``SO_RCVTIMEO`` /
``SO_SNDTIMEO``, re-set only when the whole-millisecond timeout changes), so a call is one
``send`` and one ``recv``. A Python socket timeout would add an ``ioctl`` and a ``poll`` before
each of them, and a 256 KiB ``recv`` buffer an ``mmap``/``mremap``/``munmap`` per answer: 8
system calls per send instead of 2.
"""

from __future__ import annotations

import math
import socket
import struct
import threading
import time
from collections.abc import Callable

import orjson

from tidemq.errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError
from tidemq.protocol.codes import SerializeType
from tidemq.protocol.command import MAX_FRAME_SIZE, FrameDecoder, RemotingCommand, encode_command
from tidemq.remoting.client import parse_addr

__all__ = ["DirectConnection", "DirectPool"]

_RECV_SIZE = 64 * 1024
"""Below glibc's mmap threshold: the buffer comes from the heap (a send answer is ~200 bytes)."""
_TIMEVAL = struct.Struct("@ll")
_FRAME_HEAD = struct.Struct(">iI")
_INT32_MIN, _INT32_MAX = -0x80000000, 0x7FFFFFFF


def parse_plain_response(data: bytes, opaque: int) -> RemotingCommand | None:
    """The response to ``opaque`` when ``data`` is exactly one frame with a plain JSON header
    (integer code / version / flag, string language and remark, string ext-field values), else
    None: then the general ``FrameDecoder`` takes ``data``, and gives the same command for
    everything this accepts. One ``orjson.loads`` and a few type checks instead of the
    general decoder's per-field normalisation (a send's answer is always this plain shape).
    """
    if len(data) < 8:
        return None
    length, word = _FRAME_HEAD.unpack_from(data, 0)
    if length + 4 != len(data) or word >> 24 or word > length - 4:  # not one whole frame, or not JSON
        return None
    try:
        header = orjson.loads(data[8 : 8 + word])
    except orjson.JSONDecodeError:
        return None
    if type(header) is not dict or type(header.get("opaque")) is not int or header["opaque"] != opaque:
        return None
    code = header.get("code")
    flag = header.get("flag", 0)
    version = header.get("version", 0)
    language = header.get("language", "JAVA")
    remark = header.get("remark")
    ext = header.get("extFields") or {}
    if (
        type(code) is not int
        or type(flag) is not int
        or type(version) is not int
        or type(language) is not str
        or not (remark is None or type(remark) is str)
        or type(ext) is not dict
        or not flag & 1
        or not (_INT32_MIN <= code <= _INT32_MAX and _INT32_MIN <= version <= _INT32_MAX)
        or not _INT32_MIN <= flag <= _INT32_MAX
    ):
        return None
    for value in ext.values():
        if type(value) is not str:
            return None
    return RemotingCommand(
        code, language, version, opaque, flag, remark, ext, data[8 + word :], SerializeType.JSON
    )


class DirectConnection:
    """One blocking TCP connection to ``addr`` (``"host:port"``), connected on first use.

    Args:
        addr: the broker address.
        connect_timeout: seconds allowed for the TCP connect (3.0, RocketMQ's ``connectTimeoutMillis``).
        max_frame_size: largest accepted response frame, bytes (16 MiB).
    """

    def __init__(
        self, addr: str, *, connect_timeout: float = 3.0, max_frame_size: int = MAX_FRAME_SIZE
    ) -> None:
        self.addr = addr
        self.connect_timeout = connect_timeout
        self.max_frame_size = max_frame_size
        self.lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._decoder = FrameDecoder(max_frame_size)
        self._ready: list[RemotingCommand] = []
        self._timeout_ms = 0
        self._pending: dict[int, Callable[[RemotingCommand | None], object]] = {}
        """Requests written by :meth:`send`: opaque -> what takes the answer."""

    @property
    def pending(self) -> int:
        """Requests written by :meth:`send` whose answer has not been read yet."""
        return len(self._pending)

    @property
    def connected(self) -> bool:
        """True while a socket is open."""
        return self._sock is not None

    def _connect(self, timeout: float) -> socket.socket:
        host, port = parse_addr(self.addr)
        try:
            sock = socket.create_connection(
                (host, port), timeout=min(self.connect_timeout, max(timeout, 0.001))
            )
        except TimeoutError:
            raise RemotingConnectError(f"connect to {self.addr} timed out") from None
        except OSError as exc:
            raise RemotingConnectError(f"connect to {self.addr} failed: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)  # blocking; timeouts are SO_RCVTIMEO / SO_SNDTIMEO (see _set_timeout)
        self._sock = sock
        self._decoder = FrameDecoder(self.max_frame_size)
        self._ready = []
        self._timeout_ms = 0
        return sock

    def _set_timeout(self, sock: socket.socket, seconds: float) -> None:
        """Let a blocking ``send`` / ``recv`` wait at most ``seconds`` (rounded up to the ms)."""
        ms = max(1, math.ceil(seconds * 1000))
        if ms != self._timeout_ms:
            tv = _TIMEVAL.pack(ms // 1000, (ms % 1000) * 1000)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
            self._timeout_ms = ms

    def close(self) -> None:
        """Close the socket (idempotent); the next :meth:`invoke` reconnects. The callbacks of the
        requests written by :meth:`send` and not answered yet get None."""
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
        pending, self._pending = self._pending, {}
        for callback in pending.values():
            callback(None)

    def send(
        self,
        requests: list[tuple[RemotingCommand, Callable[[RemotingCommand | None], object]]],
        timeout: float,
    ) -> None:
        """Write ``requests`` (connecting first if needed, within ``timeout`` s) without waiting for
        their answers: each answer goes to its callback when a later call on this connection reads
        it (:meth:`read_pending`, :meth:`invoke`, :meth:`invoke_many`). Never raises: when the
        requests cannot be written their callbacks get None (and a broken connection is closed).
        Must be called with :attr:`lock` held; callbacks run on the reading thread and must not
        raise."""
        try:
            frames = b"".join(encode_command(r, self.max_frame_size) for r, _ in requests)
            sock = self._sock if self._sock is not None else self._connect(timeout)
        except Exception:
            for _, callback in requests:
                callback(None)
            return
        for r, callback in requests:
            self._pending[r.opaque] = callback
        try:
            self._set_timeout(sock, timeout)
            sock.sendall(frames)
        except OSError as exc:
            self._failed(exc, "writing requests")  # closed: the callbacks get None

    def send_oneway(self, request: RemotingCommand, timeout: float) -> bool:
        """Write ``request`` marked oneway (no answer will come; END_TRANSACTION) within ``timeout``
        s, connecting first if needed; True once written. Never raises: False when it cannot be
        written (a broken connection is closed). Must be called with :attr:`lock` held."""
        request.mark_oneway()
        try:
            frame = encode_command(request, self.max_frame_size)
            sock = self._sock if self._sock is not None else self._connect(timeout)
            self._set_timeout(sock, timeout)
            sock.sendall(frame)
        except OSError as exc:
            self._failed(exc, "writing a oneway request")
            return False
        except Exception:
            return False
        return True

    def _dispatch(self, cmd: RemotingCommand) -> bool:
        """Hand ``cmd`` to the callback of its :meth:`send`; False when it is no such answer."""
        callback = self._pending.pop(cmd.opaque, None) if cmd.is_response else None
        if callback is None:
            return False
        callback(cmd)
        return True

    def read_pending(self) -> None:
        """Read what has arrived (without waiting) and hand the answers to requests written by
        :meth:`send` to their callbacks. Must be called with :attr:`lock` held. A broken connection is
        closed (the callbacks still waiting then get None)."""
        sock = self._sock
        if sock is None or not self._pending:
            return
        try:
            while True:
                try:
                    data = sock.recv(_RECV_SIZE, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                if not data:
                    raise RemotingSendRequestError(f"connection to {self.addr} closed by the peer")
                self._ready.extend(self._decoder.feed(data))
        except BaseException as exc:
            self._failed(exc, "reading answers")
            if not isinstance(exc, Exception):
                raise
            return
        self._dispatch_ready()

    def read_answers(self, timeout: float) -> None:
        """Block until every request written by :meth:`send` has had its answer handed to its
        callback, for at most ``timeout`` seconds. Never raises an :class:`Exception`: on a
        timeout or a broken connection the connection is closed and the callbacks still waiting
        get None. Must be called with :attr:`lock` held."""
        deadline = time.monotonic() + timeout
        try:
            self._dispatch_ready()
            while self._pending:
                sock = self._sock
                if sock is None:
                    raise RemotingSendRequestError(f"connection to {self.addr} closed")
                self._ready.extend(self._decoder.feed(self._recv(sock, deadline)))
                self._dispatch_ready()
        except BaseException as exc:
            self._failed(exc, "reading answers")
            if not isinstance(exc, Exception):
                raise

    def abort(self) -> None:
        """From any thread, without :attr:`lock`: shut the socket down so that a thread blocked
        reading it wakes up (its read then fails and closes the connection)."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _dispatch_ready(self) -> None:
        """Hand the decoded answers to :meth:`send`'s requests to their callbacks; keep the rest."""
        self._ready[:] = [cmd for cmd in self._ready if not self._dispatch(cmd)]

    def invoke_many(
        self,
        requests: list[RemotingCommand],
        timeout: float,
        while_waiting: Callable[[], object] | None = None,
    ) -> list[RemotingCommand]:
        """Send ``requests`` in one write and block until every response arrived; the responses in
        the order of ``requests``. Same contract and errors as :meth:`invoke` (``timeout`` covers
        all of them; must be called with :attr:`lock` held)."""
        if len(requests) == 1:
            return [self.invoke(requests[0], timeout, while_waiting)]
        deadline = time.monotonic() + timeout
        frames = b"".join(encode_command(r, self.max_frame_size) for r in requests)
        sock = self._sock if self._sock is not None else self._connect(timeout)
        waiting = {r.opaque: i for i, r in enumerate(requests)}
        answers: list[RemotingCommand | None] = [None] * len(requests)
        ready = self._ready
        try:
            self._set_timeout(sock, deadline - time.monotonic())
            sock.sendall(frames)
            if while_waiting is not None:
                while_waiting()
            while waiting:
                while ready and waiting:
                    cmd = ready.pop(0)
                    if cmd.is_response and (i := waiting.pop(cmd.opaque, None)) is not None:
                        answers[i] = cmd
                    elif self._pending:
                        self._dispatch(cmd)
                if waiting:
                    ready.extend(self._decoder.feed(self._recv(sock, deadline)))
        except BaseException as exc:
            raise self._failed(
                exc, f"{timeout:g}s, {len(waiting)} of {len(requests)} requests of code {requests[0].code}"
            )
        if ready and self._pending:
            self._dispatch_ready()
        return [a for a in answers if a is not None]

    def _recv(self, sock: socket.socket, deadline: float) -> bytes:
        """The next bytes from ``sock`` by ``deadline`` (``time.monotonic()``).

        Raises:
            TimeoutError: nothing arrived by the deadline.
            RemotingSendRequestError: the peer closed the connection.
        """
        while True:
            try:
                data = sock.recv(_RECV_SIZE)
            except BlockingIOError:  # SO_RCVTIMEO expired
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError from None
                self._set_timeout(sock, remaining)
                continue
            if not data:
                raise RemotingSendRequestError(f"connection to {self.addr} closed by the peer")
            return data

    def _failed(self, exc: BaseException, waited: str) -> BaseException:
        """Close the connection after ``exc`` and return what to raise: RemotingTimeoutError for a
        timeout (``waited`` says what for), RemotingSendRequestError for another OS error (chained),
        ``exc`` itself otherwise."""
        self.close()
        if isinstance(exc, (TimeoutError, BlockingIOError)):
            timeout = RemotingTimeoutError(f"wait response on the channel <{self.addr}> timeout, {waited}")
            timeout.__suppress_context__ = True  # as ``raise ... from None``
            return timeout
        if isinstance(exc, OSError):
            error = RemotingSendRequestError(f"connection to {self.addr} failed: {exc}")
            error.__cause__ = exc
            return error
        return exc

    def invoke(
        self,
        request: RemotingCommand,
        timeout: float,
        while_waiting: Callable[[], object] | None = None,
    ) -> RemotingCommand:
        """Send ``request`` and block until its response (matched by ``opaque``) arrives.

        Must be called with :attr:`lock` held. Frames that are not this request's response (a late
        answer, a server-initiated request) are skipped.

        Args:
            request: the request command.
            timeout: seconds for connecting (if needed), writing and waiting, together.
            while_waiting: called once between the write and the first read: work for the round
                trip's idle time (its time counts against ``timeout``; it must not raise).

        Raises:
            RemotingConnectError: cannot connect.
            RemotingTimeoutError: no response within ``timeout`` (the connection is closed).
            RemotingSendRequestError: the connection broke (closed).
            LocalProtocolError: the request cannot be encoded.
        """
        deadline = time.monotonic() + timeout
        frame = encode_command(request, self.max_frame_size)
        sock = self._sock if self._sock is not None else self._connect(timeout)
        opaque = request.opaque
        ready = self._ready
        try:
            self._set_timeout(sock, deadline - time.monotonic())
            sock.sendall(frame)  # EAGAIN (BlockingIOError) after SO_SNDTIMEO: a timeout
            if while_waiting is not None:
                while_waiting()
            while True:
                while ready:
                    cmd = ready.pop(0)
                    if cmd.is_response and cmd.opaque == opaque:
                        if ready and self._pending:
                            self._dispatch_ready()
                        return cmd
                    if self._pending:
                        self._dispatch(cmd)
                data = self._recv(sock, deadline)
                if not self._decoder.buffered and len(data) <= self.max_frame_size:  # the usual case
                    plain = parse_plain_response(data, opaque)
                    if plain is not None:
                        return plain
                ready.extend(self._decoder.feed(data))
        except BaseException as exc:
            raise self._failed(exc, f"{timeout:g}s, request code {request.code}")


class DirectPool:
    """One :class:`DirectConnection` per broker address, shared by the threads of one client
    (a producer's senders, a lite pull consumer's committing thread)."""

    def __init__(self, *, connect_timeout: float = 3.0) -> None:
        self.connect_timeout = connect_timeout
        self._conns: dict[str, DirectConnection] = {}
        self._lock = threading.Lock()
        self._closed = False

    def try_acquire(self, addr: str, lane: int = 0) -> DirectConnection | None:
        """The connection to ``addr`` with its lock held, or None when another thread is using it
        (or the pool is closed). Release with ``conn.lock.release()``. Each ``lane`` is a connection
        of its own to the same address (a broker answers each connection's requests separately)."""
        key = addr if not lane else f"{addr}#{lane}"
        conn = self._conns.get(key)
        if conn is None:
            with self._lock:
                if self._closed:
                    return None
                conn = self._conns.setdefault(
                    key, DirectConnection(addr, connect_timeout=self.connect_timeout)
                )
        if not conn.lock.acquire(blocking=False):
            return None
        if self._closed:
            conn.lock.release()
            return None
        return conn

    def close(self) -> None:
        """Close every connection (waits for a call in progress on each to finish)."""
        with self._lock:
            self._closed = True
            conns = list(self._conns.values())
            self._conns.clear()
        for conn in conns:
            with conn.lock:
                conn.close()
