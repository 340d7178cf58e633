"""RemotingServer / RemotingClient over real sockets on ephemeral ports."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_for
from tidemq.errors import (
    LocalProtocolError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import FrameDecoder, RemotingCommand, encode_command
from tidemq.remoting import Channel, RemotingClient, RemotingServer
from tidemq.remoting.channel import call_after_write

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cpp_client"
ECHO = 9001
NEVER = 9002
BOOM = 9003
BAD = 9004
CLOSE = 9005
CALLBACK = 9006
ORDERED = 9007
LATE = 9008
ONEWAY = 9009
AFTER = 9010
AFTER_WAIT = 9011


class Processors:
    """Test processors keyed by the codes above."""

    def __init__(self) -> None:
        self.oneway_seen: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.gates: dict[str, asyncio.Event] = {}
        self.arrived: asyncio.Queue[str] = asyncio.Queue()
        self.late: list[tuple[Channel, RemotingCommand]] = []
        self.late_ready = asyncio.Event()
        self.events: list[str] = []

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        code = request.code
        if code == ECHO:
            return RemotingCommand.create_response(
                ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields), body=request.body
            )
        if code == NEVER:
            return None
        if code == BOOM:
            raise KeyError("no such thing")
        if code == BAD:
            from tidemq.errors import RemoteProtocolError

            raise RemoteProtocolError("field 'topic' is missing")
        if code == CLOSE:
            channel.close("test asked")
            return None
        if code == CALLBACK:
            notify = RemotingCommand.create_request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"}
            )
            answer = await channel.invoke(notify, timeout=5.0)
            return RemotingCommand.create_response(ResponseCode.SUCCESS, remark=answer.remark)
        if code == ORDERED:
            key = request.ext_fields["key"]
            gate = self.gates.setdefault(key, asyncio.Event())
            await self.arrived.put(key)
            await gate.wait()
            return RemotingCommand.create_response(ResponseCode.SUCCESS, ext_fields={"key": key})
        if code == LATE:
            self.late.append((channel, request))
            self.late_ready.set()
            return None
        if code == ONEWAY:
            await self.oneway_seen.put(request)
            return RemotingCommand.create_response(ResponseCode.SUCCESS, remark="must not be sent")
        if code in (AFTER, AFTER_WAIT):
            transport: Any = channel._transport
            write = transport.write
            events = self.events

            def logged_write(data: bytes) -> None:
                events.append("write")
                write(data)

            transport.write = logged_write
            assert call_after_write(lambda: events.append("after"))
            if code == AFTER_WAIT:  # answers later, as a SYNC_FLUSH send after its fsync
                loop = asyncio.get_running_loop()
                resumed = loop.create_future()
                loop.call_soon(resumed.set_result, None)
                await resumed
            events.append("processed")
            return RemotingCommand.create_response(ResponseCode.SUCCESS)
        raise AssertionError(f"unexpected code {code}")


@pytest.fixture
def processors() -> Processors:
    return Processors()


@pytest.fixture
async def server(processors: Processors) -> AsyncIterator[RemotingServer]:
    srv = RemotingServer("127.0.0.1", 0, max_frame_size=64 * 1024)
    for code in (ECHO, NEVER, BOOM, BAD, CLOSE, CALLBACK, ORDERED, LATE, ONEWAY, AFTER, AFTER_WAIT):
        srv.register_processor(code, processors)
    await srv.start()
    yield srv
    await srv.shutdown()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    cli = RemotingClient()
    yield cli
    await cli.close()


def addr_of(server: RemotingServer) -> str:
    return f"127.0.0.1:{server.port}"


async def test_request_response_round_trip(server: RemotingServer, client: RemotingClient) -> None:
    """A request's ext fields and body come back in the response, with the same opaque."""
    request = RemotingCommand.create_request(ECHO, {"topic": "T", "queueId": "3"}, b"\x00payload")
    response = await client.invoke(addr_of(server), request, timeout=5.0)
    assert response.code == ResponseCode.SUCCESS
    assert response.is_response
    assert response.opaque == request.opaque
    assert response.ext_fields == {"topic": "T", "queueId": "3"}
    assert response.body == b"\x00payload"


