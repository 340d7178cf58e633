"""ScheduleMessageService over a real MessageStore with a fake clock: due times, order, restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.schedule import (
    ScheduleMessageService,
    compute_deliver_timestamp,
    correct_deliver_timestamp,
    restore_real_message,
)
from tidemq.protocol.filter import tags_hash
from tidemq.protocol.message import MessageConst
from tidemq.store.config import MessageStoreConfig
from tidemq.store.message_store import SCHEDULE_TOPIC, MessageStore
from tidemq.store.results import MessageExtBrokerInner, PutMessageStatus

HOST = "127.0.0.1:10911"
TABLE = "1s 5s 10s"


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_store(root: Path, clock: Clock) -> MessageStore:
    cfg = MessageStoreConfig(
        store_path_root_dir=str(root), mapped_file_size_commit_log=1 << 20, message_delay_level=TABLE
    )
    store = MessageStore(cfg, store_host=HOST)
    store.clock_ms = clock
    store.load()
    return store


def put_delayed(store: MessageStore, body: bytes, level: int, *, topic: str = "T", qid: int = 2) -> None:
    props = {MessageConst.PROPERTY_DELAY_TIME_LEVEL: str(level), MessageConst.PROPERTY_TAGS: "TagA", "k": "v"}
    inner = MessageExtBrokerInner(
        topic,
        body,
        properties=props,
        queue_id=qid,
        born_host="10.0.0.1:5000",
        born_timestamp=1,
        reconsume_times=2,
    )
    assert store.put_message(inner).status is PutMessageStatus.PUT_OK


def bodies(store: MessageStore, topic: str, qid: int) -> list[bytes]:
    from tidemq.protocol.message_codec import decode_messages

    result = store.get_message("g", topic, qid, 0, 64, None)
    return [m.body for buf in result.message_buffers for m in decode_messages(buf)]


def service(store: MessageStore, root: Path, clock: Clock) -> ScheduleMessageService:
    svc = ScheduleMessageService(
        store, store.config.delay_level_table(), root / "config" / "delayOffset.json"
    )
    svc.clock_ms = clock
    svc.load()
    return svc


def test_delayed_message_is_parked_then_delivered_when_due(tmp_path: Path) -> None:
    clock = Clock()
    store = open_store(tmp_path, clock)
    put_delayed(store, b"a", 2)
    assert bodies(store, "T", 2) == []
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 1) == 1
    svc = service(store, tmp_path, clock)
    assert svc.deliver_due_messages(2) == pytest.approx(5.0)
    clock.now += 4_999
    assert svc.deliver_due_messages(2) == pytest.approx(0.001)
    assert bodies(store, "T", 2) == []
    clock.now += 1
    assert svc.deliver_due_messages(2) is None
    assert bodies(store, "T", 2) == [b"a"]
    assert svc.offset_table[2] == 1
    from tidemq.protocol.message_codec import decode_messages

    buf = store.get_message("g", "T", 2, 0, 1, None).message_buffers[0]
    (msg,) = decode_messages(buf)
    assert MessageConst.PROPERTY_DELAY_TIME_LEVEL not in msg.properties
    assert msg.tags == "TagA" and msg.properties["k"] == "v" and msg.reconsume_times == 2
    store.shutdown()


def test_levels_are_independent_and_keep_queue_order(tmp_path: Path) -> None:
    clock = Clock()
    store = open_store(tmp_path, clock)
    for i in range(5):
        put_delayed(store, f"l1-{i}".encode(), 1)
        put_delayed(store, f"l3-{i}".encode(), 3)
        clock.now += 10
    svc = service(store, tmp_path, clock)
    clock.now += 1_000
    svc.deliver_due_messages(1)
    svc.deliver_due_messages(3)
    assert bodies(store, "T", 2) == [b"l1-0", b"l1-1", b"l1-2", b"l1-3", b"l1-4"]
    clock.now += 10_000
    svc.deliver_due_messages(3)
    assert bodies(store, "T", 2)[5:] == [f"l3-{i}".encode() for i in range(5)]
    store.shutdown()


def test_offsets_survive_restart_without_redelivery(tmp_path: Path) -> None:
    clock = Clock()
    store = open_store(tmp_path, clock)
    put_delayed(store, b"first", 1)
    clock.now += 500
    put_delayed(store, b"second", 1)
    svc = service(store, tmp_path, clock)
    clock.now += 600  # only the first is due
    assert svc.deliver_due_messages(1) == pytest.approx(0.4)
    svc.persist()
    store.shutdown()
    saved = orjson.loads((tmp_path / "config" / "delayOffset.json").read_bytes())
    assert saved == {"offsetTable": {"1": 1}}

    store = open_store(tmp_path, clock)
    svc = service(store, tmp_path, clock)
    assert svc.offset_table[1] == 1
    clock.now += 1_000
    svc.deliver_due_messages(1)
    assert bodies(store, "T", 2) == [b"first", b"second"]
    store.shutdown()


def test_java_style_offset_file_and_out_of_range_offsets_are_corrected(tmp_path: Path) -> None:
    clock = Clock()
    store = open_store(tmp_path, clock)
    put_delayed(store, b"x", 1)
    path = tmp_path / "config" / "delayOffset.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"offsetTable":{1:7,2:0}}')  # fastjson writes unquoted integer keys
    svc = service(store, tmp_path, clock)
    assert svc.offset_table[1] == 1  # clamped to the queue's max offset
    store.shutdown()


async def test_timer_delivers_on_its_own_and_wakes_on_arrival(tmp_path: Path) -> None:
    clock = Clock()
    store = open_store(tmp_path, clock)
    delivered = asyncio.Event()
    svc = ScheduleMessageService(
        store,
        store.config.delay_level_table(),
        tmp_path / "config" / "delayOffset.json",
        on_delivered=lambda topic, qid: delivered.set(),
    )
    svc.clock_ms = clock
    store.message_arriving_listener = lambda topic, qid, *rest: (
        svc.notify_message_arriving(qid) if topic == SCHEDULE_TOPIC else None
    )
    await svc.start()
    try:
        clock.now -= 1_000  # stored "1 s ago": due as soon as the level's timer looks
        put_delayed(store, b"due", 1)
        clock.now += 1_000
        await asyncio.wait_for(delivered.wait(), 5)
        assert bodies(store, "T", 2) == [b"due"]
    finally:
        await svc.shutdown()
        store.shutdown()
    assert orjson.loads((tmp_path / "config" / "delayOffset.json").read_bytes())["offsetTable"]["1"] == 1


def test_restore_real_message_clears_delay_and_recomputes_tags_code() -> None:
    src = MessageExtBrokerInner(
        SCHEDULE_TOPIC,
        b"b",
        properties={
            "REAL_TOPIC": "%RETRY%g",
            "REAL_QID": "0",
            "DELAY": "3",
            "TAGS": "t1",
            "RETRY_TOPIC": "T",
        },
        queue_id=2,
        reconsume_times=4,
    )
    out = restore_real_message(src)
    assert (out.topic, out.queue_id, out.reconsume_times) == ("%RETRY%g", 0, 4)
    assert "DELAY" not in out.properties and out.properties["RETRY_TOPIC"] == "T"
    assert out.tags_code == tags_hash("t1")


@given(st.integers(0, 10**13), st.integers(0, 10**13), st.integers(1, 10**8))
def test_corrected_due_time_is_never_more_than_one_delay_away(now: int, due: int, delay: int) -> None:
    got = correct_deliver_timestamp(now, due, delay)
    assert got <= now + delay
    assert got in (due, now)


def test_compute_deliver_timestamp_uses_the_table() -> None:
    assert compute_deliver_timestamp(2, 1000, {1: 1000, 2: 5000}) == 6000
    assert compute_deliver_timestamp(9, 1000, {1: 1000}) == 2000
