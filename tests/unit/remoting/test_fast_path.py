"""A channel hands a read that is exactly one whole JSON frame to its code's fast path, and anything
else (or what the fast path declines) to the decoder and the processor, as before."""

from __future__ import annotations

from typing import Any

from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand, decode_frame, encode_command
from tidemq.remoting.channel import Channel, call_after_write
from tidemq.remoting.processor import ANSWER_LATER, RequestDispatcher


class Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000)


class General:
    async def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.create_response(ResponseCode.SUCCESS, "general")


def _channel(fast: Any) -> tuple[Channel, Transport, list[dict[str, Any]]]:
    dispatcher = RequestDispatcher()
    dispatcher.register_processor(7, General())
    seen: list[dict[str, Any]] = []

    def fast_path(channel: Any, header: dict[str, Any], body: bytes) -> bytes | None:
        seen.append(header)
        answer = fast(header, body)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    dispatcher.register_fast_path(7, fast_path)
    channel = Channel(dispatcher)
    transport = Transport()
    channel.protocol().connection_made(transport)  # type: ignore[arg-type]
    return channel, transport, seen


def _remarks(transport: Transport) -> list[str | None]:
    out = []
    for data in transport.writes:
        while data:
            n = int.from_bytes(data[:4], "big")
            out.append(decode_frame(data[4 : 4 + n]).remark)
            data = data[4 + n :]
    return out


async def test_one_whole_frame_is_answered_by_the_fast_path() -> None:
    answer = encode_command(RemotingCommand.create_response(ResponseCode.SUCCESS, "fast", opaque=3))
    channel, transport, seen = _channel(lambda header, body: answer)
    channel._on_data(encode_command(RemotingCommand(7, opaque=3, body=b"xyz")))
    assert transport.writes == [answer] and seen[0]["opaque"] == 3


async def test_declined_split_or_coalesced_frames_take_the_general_path() -> None:
    channel, transport, seen = _channel(lambda header, body: None)
    frame = encode_command(RemotingCommand(7, opaque=3))
    channel._on_data(frame)  # declined
    channel._on_data(frame[:5])  # split: the decoder keeps the head
    channel._on_data(frame[5:])
    channel._on_data(frame + frame)  # two in one read
    assert len(seen) == 1
    assert _remarks(transport) == ["general"] * 4


async def test_hooks_and_failures() -> None:
    channel, transport, seen = _channel(lambda header, body: RuntimeError("boom"))
    channel._on_data(encode_command(RemotingCommand(7, opaque=4)))
    assert _remarks(transport) == ["RuntimeError: boom"]
    channel._dispatcher.rpc_hooks.append(Hook())  # hooks see every request: no fast path
    channel._on_data(encode_command(RemotingCommand(7, opaque=5)))
    assert len(seen) == 1 and _remarks(transport)[-1] == "general"


class Hook:
    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        pass

    def do_after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand
    ) -> None:
        pass


async def test_a_late_answer_goes_out_before_the_work_after_it() -> None:
    """A fast path answering later (ANSWER_LATER): nothing written in the read; the work asked to
    run after the answer (call_after_write) runs after the late write, not before."""
    answer = encode_command(RemotingCommand.create_response(ResponseCode.SUCCESS, "late", opaque=3))
    events: list[str] = []
    late: list[Any] = []

    def fast(header: dict[str, Any], body: bytes) -> bytes:
        call_after_write(lambda: events.append("after"))
        late.append(channel.answer_later())
        return ANSWER_LATER

    channel, transport, _ = _channel(fast)
    channel._on_data(encode_command(RemotingCommand(7, opaque=3)))
    assert transport.writes == [] and events == []
    transport.write = lambda data: (events.append("written"), Transport.write(transport, data))  # type: ignore[method-assign]
    late[0](answer)
    assert transport.writes == [answer] and events == ["written", "after"]
