"""The SEND_MESSAGE_V2 fast path (answered from the decoded frame) answers, stores and counts exactly
what the general path (decode, SendMessageProcessor, encode) does, and declines without doing anything
whatever it does not take."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.broker import test_send_plain
from tidemq.broker.processor import send as send_module
from tidemq.broker.processor.send import SendMessageProcessor
from tidemq.broker.processor.send_fast import FastSend
from tidemq.protocol.command import decode_frame, encode_command

_PAIR = st.tuples(
    st.sampled_from(
        ["TAGS", "KEYS", "UNIQ_KEY", "UNIQ_KEY", "WAIT", "CLUSTER", "DELAY", "TIMER_DELAY_SEC", "A", ""]
    ),
    st.sampled_from(["", "x", "true", "false", "3", "\u00e9t\u00e9"]),
)
_PROPS = st.lists(_PAIR, max_size=4).map(lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs))
_ODD = st.sampled_from(["", "0", "1", "05", "-1", "true", "false", "x", 3, True, "9999999999"])
_USUAL = st.fixed_dictionaries(
    {
        "b": st.sampled_from(["T", "M", "T", "T", "%RETRY%g", "Unknown"]),  # M: a MULTI_TAG topic
        "e": st.sampled_from(["0", "1", "0", "1", "2", "-1"]),
        "f": st.sampled_from(["0", "0", "4", "8"]),  # 8: a prepared transaction's flag
        "i": st.one_of(_PROPS, _PROPS, st.none()),
        "j": st.sampled_from([None, "0", "2"]),
        "k": st.sampled_from([None, "false"]),
        "l": st.sampled_from([None, "16"]),
        "m": st.sampled_from([None, "false"]),
        "n": st.sampled_from([None, "broker-a"]),
    }
)
_ONE_ODD = st.tuples(st.sampled_from("abcdefghijklmn"), _ODD).map(lambda odd: [odd])
_SEND = st.tuples(_USUAL, st.sampled_from([[], [], []]) | _ONE_ODD).map(
    lambda usual_odd: {**usual_odd[0], **dict(usual_odd[1])}  # now and then one field set to anything
)
_FRAME = st.tuples(
    _SEND,
    st.sampled_from([b"", b"body", b"x" * 700]),  # 700: past max_message_size
    st.sampled_from([0, 0, 0, 0, 2]),  # 2: oneway
    st.sampled_from(["JAVA", "JAVA", "JAVA", "CPP", 1]),
    st.sampled_from([1, 7, 0x7FFFFFFF]),
)


def _whole(fields: dict[str, Any], body: bytes, flag: int, language: Any, opaque: int) -> bytes:
    ext = {"a": "pg", "c": "TBW102", "d": "4", "g": "1700000000123", "h": "0", **fields}
    ext = {k: v for k, v in ext.items() if v is not None}
    header = {
        "code": 310,
        "extFields": ext,
        "flag": flag,
        "language": language,
        "opaque": opaque,
        "version": 409,
    }
    raw = orjson.dumps(header)
    return (4 + len(raw) + len(body)).to_bytes(4, "big") + len(raw).to_bytes(4, "big") + raw + body


def _processor(root: Path) -> SendMessageProcessor:
    """test_send_plain's processor, whose topic manager also creates nothing on a send."""
    processor = test_send_plain._processor(root)
    tcm = processor.broker.topic_config_manager
    tcm.create_topic_in_send_message_method = lambda *args: None
    tcm.create_topic_in_send_message_back_method = lambda *args: None
    return processor


class GroupCommit:
    """A group commit whose fsync succeeds (``ok``) or times out, now or one loop turn later."""

    def __init__(self, ok: bool, later: bool) -> None:
        self.ok, self.later = ok, later

    async def wait_for_flush(self, end_offset: int) -> bool:
        if self.later:
            await asyncio.sleep(0)
        return self.ok

    def add_waiter(self, end_offset: int, fut: asyncio.Future[bool]) -> asyncio.TimerHandle | None:
        if not self.later:
            fut.set_result(self.ok)
            return None
        loop = fut.get_loop()
        loop.call_soon(fut.set_result, self.ok)
        return loop.call_later(60, lambda: None)


