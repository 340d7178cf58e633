"""PullSocket, the executor's blocking pull connection, against a scripted peer: answers are matched
to their requests by opaque whatever their order, other frames are skipped, and every transport
failure is a RemotingError that leaves the socket closed."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from tidemq.errors import RemotingCommandError, RemotingError, RemotingTimeoutError
from tidemq.protocol.command import RemotingCommand, encode_command, encode_command_rocketmq
from tidemq.spark.conn import PullSocket


def _answer(opaque: int, body: bytes, *, binary: bool = False) -> bytes:
    cmd = RemotingCommand.create_response(0, remark=None, opaque=opaque)
    cmd.ext_fields = {"nextBeginOffset": "7"}
    cmd.body = body
    return encode_command_rocketmq(cmd) if binary else encode_command(cmd)


@pytest.fixture
def peer() -> Iterator[Callable[[Callable[[socket.socket], None]], str]]:
    """Start a one-connection server running ``script`` on the accepted socket; its address."""
    servers: list[tuple[socket.socket, threading.Thread]] = []

    def start(script: Callable[[socket.socket], None]) -> str:
        listener = socket.create_server(("127.0.0.1", 0))

        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                script(conn)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        servers.append((listener, thread))
        return f"127.0.0.1:{listener.getsockname()[1]}"

    yield start
    for listener, thread in servers:
        listener.close()
        thread.join(5)


def _read_requests(conn: socket.socket, n: int) -> list[int]:
    """The opaques of the next ``n`` request frames."""
    import json
    import struct

    opaques = []
    buf = b""
    while len(opaques) < n:
        while len(buf) < 8 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            buf += conn.recv(65536)
        length, word = struct.unpack(">iI", buf[:8])
        opaques.append(json.loads(buf[8 : 8 + (word & 0xFFFFFF)])["opaque"])
        buf = buf[4 + length :]
    return opaques


def _request() -> RemotingCommand:
    return RemotingCommand.create_request(11)


def test_answers_in_any_order_and_other_frames_skipped(peer: Callable[..., str]) -> None:
    done = threading.Event()

    def script(conn: socket.socket) -> None:
        first, second = _read_requests(conn, 2)
        stray = RemotingCommand.create_request(40)  # a request from the broker: not an answer
        conn.sendall(
            encode_command(stray) + _answer(12345, b"nobody's") + _answer(second, b"two", binary=True)
        )
        conn.sendall(_answer(first, b"one" * 1000))
        done.wait(5)

    sock = PullSocket(peer(script), timeout=5)
    a, b = _request(), _request()
    sock.send(a, 5)
    sock.send(b, 5)
    assert not sock.idle
    cmd, body = sock.read(a.opaque, 5)
    assert (cmd.opaque, cmd.is_response, bytes(body)) == (a.opaque, True, b"one" * 1000)
    assert cmd.ext_fields["nextBeginOffset"] == "7"
    cmd, body = sock.read(b.opaque, 5)  # came first, kept
    assert (cmd.opaque, bytes(body)) == (b.opaque, b"two")
    assert sock.idle
    done.set()
    sock.close()


def test_failures_raise_remoting_errors_and_close(peer: Callable[..., str]) -> None:
    def hang_up(conn: socket.socket) -> None:
        _read_requests(conn, 1)

    sock = PullSocket(peer(hang_up), timeout=5)
    r = _request()
    sock.send(r, 5)
    with pytest.raises(RemotingError, match="closed by the peer"):
        sock.read(r.opaque, 5)
    assert not sock.idle
    with pytest.raises(RemotingError):
        sock.send(_request(), 5)

    stop = threading.Event()

    def silent(conn: socket.socket) -> None:
        stop.wait(5)

    sock = PullSocket(peer(silent), timeout=5)
    r = _request()
    sock.send(r, 5)
    with pytest.raises(RemotingTimeoutError):
        sock.read(r.opaque, 0.2)
    stop.set()

    def garbage(conn: socket.socket) -> None:
        _read_requests(conn, 1)
        conn.sendall(b"\x7f\xff\xff\xff\x00\x00\x00\x04")  # a 2 GiB frame

    sock = PullSocket(peer(garbage), timeout=5)
    r = _request()
    sock.send(r, 5)
    with pytest.raises(RemotingCommandError):
        sock.read(r.opaque, 5)
    assert not sock.idle

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(RemotingError, match="connect"):
        PullSocket(f"127.0.0.1:{port}", timeout=5)