async def test_many_concurrent_requests_answered_out_of_order(
    server: RemotingServer, client: RemotingClient, processors: Processors
) -> None:
    """64 requests in flight on one connection, released in reverse order, each gets its own answer."""
    addr = addr_of(server)
    keys = [str(i) for i in range(64)]
    calls = [
        asyncio.ensure_future(
            client.invoke(addr, RemotingCommand.create_request(ORDERED, {"key": k}), timeout=10.0)
        )
        for k in keys
    ]
    for _ in keys:
        await asyncio.wait_for(processors.arrived.get(), 5.0)
    assert len(client.channels) == 1
    for k in reversed(keys):
        processors.gates[k].set()
    responses = await asyncio.gather(*calls)
    assert [r.ext_fields["key"] for r in responses] == keys


async def test_oneway_request_gets_no_response(server: RemotingServer, processors: Processors) -> None:
    """A oneway request reaches its processor, and nothing is written back for it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    oneway = RemotingCommand.create_request(ONEWAY, {"k": "v"}, oneway=True)
    echo = RemotingCommand.create_request(ECHO, {"after": "oneway"})
    writer.write(encode_command(oneway))
    seen = await asyncio.wait_for(processors.oneway_seen.get(), 5.0)
    assert seen.ext_fields == {"k": "v"}
    writer.write(encode_command(echo))
    decoder = FrameDecoder()
    frames: list[RemotingCommand] = []
    async with asyncio.timeout(5.0):
        while not frames:
            frames += decoder.feed(await reader.read(65536))
    assert [f.opaque for f in frames] == [echo.opaque]
    writer.close()


async def test_oneway_through_client(
    server: RemotingServer, client: RemotingClient, processors: Processors
) -> None:
    """RemotingClient.invoke_oneway delivers the request and returns without a response."""
    await client.invoke_oneway(addr_of(server), RemotingCommand.create_request(ONEWAY, {"n": "1"}))
    seen = await asyncio.wait_for(processors.oneway_seen.get(), 5.0)
    assert seen.is_oneway and seen.ext_fields == {"n": "1"}


async def test_timeout_names_address_code_and_timeout(server: RemotingServer, client: RemotingClient) -> None:
    """An unanswered request raises RemotingTimeoutError saying where, which code and how long."""
    addr = addr_of(server)
    with pytest.raises(RemotingTimeoutError) as info:
        await client.invoke(addr, RemotingCommand.create_request(NEVER), timeout=0.2)
    text = str(info.value)
    assert addr in text and str(NEVER) in text and "0.2" in text
    assert isinstance(info.value, TimeoutError)
    # The connection stays usable afterwards.
    ok = await client.invoke(addr, RemotingCommand.create_request(ECHO), timeout=5.0)
    assert ok.code == ResponseCode.SUCCESS


async def test_connection_closed_while_waiting(server: RemotingServer, client: RemotingClient) -> None:
    """When the server closes the connection, a waiting request fails at once (not by timeout)."""
    addr = addr_of(server)
    with pytest.raises(RemotingSendRequestError, match=r"closed"):
        await client.invoke(addr, RemotingCommand.create_request(CLOSE), timeout=30.0)
    # The client reconnects on the next call.
    ok = await client.invoke(addr, RemotingCommand.create_request(ECHO), timeout=5.0)
    assert ok.code == ResponseCode.SUCCESS


async def test_server_initiated_request_reaches_client_processor(
    server: RemotingServer, client: RemotingClient
) -> None:
    """The server can invoke the client over the client's own connection (NOTIFY_CONSUMER_IDS_CHANGED)."""
    received: list[tuple[str, RemotingCommand]] = []

    class Notified:
        async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
            received.append((channel.remote_addr, request))
            return RemotingCommand.create_response(ResponseCode.SUCCESS, remark="rebalanced")

    client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, Notified())
    response = await client.invoke(addr_of(server), RemotingCommand.create_request(CALLBACK), timeout=5.0)
    assert response.code == ResponseCode.SUCCESS
    assert response.remark == "rebalanced"
    assert received[0][0] == addr_of(server)
    assert received[0][1].ext_fields == {"consumerGroup": "g"}


