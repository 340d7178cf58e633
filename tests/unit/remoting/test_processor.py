"""RequestDispatcher: how processor outcomes become responses (no sockets)."""

from __future__ import annotations

from typing import Any

from tidemq.errors import RemoteProtocolError
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.remoting.processor import RequestDispatcher


class FakeChannel:
    """Records what the dispatcher writes."""

    remote_addr = "10.0.0.9:5555"
    is_active = True

    def __init__(self) -> None:
        self.written: list[RemotingCommand] = []

    def write_command(self, cmd: RemotingCommand) -> None:
        self.written.append(cmd)

    def respond_now(self, request: RemotingCommand, response: RemotingCommand) -> None:
        response.response_to(request)
        self.write_command(response)


class Answer:
    def __init__(self, result: Any) -> None:
        self.result = result

    async def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result  # type: ignore[no-any-return]


async def dispatch(dispatcher: RequestDispatcher, request: RemotingCommand) -> list[RemotingCommand]:
    channel = FakeChannel()
    await dispatcher.process(channel, request)  # type: ignore[arg-type]
    return channel.written


async def test_response_gets_request_opaque_and_response_flag() -> None:
    """The processor's response is stamped with the request's opaque and the response bit."""
    d = RequestDispatcher()
    d.register_processor(7, Answer(RemotingCommand.create_response(ResponseCode.SUCCESS)))
    request = RemotingCommand.create_request(7)
    [out] = await dispatch(d, request)
    assert out.opaque == request.opaque and out.is_response


async def test_unknown_code_remark_matches_rocketmq() -> None:
    """No processor: REQUEST_CODE_NOT_SUPPORTED and ' request type N not supported'."""
    [out] = await dispatch(RequestDispatcher(), RemotingCommand.create_request(999))
    assert out.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert out.remark == " request type 999 not supported"


async def test_default_processor_catches_unregistered_codes() -> None:
    """register_default_processor handles codes with no specific processor."""
    d = RequestDispatcher()
    d.register_default_processor(Answer(RemotingCommand.create_response(ResponseCode.SUCCESS, "default")))
    [out] = await dispatch(d, RemotingCommand.create_request(999))
    assert out.remark == "default"


async def test_protocol_error_remark_is_its_text() -> None:
    """A ProtocolError becomes SYSTEM_ERROR whose remark is exactly the error text."""
    d = RequestDispatcher()
    d.register_processor(7, Answer(RemoteProtocolError("missing field 'topic'")))
    [out] = await dispatch(d, RemotingCommand.create_request(7))
    assert (out.code, out.remark) == (ResponseCode.SYSTEM_ERROR, "missing field 'topic'")


async def test_other_exception_remark_names_type_and_text() -> None:
    """Any other exception becomes SYSTEM_ERROR naming the exception type and text."""
    d = RequestDispatcher()
    d.register_processor(7, Answer(ZeroDivisionError("division by zero")))
    [out] = await dispatch(d, RemotingCommand.create_request(7))
    assert out.code == ResponseCode.SYSTEM_ERROR
    assert out.remark == "ZeroDivisionError: division by zero"


async def test_oneway_never_answered_even_on_error() -> None:
    """Oneway requests get no response, whether the processor succeeds, fails or is missing."""
    d = RequestDispatcher()
    d.register_processor(1, Answer(RemotingCommand.create_response(ResponseCode.SUCCESS)))
    d.register_processor(2, Answer(RuntimeError("x")))
    for code in (1, 2, 3):
        assert await dispatch(d, RemotingCommand.create_request(code, oneway=True)) == []


async def test_none_means_answer_later() -> None:
    """A processor returning None writes nothing now."""
    d = RequestDispatcher()
    d.register_processor(7, Answer(None))
    assert await dispatch(d, RemotingCommand.create_request(7)) == []


