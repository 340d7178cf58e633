"""Blocking request/response on the caller's own thread: the sync producer's fast path.

The blocking facades normally hand each call to the client's event loop and wait for the answer
(two thread wake-ups per call, plus the loop's turn). For a single ``Producer.send`` that hop costs
more than the client's own work, so the sync producer sends over a :class:`DirectConnection`: a
plain blocking socket per broker address, written and read by the calling thread (the loop is not
involved at all; the GIL is released while the thread waits in ``recv``). This mirrors what
RocketMQ's ``NettyRemotingClient.invokeSync`` does for a Java caller thread: write the request,
block on the response future.

The socket, its framing, answer matching and errors are a
:class:`~tidemq.remoting.blocking.BlockingConnection` (one ``send`` and one ``recv`` per call; see
there). A connection is used by one thread at a time (:meth:`DirectPool.try_acquire` hands it out or
says it is busy, and the caller then takes the event-loop path). Any transport error or timeout
closes the connection (a late answer can never be read as the answer to the next request); the next
call connects again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tidemq.errors import RemotingConnectError, RemotingError
from tidemq.protocol.command import MAX_FRAME_SIZE, RemotingCommand
from tidemq.remoting.blocking import BlockingConnection

__all__ = ["DirectConnection", "DirectPool"]


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
        self._conn: BlockingConnection | None = None

    @property
    def pending(self) -> int:
        """Requests written by :meth:`send` whose answer has not been read yet."""
        conn = self._conn
        return conn.pending if conn is not None else 0

    @property
    def connected(self) -> bool:
        """True while a socket is open."""
        conn = self._conn
        return conn is not None and not conn.closed

    def _connect(self, timeout: float) -> BlockingConnection:
        """A new connection (within ``timeout`` s); callers use the open one when there is one.

        Raises:
            RemotingConnectError: cannot connect.
        """
        conn = self._conn = BlockingConnection.connect(
            self.addr, timeout, connect_timeout=self.connect_timeout, max_frame_size=self.max_frame_size
        )
        return conn

    def _open(self, timeout: float) -> BlockingConnection:
        """The open connection, or a new one (within ``timeout`` s) when there is none or the peer
        closed the idle one (:meth:`BlockingConnection.stale`: a request written there would be
        lost, and a send with a chosen queue has no other attempt).

        Raises:
            RemotingConnectError: cannot connect.
        """
        conn = self._conn
        if conn is None or conn.stale(time.monotonic()):
            if conn is not None:
                conn.close()
            conn = self._connect(timeout)
        return conn

    def close(self) -> None:
        """Close the socket (idempotent); the next :meth:`invoke` reconnects. The callbacks of the
        requests written by :meth:`send` and not answered yet get None."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def send(
        self,
        requests: list[tuple[RemotingCommand, Callable[[RemotingCommand | None], object]]],
        timeout: float,
    ) -> None:
        """Write ``requests`` (connecting first if needed, within ``timeout`` s) without waiting for
        their answers: each answer goes to its callback when a later call on this connection reads
        it (:meth:`read_pending`, :meth:`read_answers`, :meth:`invoke`, :meth:`invoke_many`). Never
        raises: when the requests cannot be written their callbacks get None (and a broken connection
        is closed). Must be called with :attr:`lock` held; callbacks run on the reading thread and
        must not raise."""
        try:
            conn = self._open(timeout)
            conn.send([r for r, _ in requests], time.monotonic() + timeout, [c for _, c in requests])
        except RemotingError as exc:
            if isinstance(exc, RemotingConnectError):  # nothing written
                for _, callback in requests:
                    callback(None)
            # else the write failed: the connection closed and the callbacks got None
        except Exception:
            for _, callback in requests:  # cannot be encoded: nothing written, nothing expected
                callback(None)

    def send_oneway(self, request: RemotingCommand, timeout: float) -> bool:
        """Write ``request`` marked oneway (no answer will come; END_TRANSACTION) within ``timeout``
        s, connecting first if needed; True once written. Never raises: False when it cannot be
        written (a broken connection is closed). Must be called with :attr:`lock` held."""
        try:
            conn = self._open(timeout)
            conn.send_oneway(request, time.monotonic() + timeout)
        except Exception:
            return False
        return True

    def read_pending(self) -> None:
        """Read what has arrived (without waiting) and hand the answers to requests written by
        :meth:`send` to their callbacks. Must be called with :attr:`lock` held. A broken connection is
        closed (the callbacks still waiting then get None)."""
        conn = self._conn
        if conn is not None:
            try:
                conn.read_ready()
            except RemotingError:
                pass  # closed; the callbacks got None

    def read_answers(self, timeout: float) -> None:
        """Block until every request written by :meth:`send` has had its answer handed to its
        callback, for at most ``timeout`` seconds. Never raises a :class:`RemotingError`: on a
        timeout or a broken connection the connection is closed and the callbacks still waiting
        get None. Must be called with :attr:`lock` held."""
        conn = self._conn
        if conn is not None:
            try:
                conn.wait_takers(time.monotonic() + timeout)
            except RemotingError:
                pass  # closed; the callbacks got None

    def abort(self) -> None:
        """From any thread, without :attr:`lock`: shut the socket down so that a thread blocked
        reading it wakes up (its read then fails and closes the connection)."""
        conn = self._conn
        if conn is not None:
            conn.abort()

    def invoke_many(
        self,
        requests: list[RemotingCommand],
        timeout: float,
        while_waiting: Callable[[], object] | None = None,
    ) -> list[RemotingCommand]:
        """Send ``requests`` in one write and block until every response arrived; the responses in
        the order of ``requests``. Same contract and errors as :meth:`invoke` (``timeout`` covers
        all of them; must be called with :attr:`lock` held)."""
        deadline = time.monotonic() + timeout
        conn = self._open(timeout)
        conn.send(requests, deadline)
        if while_waiting is not None:
            while_waiting()
        answers = []
        for r in requests:
            cmd, body = conn.answer(r.opaque, deadline)
            cmd.body = bytes(body)
            answers.append(cmd)
        return answers

    def invoke(
        self,
        request: RemotingCommand,
        timeout: float,
        while_waiting: Callable[[], object] | None = None,
    ) -> RemotingCommand:
        """Send ``request`` and block until its response (matched by ``opaque``) arrives.

        Must be called with :attr:`lock` held. Frames that are not this request's response (a late
        answer, a server-initiated request) are skipped; answers to :meth:`send`'s requests read
        meanwhile go to their callbacks.

        Args:
            request: the request command.
            timeout: seconds for connecting (if needed), writing and waiting, together.
            while_waiting: called once between the write and the first read: work for the round
                trip's idle time (its time counts against ``timeout``; it must not raise).

        Raises:
            RemotingConnectError: cannot connect.
            RemotingTimeoutError: no response within ``timeout`` (the connection is closed).
            RemotingSendRequestError: the connection broke (closed).
            RemotingCommandError: a malformed frame came (closed).
            LocalProtocolError: the request cannot be encoded.
        """
        deadline = time.monotonic() + timeout
        conn = self._open(timeout)
        conn.send([request], deadline)
        if while_waiting is not None:
            while_waiting()
        cmd, body = conn.answer(request.opaque, deadline)
        cmd.body = bytes(body)
        return cmd


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
