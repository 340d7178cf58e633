"""BlockingConnection, the blocking frame reader of the caller-thread paths (direct sends and pulls,
the Spark source), on real socket pairs: frames split at any byte boundary, answers matched by
opaque whatever their order, stray frames skipped, bodies never changed under their holder, and every
failure (EOF mid-frame, reset, timeout, a malformed frame) a RemotingError that names the peer and
what was waited for, with the connection closed."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.errors import (
    RemotingCommandError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import FrameDecoder, RemotingCommand, encode_command, encode_command_rocketmq
from tidemq.remoting.blocking import BlockingConnection

ADDR = "peer:1"


def _answer(opaque: int, body: bytes, *, binary: bool = False, remark: str | None = None) -> bytes:
    cmd = RemotingCommand.create_response(
        0, remark=remark, ext_fields={"nextBeginOffset": "7"}, opaque=opaque
    )
    cmd.body = body
    return encode_command_rocketmq(cmd) if binary else encode_command(cmd)


def _pull(code: int = RequestCode.PULL_MESSAGE) -> RemotingCommand:
    return RemotingCommand.create_request(code, {"queueId": "1"})


@pytest.fixture
def pair() -> Iterator[tuple[BlockingConnection, socket.socket]]:
    """A connection over one end of a socket pair (the bytes a peer writes are readable at once);
    the test plays the peer on the other end."""
    ours, peer = socket.socketpair()
    conn = BlockingConnection(ours, ADDR)
    try:
        yield conn, peer
    finally:
        conn.close()
        peer.close()


def _drain(peer: socket.socket) -> None:
    """Read (and drop) the requests written to the peer so far."""
    try:
        while peer.recv(1 << 20, socket.MSG_DONTWAIT):
            pass
    except BlockingIOError:
        pass


def _deadline(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


_frames = st.lists(
    st.tuples(st.binary(max_size=300), st.booleans(), st.sampled_from(["answer", "stray", "request"])),
    min_size=1,
    max_size=6,
)


@settings(max_examples=150)
@given(frames=_frames, data=st.data(), buffer_size=st.sampled_from([8, 64, 65536]))
def test_frames_split_anywhere_are_read_whole_and_matched_by_opaque(
    frames: list[tuple[bytes, bool, str]], data: st.DataObject, buffer_size: int
) -> None:
    """The peer's bytes arrive in chunks cut at arbitrary byte boundaries; whatever the cut and the
    buffer size, every answer reaches its taker whole (JSON or ROCKETMQ header), in order, and the
    frames that answer no request of the connection (a request of the peer, an unknown opaque) are
    skipped."""
    ours, peer = socket.socketpair()
    conn = BlockingConnection(ours, ADDR, buffer_size=buffer_size)
    try:
        got: list[tuple[int, bytes]] = []
        stream, expected, strays = b"", [], 0
        for i, (body, binary, kind) in enumerate(frames):
            if kind == "answer":
                request = _pull()
                request.opaque = 100 + i  # fixed: the stream's length must not vary between runs
                conn.send([request], _deadline(), [lambda c: got.append((c.opaque, c.body)) if c else None])
                stream += _answer(request.opaque, body, binary=binary)
                expected.append((request.opaque, body))
            elif kind == "stray":
                stream += _answer(2**31 - 1, body, binary=binary)
                strays += 1
            else:
                from_peer = RemotingCommand.create_request(40, None, body)
                from_peer.opaque = 7
                stream += encode_command(from_peer)
                strays += 1
        last = _pull()  # read with answer(): every frame before it has been read by then
        last.opaque = 99
        conn.send([last], _deadline())
        stream += _answer(last.opaque, b"last")
        cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=12)))
        for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            peer.sendall(stream[a:b])
            conn.read_ready()  # reads what has arrived: a frame cut at b stays partial until later
        conn.wait_takers(_deadline())
        assert bytes(conn.answer(last.opaque, _deadline())[1]) == b"last"
        assert got == expected
        assert conn.skipped == strays
        assert conn.idle
    finally:
        conn.close()
        peer.close()


def test_a_frame_cut_at_every_byte_is_read_whole(pair: tuple[BlockingConnection, socket.socket]) -> None:
    conn, peer = pair
    body = bytes(range(256)) * 3
    for cut in range(1, len(_answer(1, body))):
        request = _pull()
        conn.send([request], _deadline())
        frame = _answer(request.opaque, body, remark="r")
        _drain(peer)
        peer.sendall(frame[:cut])
        peer.sendall(frame[cut:])
        cmd, got = conn.answer(request.opaque, _deadline())
        assert (cmd.opaque, cmd.remark, cmd.ext_fields, bytes(got)) == (
            request.opaque,
            "r",
            {"nextBeginOffset": "7"},
            body,
        )
    (decoded,) = FrameDecoder().feed(frame)  # the event loop's decoder reads the same command
    assert (decoded.opaque, decoded.remark, decoded.ext_fields, decoded.body) == (
        cmd.opaque,
        "r",
        cmd.ext_fields,
        body,
    )


def test_answers_in_any_order_are_kept_until_asked_for(
    pair: tuple[BlockingConnection, socket.socket],
) -> None:
    conn, peer = pair
    a, b, c = _pull(), _pull(), _pull()
    conn.send([a, b, c], _deadline())
    assert conn.pending == 3 and not conn.idle
    peer.sendall(
        encode_command(RemotingCommand.create_request(40, None))  # a request from the peer: skipped
        + _answer(c.opaque, b"three", binary=True)
        + _answer(12345, b"nobody's")  # an answer to no request of this connection: skipped
        + _answer(b.opaque, b"two")
        + _answer(a.opaque, b"one" * 1000)
    )
    cmd, body = conn.answer(a.opaque, _deadline())
    assert (cmd.opaque, cmd.is_response, bytes(body)) == (a.opaque, True, b"one" * 1000)
    assert bytes(conn.answer(b.opaque, _deadline())[1]) == b"two"  # came earlier, was kept
    assert bytes(conn.answer(c.opaque, _deadline())[1]) == b"three"
    assert conn.skipped == 2 and conn.idle


def test_takers_get_their_answers_while_another_answer_is_awaited(
    pair: tuple[BlockingConnection, socket.socket],
) -> None:
    conn, peer = pair
    taken: list[RemotingCommand | None] = []
    along, own = _pull(), _pull()
    conn.send([along], _deadline(), [taken.append])
    conn.send([own], _deadline())
    peer.sendall(_answer(along.opaque, b"along") + _answer(own.opaque, b"own"))
    assert bytes(conn.answer(own.opaque, _deadline())[1]) == b"own"
    assert [(t.opaque, t.body) for t in taken if t] == [(along.opaque, b"along")]  # body as bytes
    late = _pull()
    conn.send([late], _deadline(), [taken.append])
    conn.close()
    assert taken[-1] is None  # a taker still waiting when the connection closes gets None


def test_a_oneway_request_is_written_flagged_and_expects_no_answer(
    pair: tuple[BlockingConnection, socket.socket],
) -> None:
    conn, peer = pair
    conn.send_oneway(RemotingCommand.create_request(RequestCode.END_TRANSACTION, None), _deadline())
    assert conn.pending == 0 and conn.idle
    (cmd,) = FrameDecoder().feed(peer.recv(65536))
    assert cmd.is_oneway and cmd.code == RequestCode.END_TRANSACTION


def test_a_body_held_by_its_reader_is_never_overwritten_and_a_dropped_one_frees_the_buffer(
    pair: tuple[BlockingConnection, socket.socket],
) -> None:
    conn, peer = pair

    def one(body: bytes) -> memoryview:
        request = _pull()
        conn.send([request], _deadline())
        _drain(peer)
        peer.sendall(_answer(request.opaque, body))
        return conn.answer(request.opaque, _deadline())[1]

    held = one(b"a" * 100)
    buffer = conn._view  # (a reference to the bytearray itself would count as a holder)
    others = [bytes(one(bytes([i % 256]) * 100)) for i in range(1000)]  # far more than the buffer holds
    assert bytes(held) == b"a" * 100 and others[-1] == bytes([999 % 256]) * 100
    del held
    one(b"x" * 100)
    first = conn._view
    assert first is not buffer
    for _ in range(1000):
        one(b"y" * 100)  # each body dropped at once: the buffer is reused from its start
    assert conn._view is first


def test_a_frame_larger_than_the_buffer_grows_it(pair: tuple[BlockingConnection, socket.socket]) -> None:
    ours, peer = socket.socketpair()
    conn = BlockingConnection(ours, ADDR, buffer_size=64)
    try:
        request = _pull()
        conn.send([request], _deadline())
        body = bytes(range(256)) * 100
        peer.sendall(_answer(request.opaque, body))
        assert bytes(conn.answer(request.opaque, _deadline())[1]) == body
    finally:
        conn.close()
        peer.close()


def test_eof_in_the_middle_of_a_frame_is_an_error_naming_the_peer_and_the_request(
    pair: tuple[BlockingConnection, socket.socket],
) -> None:
    conn, peer = pair
    taken: list[RemotingCommand | None] = []
    other, request = _pull(), _pull()
    conn.send([other], _deadline(), [taken.append])
    conn.send([request], _deadline())
    peer.sendall(_answer(request.opaque, b"x" * 100)[:50])
    peer.shutdown(socket.SHUT_WR)
    with pytest.raises(RemotingSendRequestError, match="closed by the peer") as info:
        conn.answer(request.opaque, _deadline())
    assert ADDR in str(info.value) and f"request {request.opaque} (PULL_MESSAGE (11)" in str(info.value)
    assert conn.closed and taken == [None]
    with pytest.raises(RemotingSendRequestError, match="closed"):
        conn.send([_pull()], _deadline())


def test_a_reset_connection_is_a_send_request_error() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    conn = BlockingConnection.connect(addr, 5)
    peer, _ = listener.accept()
    listener.close()
    request = _pull()
    conn.send([request], _deadline())
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()  # an RST, not a FIN
    with pytest.raises(RemotingSendRequestError, match=f"connection to {addr} (failed|closed)"):
        conn.answer(request.opaque, _deadline())
    assert conn.closed


def test_a_timeout_names_what_was_awaited_and_closes(pair: tuple[BlockingConnection, socket.socket]) -> None:
    conn, peer = pair
    request = _pull()
    conn.send([request], _deadline())
    peer.sendall(_answer(request.opaque, b"z" * 100)[:30])  # part of the answer, then silence
    started = time.monotonic()
    with pytest.raises(
        RemotingTimeoutError,
        match=rf"<{ADDR}> timeout, waiting for the answer to request {request.opaque} \(PULL_MESSAGE",
    ):
        conn.answer(request.opaque, time.monotonic() + 0.1)
    assert 0.09 <= time.monotonic() - started < 2
    assert conn.closed

    ours, peer2 = socket.socketpair()
    conn = BlockingConnection(ours, ADDR)
    taken: list[RemotingCommand | None] = []
    conn.send([_pull()], _deadline(), [taken.append])
    with pytest.raises(RemotingTimeoutError):
        conn.wait_takers(time.monotonic() + 0.05)
    assert taken == [None] and conn.closed
    peer2.close()


def test_malformed_frames_are_command_errors(pair: tuple[BlockingConnection, socket.socket]) -> None:
    conn, peer = pair
    request = _pull()
    conn.send([request], _deadline())
    peer.sendall(b"\x7f\xff\xff\xff\x00\x00\x00\x04")  # a 2 GiB frame
    with pytest.raises(RemotingCommandError, match=f"malformed frame from {ADDR}.*outside"):
        conn.answer(request.opaque, _deadline())
    assert conn.closed

    ours, peer2 = socket.socketpair()
    conn = BlockingConnection(ours, ADDR)
    request = _pull()
    conn.send([request], _deadline())
    peer2.sendall(struct.pack(">iI", 8, 7 << 24) + b"\0\0\0\0")  # serialize type 7
    with pytest.raises(RemotingCommandError, match="serialize type 7"):
        conn.answer(request.opaque, _deadline())
    peer2.close()


def test_connect_failures_are_connect_errors() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(RemotingConnectError, match=f"connect to 127.0.0.1:{port}"):
        BlockingConnection.connect(f"127.0.0.1:{port}", 5)
    with pytest.raises(RemotingConnectError):
        BlockingConnection.connect("no-port", 5)


def test_an_answer_already_arrived_is_taken_after_the_deadline(
    pair: tuple[BlockingConnection, socket.socket],
) -> None:
    conn, peer = pair
    request = _pull()
    conn.send([request], _deadline())
    peer.sendall(_answer(request.opaque, b"late reader"))
    assert bytes(conn.answer(request.opaque, time.monotonic() - 1)[1]) == b"late reader"