async def test_late_response_via_send_response(
    server: RemotingServer, client: RemotingClient, processors: Processors
) -> None:
    """A processor returning None can answer later with channel.send_response (long polling)."""
    call = asyncio.ensure_future(
        client.invoke(addr_of(server), RemotingCommand.create_request(LATE), timeout=5.0)
    )
    await asyncio.wait_for(processors.late_ready.wait(), 5.0)
    channel, request = processors.late[0]
    await channel.send_response(request, RemotingCommand.create_response(ResponseCode.PULL_NOT_FOUND))
    response = await call
    assert response.code == ResponseCode.PULL_NOT_FOUND


async def test_unknown_code_is_not_supported(server: RemotingServer, client: RemotingClient) -> None:
    """An unregistered request code gets REQUEST_CODE_NOT_SUPPORTED with RocketMQ's remark."""
    response = await client.invoke(addr_of(server), RemotingCommand.create_request(4242), timeout=5.0)
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == " request type 4242 not supported"


async def test_processor_exceptions_become_system_error(
    server: RemotingServer, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A crashing processor answers SYSTEM_ERROR with the exception text, logs it, and the server goes on."""
    addr = addr_of(server)
    with caplog.at_level(logging.ERROR, logger="tidemq.remoting"):
        boom = await client.invoke(addr, RemotingCommand.create_request(BOOM), timeout=5.0)
    assert boom.code == ResponseCode.SYSTEM_ERROR
    assert boom.remark is not None and "KeyError" in boom.remark and "no such thing" in boom.remark
    assert any("9003" in r.getMessage() and r.exc_info for r in caplog.records)
    bad = await client.invoke(addr, RemotingCommand.create_request(BAD), timeout=5.0)
    assert bad.code == ResponseCode.SYSTEM_ERROR
    assert bad.remark == "field 'topic' is missing"
    ok = await client.invoke(addr, RemotingCommand.create_request(ECHO), timeout=5.0)
    assert ok.code == ResponseCode.SUCCESS


async def test_malformed_frame_closes_only_that_connection(
    server: RemotingServer, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Garbage on one connection closes it with a warning; another client keeps working."""
    addr = addr_of(server)
    assert (await client.invoke(addr, RemotingCommand.create_request(ECHO), timeout=5.0)).code == 0
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    header = b"{not json"
    with caplog.at_level(logging.WARNING, logger="tidemq.remoting"):
        writer.write(struct.pack(">ii", 4 + len(header), len(header)) + header)
        assert await asyncio.wait_for(reader.read(), 5.0) == b""  # EOF: closed by the server
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("JSON" in m and "127.0.0.1:" in m for m in warning)
    writer.close()
    assert (await client.invoke(addr, RemotingCommand.create_request(ECHO), timeout=5.0)).code == 0


async def test_oversized_frame_closes_connection(
    server: RemotingServer, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A frame announcing more than max_frame_size closes the connection before reading it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    with caplog.at_level(logging.WARNING, logger="tidemq.remoting"):
        writer.write(struct.pack(">i", 10 * 1024 * 1024))
        assert await asyncio.wait_for(reader.read(), 5.0) == b""
    assert any("10485760" in r.getMessage() for r in caplog.records)
    writer.close()
    assert (await client.invoke(addr_of(server), RemotingCommand.create_request(ECHO), timeout=5.0)).code == 0


async def test_oversized_request_is_refused_locally(server: RemotingServer) -> None:
    """The client will not send a frame over its cap; it raises LocalProtocolError instead."""
    small = RemotingClient(max_frame_size=1024)
    try:
        with pytest.raises(LocalProtocolError):
            await small.invoke(
                addr_of(server), RemotingCommand.create_request(ECHO, body=b"x" * 2048), timeout=5.0
            )
    finally:
        await small.close()


async def test_concurrent_callers_share_one_connect(server: RemotingServer, client: RemotingClient) -> None:
    """Twenty simultaneous first calls to an address open a single connection."""
    addr = addr_of(server)
    results = await asyncio.gather(
        *(client.invoke(addr, RemotingCommand.create_request(ECHO), timeout=5.0) for _ in range(20))
    )
    assert all(r.code == ResponseCode.SUCCESS for r in results)
    assert len(server.channels) == 1


async def test_connect_refused_raises_connect_error(client: RemotingClient) -> None:
    """Calling an address with nothing listening raises RemotingConnectError naming it."""
    probe = RemotingServer("127.0.0.1", 0)
    await probe.start()
    port = probe.port
    await probe.shutdown()
    with pytest.raises(RemotingConnectError, match=f"127.0.0.1:{port}"):
        await client.invoke(f"127.0.0.1:{port}", RemotingCommand.create_request(ECHO), timeout=2.0)
    with pytest.raises(RemotingConnectError, match="host:port"):
        await client.invoke("no-port-here", RemotingCommand.create_request(ECHO), timeout=2.0)


async def test_channel_listeners_see_connect_and_close(server: RemotingServer) -> None:
    """Server channel listeners hear about a client connecting and disconnecting."""
    events: list[tuple[str, str]] = []

    class Listener:
        def on_channel_connect(self, channel: Channel) -> None:
            events.append(("connect", channel.remote_addr))

        def on_channel_close(self, channel: Channel) -> None:
            events.append(("close", channel.remote_addr))

    server.add_channel_listener(Listener())
    cli = RemotingClient()
    await cli.invoke(addr_of(server), RemotingCommand.create_request(ECHO), timeout=5.0)
    local = next(iter(cli.channels.values())).local_addr
    await cli.close()
    await wait_for(lambda: len(events) == 2, 5.0, "both channel events", interval=0.005)
    assert events == [("connect", local), ("close", local)]


async def test_shutdown_fails_pending_client_requests(processors: Processors) -> None:
    """Shutting the server down fails a waiting client call promptly with RemotingSendRequestError."""
    srv = RemotingServer("127.0.0.1", 0)
    srv.register_processor(NEVER, processors)
    await srv.start()
    cli = RemotingClient()
    try:
        call = asyncio.ensure_future(
            cli.invoke(addr_of(srv), RemotingCommand.create_request(NEVER), timeout=30.0)
        )
        await wait_for(
            lambda: len(srv.channels) == 1 and not call.done(),
            5.0,
            "the call to be in flight",
            interval=0.005,
        )
        await srv.shutdown()
        with pytest.raises(RemotingSendRequestError):
            await asyncio.wait_for(call, 5.0)
    finally:
        await cli.close()


async def test_cpp_client_frame_is_answered(server: RemotingServer) -> None:
    """A real C++ client frame (opaque 0, trailing newline, CPP language) gets a JSON response."""
    with (FIXTURES / "cpp_client-producer-send.jsonl").open() as fh:
        record = next(
            r for r in map(json.loads, fh) if r.get("direction") == "c2s" and r.get("kind") == "frame"
        )
    raw = base64.b64decode(record["raw_b64"])
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(raw)
    decoder = FrameDecoder()
    frames: list[RemotingCommand] = []
    async with asyncio.timeout(5.0):
        while not frames:
            data = await reader.read(65536)
            frames += decoder.feed(data)
    response = frames[0]
    assert response.is_response and response.opaque == record["header"]["opaque"]
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED  # 105 is not registered here
    writer.close()


def test_works_on_uvloop_in_a_loop_thread(processors: Processors) -> None:
    """The same server and client run on a uvloop LoopThread driven from a plain thread."""
    pytest.importorskip("uvloop")
    from tidemq.remoting import LoopThread

    async def scenario() -> tuple[RemotingCommand, RemotingCommand, str]:
        srv = RemotingServer("127.0.0.1", 0)
        for code in (ECHO, NEVER, CALLBACK):
            srv.register_processor(code, processors)
        await srv.start()
        cli = RemotingClient()

        class Notified:
            async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
                return RemotingCommand.create_response(ResponseCode.SUCCESS, remark="ok")

        cli.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, Notified())
        try:
            addr = addr_of(srv)
            echo = await cli.invoke(addr, RemotingCommand.create_request(ECHO, {"a": "1"}), 5.0)
            back = await cli.invoke(addr, RemotingCommand.create_request(CALLBACK), 5.0)
            try:
                await cli.invoke(addr, RemotingCommand.create_request(NEVER), 0.1)
                timeout_text = ""
            except RemotingTimeoutError as exc:
                timeout_text = str(exc)
            return echo, back, timeout_text
        finally:
            await cli.close()
            await srv.shutdown()

    with LoopThread("test-uvloop") as lt:
        assert type(lt.loop).__module__.startswith("uvloop")
        echo, back, timeout_text = lt.run(scenario(), timeout=20.0)
    assert echo.ext_fields == {"a": "1"}
    assert back.remark == "ok"
    assert str(NEVER) in timeout_text


async def test_backpressure_pauses_a_peer_that_does_not_read() -> None:
    """A peer that sends requests but does not read is paused, and later gets every response."""
    big = b"x" * 256 * 1024

    class Big:
        async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
            return RemotingCommand.create_response(ResponseCode.SUCCESS, body=big)

    srv = RemotingServer("127.0.0.1", 0)
    srv.register_processor(ECHO, Big())
    await srv.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port, limit=1024)
        requests = [RemotingCommand.create_request(ECHO) for _ in range(100)]
        writer.write(b"".join(encode_command(r) for r in requests))
        await wait_for(
            lambda: len(srv.channels) == 1 and srv.channels[0].write_paused,
            5.0,
            "the server's writes to pause",
            interval=0.005,
        )
        decoder = FrameDecoder()
        frames: list[RemotingCommand] = []
        async with asyncio.timeout(20.0):
            while len(frames) < len(requests):
                data = await reader.read(1 << 20)
                assert data, "server closed the connection"
                frames += decoder.feed(data)
        assert sorted(f.opaque for f in frames) == sorted(r.opaque for r in requests)
        assert all(len(f.body) == len(big) for f in frames)
        writer.close()
    finally:
        await srv.shutdown()


