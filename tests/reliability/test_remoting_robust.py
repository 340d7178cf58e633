"""Bad input never costs a reply, a descriptor or the disk: opaque range, unencodable responses,
idle / stuck connections, rate-limited warnings."""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections.abc import AsyncIterator

import pytest

from tests.helpers import wait_for
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand, encode_command
from tidemq.remoting import Channel, RemotingClient, RemotingServer
from tidemq.remoting.log_limit import PeerLogLimiter, bad_frame_log

ECHO, HUGE = 9101, 9102


class Processor:
    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == HUGE:  # a response larger than the server's frame cap
            return RemotingCommand.create_response(ResponseCode.SUCCESS, body=b"x" * 8192)
        return RemotingCommand.create_response(ResponseCode.SUCCESS, body=request.body)


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    srv = RemotingServer("127.0.0.1", 0, max_frame_size=4096, idle_timeout=0.5)
    for code in (ECHO, HUGE):
        srv.register_processor(code, Processor())
    await srv.start()
    yield srv
    await srv.shutdown()


def json_frame(header: dict[str, object], body: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack(">II", 4 + len(raw) + len(body), len(raw)) + raw + body


async def echo_ok(server: RemotingServer) -> bool:
    client = RemotingClient()
    try:
        resp = await client.invoke(
            f"127.0.0.1:{server.port}", RemotingCommand.create_request(ECHO, {}, b"hi"), 5.0
        )
        return resp.code == ResponseCode.SUCCESS and resp.body == b"hi"
    finally:
        await client.close()


@pytest.mark.parametrize("opaque", [2**31, -(2**31) - 1, 2**64 + 5])
async def test_opaque_outside_int32_closes_the_connection(server: RemotingServer, opaque: int) -> None:
    """Such an opaque could not be echoed into a response (the client would wait for nothing):
    the frame is malformed, the connection closed; other clients are served."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(
            json_frame({"code": ECHO, "opaque": opaque, "flag": 0, "language": "JAVA", "version": 1})
        )
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5.0) == b""  # closed, no half answer
    finally:
        writer.close()
    assert await echo_ok(server)


async def test_response_that_cannot_be_encoded_gets_system_error_with_remark(server: RemotingServer) -> None:
    client = RemotingClient()
    try:
        resp = await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.create_request(HUGE, {}), 5.0)
    finally:
        await client.close()
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "could not be encoded" in (resp.remark or "") and "4096" in (resp.remark or "")


@pytest.mark.parametrize("send", [b"", b"\x00\x00\x01\x00\x00\x00"])  # silent / half a frame
async def test_idle_or_half_sent_connection_is_closed(server: RemotingServer, send: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(send)
        await writer.drain()
        await wait_for(lambda: len(server.channels) == 1, 5, "the connection to be accepted")
        assert await asyncio.wait_for(reader.read(), 10.0) == b""  # reaped, with a deadline
        await wait_for(lambda: not server.channels, 5, "the server to forget the channel")
    finally:
        writer.close()
    assert server.idle_reaper.closed_idle >= 1


async def test_peer_that_never_reads_is_aborted(server: RemotingServer) -> None:
    """Requests keep coming but responses are never read: reads pause (backpressure) and the peer
    would stay forever (a half-open connection); it is aborted after the idle timeout."""
    _reader, writer = await asyncio.open_connection("127.0.0.1", server.port, limit=1024)
    try:
        frame = encode_command(RemotingCommand.create_request(ECHO, {}, b"z" * 3000))
        for _ in range(2000):  # ~6 MB of responses nobody reads
            writer.write(frame)
            if writer.transport.get_write_buffer_size() > 1 << 20:
                break
        await wait_for(
            lambda: len(server.channels) == 1 and server.channels[0].write_paused, 10, "paused writes"
        )
        await wait_for(lambda: not server.channels, 10, "the stuck connection to be aborted")
    finally:
        writer.transport.abort()
    assert await echo_ok(server)


async def test_bad_frame_warnings_are_rate_limited(
    server: RemotingServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "tidemq.remoting.channel")
    bad_frame_log.flush()
    before = bad_frame_log.total_suppressed
    for _ in range(40):
        _, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"\xff\xff\xff\xff garbage")
        await writer.drain()
        writer.close()
    await wait_for(
        lambda: bad_frame_log.total_suppressed - before >= 40 - bad_frame_log.burst, 10, "40 bad frames"
    )
    closing = [r for r in caplog.records if "closing connection" in r.getMessage()]
    assert len(closing) <= bad_frame_log.burst
    bad_frame_log.flush()
    summary = [r.getMessage() for r in caplog.records if "(suppressed)" in r.getMessage()]
    assert summary and summary[-1].startswith(f"{40 - len(closing)} more bad frames from 127.0.0.1"), summary
    assert await echo_ok(server)


def test_limiter_counts_per_host_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limiter = PeerLogLimiter(
        logging.getLogger("test.limiter"), "bad frames", burst=2, interval=60, clock=lambda: now[0]
    )
    caplog.set_level(logging.INFO, "test.limiter")
    logged = [limiter.warning(f"10.0.0.1:{port}", "bad frame %d", port) for port in range(10)]
    assert logged == [True, True] + [False] * 8
    assert limiter.warning("10.0.0.2:1", "other host")  # a second peer has its own budget
    now[0] = 61.0
    assert limiter.warning("10.0.0.1:99", "new window")
    messages = [r.getMessage() for r in caplog.records]
    assert "8 more bad frames from 10.0.0.1 in the last 61 s (suppressed)" in messages
    assert messages[-1] == "new window"


def test_limiter_budget_is_per_host_whatever_the_kind(caplog: pytest.LogCaptureFixture) -> None:
    """A fuzzer failing 100 request codes from one host gets ``burst`` lines and one summary per
    interval, not that many per code; the summary still counts each kind (top kinds named)."""
    now = [0.0]
    limiter = PeerLogLimiter(
        logging.getLogger("test.limiter"), "bad requests", burst=3, interval=60, clock=lambda: now[0]
    )
    caplog.set_level(logging.INFO, "test.limiter")
    for code in range(100):
        kind = f"code {code} failures" if code < 2 else ""  # two named kinds, the rest unnamed
        for _ in range(10):
            limiter.log(logging.WARNING, f"10.0.0.9:{code}", "code %d failed", code, kind=kind)
    assert len(caplog.records) == 3
    limiter.flush()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4
    assert messages[-1] == (
        "997 more bad requests from 10.0.0.9 in the last 0 s "
        "(suppressed: code 0 failures 7, code 1 failures 10, other 980)"
    )


def test_limited_lines_clip_long_arguments(caplog: pytest.LogCaptureFixture) -> None:
    limiter = PeerLogLimiter(logging.getLogger("test.limiter"), "bad requests")
    caplog.set_level(logging.INFO, "test.limiter")
    huge = "x" * 70_000
    assert limiter.warning("10.0.0.3:1", "bad heartbeat from %s: %s", "10.0.0.3:1", ValueError(huge))
    (line,) = [r.getMessage() for r in caplog.records]
    assert len(line) < 400
    assert line.endswith("...(70000 chars)")