async def test_rpc_hook_can_reject_and_observe() -> None:
    """A hook raising in do_before_request rejects with SYSTEM_ERROR; do_after_response sees responses."""
    seen: list[tuple[str, int]] = []

    class Hook:
        def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
            if request.ext_fields.get("AccessKey") != "ak":
                raise RemoteProtocolError("No accessKey is configured")

        def do_after_response(
            self, remote_addr: str, request: RemotingCommand, response: RemotingCommand
        ) -> None:
            seen.append((remote_addr, response.code))

    d = RequestDispatcher()
    d.rpc_hooks.append(Hook())
    d.register_processor(7, Answer(RemotingCommand.create_response(ResponseCode.SUCCESS)))
    [denied] = await dispatch(d, RemotingCommand.create_request(7))
    assert (denied.code, denied.remark) == (ResponseCode.SYSTEM_ERROR, "No accessKey is configured")
    [ok] = await dispatch(d, RemotingCommand.create_request(7, {"AccessKey": "ak"}))
    assert ok.code == ResponseCode.SUCCESS
    assert seen == [("10.0.0.9:5555", 0)]


async def test_oversized_response_becomes_system_error() -> None:
    """A response too big to encode is replaced by SYSTEM_ERROR saying so."""

    class SmallChannel(FakeChannel):
        def write_command(self, cmd: RemotingCommand) -> None:
            from tidemq.protocol.command import encode_command

            encode_command(cmd, 1024)
            self.written.append(cmd)

    d = RequestDispatcher()
    d.register_processor(7, Answer(RemotingCommand.create_response(ResponseCode.SUCCESS, body=b"x" * 4096)))
    channel = SmallChannel()
    await d.process(channel, RemotingCommand.create_request(7))  # type: ignore[arg-type]
    [out] = channel.written
    assert out.code == ResponseCode.SYSTEM_ERROR and "exceeds" in (out.remark or "")


class RecordingTransport:
    """The part of an asyncio transport a Channel uses; records each write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5555)


async def test_an_answer_made_after_the_read_is_written_in_the_step_that_makes_it() -> None:
    """A processor that waits (a SYNC_FLUSH send waiting for its fsync) answers as soon as it resumes,
    not one loop turn later; answers made inside the read still go out in one write."""
    import asyncio

    from tidemq.protocol.command import encode_command
    from tidemq.remoting.channel import Channel

    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    class Waits:
        async def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
            if request.code == 2:
                await gate
            return RemotingCommand.create_response(ResponseCode.SUCCESS, f"code {request.code}")

    dispatcher = RequestDispatcher()
    dispatcher.register_default_processor(Waits())
    channel = Channel(dispatcher)
    transport = RecordingTransport()
    channel._attach(transport)  # type: ignore[arg-type]
    frames = [encode_command(RemotingCommand.create_request(code)) for code in (1, 1, 2)]
    channel._on_data(b"".join(frames))
    assert len(transport.writes) == 1  # the two answers made in the read: one write
    await asyncio.sleep(0)  # the waiting processor's task starts waiting on the gate
    gate.set_result(None)  # queues the waiting processor's next step
    await asyncio.sleep(0)  # that step runs before this coroutine resumes
    assert len(transport.writes) == 2
    assert b"code 2" in transport.writes[1]


class NoHook:
    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        pass

    def do_after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand
    ) -> None:
        pass


async def test_a_registered_processor_answers_alike_with_and_without_hooks() -> None:
    """Without hooks a registered processor runs without make_response's coroutine: the same answers
    (a response, none, a ProtocolError, another exception; oneway or not) as through make_response."""
    outcomes: list[Any] = [
        RemotingCommand.create_response(ResponseCode.SUCCESS, "ok", {"k": "v"}),
        None,
        RemoteProtocolError("bad field"),
        ValueError("boom"),
    ]
    for result in outcomes:
        for oneway in (False, True):
            answers = []
            for hooks in ([], [NoHook()]):
                d = RequestDispatcher()
                d.rpc_hooks.extend(hooks)
                d.register_processor(7, Answer(result))
                request = RemotingCommand.create_request(7, oneway=oneway)
                request.opaque = 42
                answers.append(
                    [(c.code, c.remark, c.ext_fields, c.opaque, c.flag) for c in await dispatch(d, request)]
                )
            assert answers[0] == answers[1]