async def test_work_after_write_runs_once_the_answer_is_out(
    server: RemotingServer, client: RemotingClient, processors: Processors
) -> None:
    """call_after_write: work a request leaves behind (the store's dispatch after a put) runs after
    that read's answers are written, in the same loop turn; outside a read it is refused."""
    assert not call_after_write(lambda: None)
    response = await client.invoke(addr_of(server), RemotingCommand.create_request(AFTER), timeout=5.0)
    assert response.code == ResponseCode.SUCCESS
    await wait_for(lambda: "after" in processors.events, 5.0, "the work after the write")
    assert processors.events == ["processed", "write", "after"]


async def test_work_after_write_of_a_request_answered_later_follows_its_answer(
    server: RemotingServer, client: RemotingClient, processors: Processors
) -> None:
    """A request that waits before answering (a SYNC_FLUSH send waiting for its fsync): the work it
    left behind runs after its own answer is written, not before the wait ends."""
    request = RemotingCommand.create_request(AFTER_WAIT)
    response = await client.invoke(addr_of(server), request, timeout=5.0)
    assert response.code == ResponseCode.SUCCESS
    await wait_for(lambda: "after" in processors.events, 5.0, "the work after the write")
    assert processors.events == ["processed", "write", "after"]


@pytest.mark.parametrize("idle_poll_us", [0, 50_000])
async def test_server_polls_after_reads_only_when_asked(
    processors: Processors, client: RemotingClient, idle_poll_us: int
) -> None:
    """``idle_poll_us`` > 0: requests in quick succession start the loop polling after each read
    (tidemq/remoting/busy_poll.py); 0: no poller at all. Either way the answers are the same."""
    srv = RemotingServer("127.0.0.1", 0, idle_poll_us=idle_poll_us)
    srv.register_processor(ECHO, processors)
    await srv.start()
    try:
        for i in range(20):  # one client's requests back to back: each well within 50 ms of the last
            request = RemotingCommand.create_request(ECHO, {"k": "v"}, b"body%d" % i)
            response = await client.invoke(addr_of(srv), request, timeout=5.0)
            assert (response.code, response.body) == (ResponseCode.SUCCESS, b"body%d" % i)
        if idle_poll_us == 0:
            assert srv.idle_poller is None
        else:
            poller = srv.idle_poller
            assert poller is not None and poller.window_us == idle_poll_us
            await wait_for(lambda: poller.polls > 0, 5.0, "the read to start polling")
    finally:
        await srv.shutdown()
    assert srv.idle_poller is None
