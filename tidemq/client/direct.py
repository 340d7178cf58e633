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
"""

from __future__ import annotations

import socket
import threading
import time

from tidemq.errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError
from tidemq.protocol.command import MAX_FRAME_SIZE, FrameDecoder, RemotingCommand, encode_command
from tidemq.remoting.client import parse_addr

__all__ = ["DirectConnection", "DirectPool"]

_RECV_SIZE = 256 * 1024


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
        self._sock = sock
        self._decoder = FrameDecoder(self.max_frame_size)
        self._ready = []
        return sock

    def close(self) -> None:
        """Close the socket (idempotent); the next :meth:`invoke` reconnects."""
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``request`` and block until its response (matched by ``opaque``) arrives.

        Must be called with :attr:`lock` held. Frames that are not this request's response (a late
        answer, a server-initiated request) are skipped.

        Args:
            request: the request command.
            timeout: seconds for connecting (if needed), writing and waiting, together.

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
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.0001))
            sock.sendall(frame)
            while True:
                while self._ready:
                    cmd = self._ready.pop(0)
                    if cmd.is_response and cmd.opaque == opaque:
                        return cmd
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                sock.settimeout(remaining)
                data = sock.recv(_RECV_SIZE)
                if not data:
                    raise RemotingSendRequestError(f"connection to {self.addr} closed by the peer")
                self._ready.extend(self._decoder.feed(data))
        except TimeoutError:
            self.close()
            raise RemotingTimeoutError(
                f"wait response on the channel <{self.addr}> timeout, {timeout:g}s, request code {request.code}"
            ) from None
        except OSError as exc:
            self.close()
            raise RemotingSendRequestError(f"connection to {self.addr} failed: {exc}") from exc
        except BaseException:
            self.close()
            raise


class DirectPool:
    """One :class:`DirectConnection` per broker address, shared by the threads of one producer."""

    def __init__(self, *, connect_timeout: float = 3.0) -> None:
        self.connect_timeout = connect_timeout
        self._conns: dict[str, DirectConnection] = {}
        self._lock = threading.Lock()
        self._closed = False

    def try_acquire(self, addr: str) -> DirectConnection | None:
        """The connection to ``addr`` with its lock held, or None when another thread is using it
        (or the pool is closed). Release with ``conn.lock.release()``."""
        conn = self._conns.get(addr)
        if conn is None:
            with self._lock:
                if self._closed:
                    return None
                conn = self._conns.setdefault(
                    addr, DirectConnection(addr, connect_timeout=self.connect_timeout)
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