def _sync(processor: SendMessageProcessor, flush: GroupCommit | None) -> None:
    broker = processor.broker
    broker.group_commit_service = flush
    broker.wait_for_flush = None if flush is None else flush.wait_for_flush


async def _general(processor: SendMessageProcessor, frame: bytes) -> bytes | None:
    request = decode_frame(frame[4:])
    channel: Any = SimpleNamespace(remote_addr="10.0.0.1:5000")
    response = await processor.process_request(channel, request)
    if response is None or request.is_oneway:
        return None
    return encode_command(response.response_to(request))


async def _fast(processor: SendMessageProcessor, fast: FastSend, frame: bytes) -> bytes | None:
    """What the channel does: the fast path (its answer now or later), else the general path."""
    hlen = int.from_bytes(frame[4:8], "big")
    late: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    channel: Any = SimpleNamespace(remote_addr="10.0.0.1:5000", answer_later=lambda: late.set_result)
    answer = fast(channel, orjson.loads(frame[8 : 8 + hlen]), frame[8 + hlen :])
    if answer is None:
        return await _general(processor, frame)
    return answer or await late


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(_FRAME, min_size=1, max_size=8),
    st.sampled_from([None, GroupCommit(True, True), GroupCommit(False, True), GroupCommit(True, False)]),
)
def test_fast_sends_answer_and_store_as_the_general_path(
    tmp_path_factory: pytest.TempPathFactory, frames: list[Any], flush: GroupCommit | None
) -> None:
    """ASYNC_FLUSH, and SYNC_FLUSH with the fsync done later, timed out, or done already."""
    root = tmp_path_factory.mktemp("send")
    quick, general = _processor(root / "fast"), _processor(root / "general")
    for processor in (quick, general):
        _sync(processor, flush)
    fast = FastSend(quick)
    quick.valid_topics.update(("T", "M", "%RETRY%g", "Unknown"))  # names the general path checks first
    clock = pytest.MonkeyPatch()
    clock.setattr(send_module, "now_ms", lambda: 1_700_000_000_000)  # timer messages: the same due time

    async def sends() -> None:
        quick.broker.loop = asyncio.get_running_loop()
        for spec in frames:
            frame = _whole(*spec)
            assert await _fast(quick, fast, frame) == await _general(general, frame)

    try:
        asyncio.run(sends())
        stores = quick.broker.store, general.broker.store
        for store in stores:
            store.dispatch_pending()
        end = stores[0].commit_log.get_max_offset()
        assert end == stores[1].commit_log.get_max_offset()
        assert stores[0].commit_log.get_message(0, end) == stores[1].commit_log.get_message(0, end)
        assert stores[0].topic_queue_table == stores[1].topic_queue_table
        stats = [p.broker.broker_stats.put_total for p in (quick, general)]
        assert stats[0] == stats[1]
    finally:
        clock.undo()
        for store in (quick.broker.store, general.broker.store):
            store.shutdown()


def test_fast_path_takes_the_usual_send_and_declines_when_the_answer_must_wait(tmp_path: Path) -> None:
    """A plain send to a checked topic is answered here; with a SYNC_MASTER's slave to wait for
    (WAIT) or a topic not checked yet it is declined, with nothing stored."""
    processor = _processor(tmp_path)
    fast = FastSend(processor)
    frame = _whole({"b": "T", "e": "1", "f": "0", "i": "UNIQ_KEY\x01AB"}, b"body", 0, "JAVA", 9)
    hlen = int.from_bytes(frame[4:8], "big")
    header, body = orjson.loads(frame[8 : 8 + hlen]), frame[8 + hlen :]
    channel: Any = SimpleNamespace(remote_addr="10.0.0.1:5000")
    try:
        assert fast(channel, header, body) is None  # topic not checked yet by the general path
        assert asyncio.run(_general(processor, frame)) is not None
        processor.broker.ha = SimpleNamespace(is_sync_master=True)
        assert fast(channel, header, body) is None  # WAIT (the default) with a slave to wait for
        processor.broker.ha = None
        stored = processor.broker.store.commit_log.get_max_offset()
        answer = fast(channel, header, body)
        assert answer is not None
        assert decode_frame(answer[4:]).ext_fields["queueOffset"] == "1"
        assert processor.broker.store.commit_log.get_max_offset() > stored
    finally:
        processor.broker.store.shutdown()
