"""MessageStore: put/get, rolls, batches, tag filter, every get status, limits, time lookups."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.store.conftest import STORE_HOST, StoreFactory, inner, make_config
from tidemq.protocol.message import MessageConst
from tidemq.protocol.message_codec import (
    BLANK_MAGIC_CODE,
    MessageSysFlag,
    decode_messages,
    read_size_and_magic,
)
from tidemq.store import (
    SCHEDULE_TOPIC,
    GetMessageStatus,
    MessageStore,
    PutMessageStatus,
    tags_string_to_tags_code,
)


def read_all(
    store: MessageStore, topic: str, queue_id: int, tag_codes: set[int] | None = None
) -> list[bytes]:
    bodies: list[bytes] = []
    offset = store.get_min_offset_in_queue(topic, queue_id)
    while True:
        res = store.get_message("g", topic, queue_id, offset, 32, tag_codes)
        if res.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE):
            return bodies
        bodies += [m.body for m in decode_messages(b"".join(res.message_buffers))]
        assert res.next_begin_offset > offset
        offset = res.next_begin_offset


def test_tags_hash_is_java_string_hash_code() -> None:
    assert tags_string_to_tags_code("TagA") == 2598919
    assert tags_string_to_tags_code("hello world") == 1794106052
    assert tags_string_to_tags_code("polygenelubricants") == -(2**31)
    assert tags_string_to_tags_code(None) == 0 and tags_string_to_tags_code("") == 0


def test_put_get_across_segment_rolls(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    bodies = [f"message-{i:04d}".encode() * 8 for i in range(200)]
    results = [store.put_message(inner(body=b, queue_id=i % 2)) for i, b in enumerate(bodies)]
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    assert [r.append_result.logics_offset for r in results if r.append_result][:4] == [0, 0, 1, 1]
    segments = sorted(os.listdir(tmp_path / "store" / "commitlog"))
    assert len(segments) > 5 and all(len(n) == 20 and int(n) % 4096 == 0 for n in segments)
    # the end of a full segment carries the blank filler
    first = (tmp_path / "store" / "commitlog" / segments[0]).read_bytes()
    last_rec = results[0].append_result
    assert last_rec is not None
    pos = 0
    while True:
        size, magic = read_size_and_magic(first, pos)
        if magic == BLANK_MAGIC_CODE:
            assert pos + size == 4096
            break
        pos += size
    assert read_all(store, "T", 0) == bodies[0::2]
    assert read_all(store, "T", 1) == bodies[1::2]
    assert store.get_max_offset_in_queue("T", 0) == 100
    # offset msg id resolves back to the message
    r = results[57].append_result
    assert r is not None
    msg = store.lookup.look_message_by_offset(r.wrote_offset)
    assert msg is not None and msg.body == bodies[57] and msg.offset_msg_id == r.msg_id
    assert msg.store_host == STORE_HOST and msg.queue_offset == 28


def test_batch_put_has_contiguous_offsets(open_store: StoreFactory) -> None:
    store = open_store()
    store.put_message(inner(body=b"first"))
    res = store.put_messages([inner(body=f"b{i}".encode()) for i in range(5)])
    assert res.is_ok and res.append_result is not None
    ar = res.append_result
    assert (ar.logics_offset, ar.msg_num, ar.queue_offsets) == (1, 5, [1, 2, 3, 4, 5])
    assert ar.msg_id.split(",") == ar.msg_ids and len(ar.msg_ids) == 5
    got = store.get_message("g", "T", 0, 1, 32, None)
    msgs = decode_messages(b"".join(got.message_buffers))
    assert [m.body for m in msgs] == [b"b0", b"b1", b"b2", b"b3", b"b4"]
    assert [m.offset_msg_id for m in msgs] == ar.msg_ids
    assert len({m.store_timestamp for m in msgs}) == 1


def test_tag_filter(open_store: StoreFactory) -> None:
    store = open_store()
    for i in range(10):
        store.put_message(inner(body=str(i).encode(), tags="A" if i % 3 == 0 else "B"))
    a = {tags_string_to_tags_code("A")}
    assert read_all(store, "T", 0, a) == [b"0", b"3", b"6", b"9"]
    res = store.get_message("g", "T", 0, 1, 1, a)
    assert res.status is GetMessageStatus.FOUND and res.message_queue_offsets == [3]
    assert res.next_begin_offset == 4
    none = store.get_message("g", "T", 0, 0, 32, {tags_string_to_tags_code("C")})
    assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 10


def test_get_statuses(open_store: StoreFactory) -> None:
    store = open_store()
    assert store.get_message("g", "nope", 0, 5, 32, None).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    store.find_consume_queue("Empty", 0, create=True)
    empty = store.get_message("g", "Empty", 0, 3, 32, None)
    assert (empty.status, empty.next_begin_offset) == (GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0)
    for i in range(3):
        store.put_message(inner(body=bytes([i])))
    one = store.get_message("g", "T", 0, 3, 32, None)
    assert (one.status, one.next_begin_offset, one.max_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 3, 3)
    badly = store.get_message("g", "T", 0, 10, 32, None)
    assert (badly.status, badly.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 0)  # min == 0
    found = store.get_message("g", "T", 0, 1, 32, None)
    assert (found.status, found.next_begin_offset, found.message_count) == (GetMessageStatus.FOUND, 3, 2)
    assert (found.min_offset, found.max_offset) == (0, 3)


def test_offset_found_null_when_consume_queue_file_missing(open_store: StoreFactory) -> None:
    store = open_store()
    for i in range(25):  # 10 units per CQ file -> 3 files
        store.put_message(inner(body=bytes([i])))
    cq = store.find_consume_queue("T", 0)
    assert cq is not None and len(cq.queue.files) == 3
    cq.queue.delete_files([cq.queue.files[1]])
    res = store.get_message("g", "T", 0, 12, 32, None)
    assert (res.status, res.next_begin_offset) == (GetMessageStatus.OFFSET_FOUND_NULL, 20)


def test_pull_stops_at_cq_file_end_and_max_msg_nums(open_store: StoreFactory) -> None:
    store = open_store()
    for i in range(25):
        store.put_message(inner(body=bytes([i])))
    res = store.get_message("g", "T", 0, 5, 32, None)
    assert res.message_queue_offsets == [5, 6, 7, 8, 9] and res.next_begin_offset == 10
    res = store.get_message("g", "T", 0, 10, 3, None)
    assert res.message_queue_offsets == [10, 11, 12] and res.next_begin_offset == 13


def test_pull_byte_and_count_limits(open_store: StoreFactory) -> None:
    store = open_store(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 3000)
    for _ in range(5):
        store.put_message(inner(body=b"x" * 100_000))
    res = store.get_message("g", "T", 0, 0, 32, None)
    assert res.message_count == 2 and res.next_begin_offset == 2  # 256 KiB per pull
    for _ in range(60):
        store.put_message(inner(body=b"y"))
    res = store.get_message("g", "T", 0, 5, 64, None)
    assert res.message_count == 32 and res.next_begin_offset == 37  # 32 messages per pull


def test_consume_queue_scan_limit(open_store: StoreFactory) -> None:
    store = open_store(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 3000)
    store.put_messages([inner(body=b"n", tags="skip") for _ in range(1000)])
    store.put_message(inner(body=b"wanted", tags="want"))
    want = {tags_string_to_tags_code("want")}
    res = store.get_message("g", "T", 0, 0, 32, want)
    assert (res.status, res.next_begin_offset) == (
        GetMessageStatus.NO_MATCHED_MESSAGE,
        800,
    )  # 16000 bytes of CQ
    res = store.get_message("g", "T", 0, 800, 32, want)
    assert res.status is GetMessageStatus.FOUND and res.message_queue_offsets == [1000]


def test_put_refusals(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store(max_message_size=2000)
    big = store.put_message(inner(body=b"x" * 2000))
    assert big.status is PutMessageStatus.MESSAGE_ILLEGAL and "max_message_size" in big.remark
    assert store.put_message(inner(topic="t" * 128)).status is PutMessageStatus.MESSAGE_ILLEGAL
    props = store.put_message(inner(properties={"k": "v" * 40000}))
    assert props.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    batch = store.put_messages([inner(body=b"x" * 900) for _ in range(3)])
    assert batch.status is PutMessageStatus.MESSAGE_ILLEGAL and "batch" in batch.remark
    assert store.put_messages([]).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.get_max_offset_in_queue("T", 0) == 0
    unloaded = MessageStore(make_config(tmp_path / "other"), store_host=STORE_HOST)
    assert unloaded.put_message(inner()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_delay_level_goes_to_schedule_topic(open_store: StoreFactory) -> None:
    store = open_store()
    store.clock_ms = lambda: 1_000_000
    res = store.put_message(inner(topic="Real", queue_id=5, properties={"DELAY": "3"}, tags="t"))
    assert res.is_ok
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 2) == 1
    got = store.get_message("g", SCHEDULE_TOPIC, 2, 0, 32, None)
    [msg] = decode_messages(got.message_buffers[0])
    assert msg.properties[MessageConst.PROPERTY_REAL_TOPIC] == "Real"
    assert msg.properties[MessageConst.PROPERTY_REAL_QUEUE_ID] == "5"
    cq = store.find_consume_queue(SCHEDULE_TOPIC, 2)
    assert cq is not None and (unit := cq.get_unit(0)) is not None
    assert unit.tags_code == 1_000_000 + 10_000  # deliver time = store time + 10 s (level 3)
    # a level above 18 is clamped
    store.put_message(inner(topic="Real", properties={"DELAY": "99"}))
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 17) == 1


def test_prepared_transaction_gets_no_queue_entry(open_store: StoreFactory) -> None:
    store = open_store()
    res = store.put_message(inner(sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE))
    assert res.is_ok and res.append_result is not None
    assert store.get_max_offset_in_queue("T", 0) == 0
    assert store.lookup.look_message_by_offset(res.append_result.wrote_offset) is not None


def test_offset_by_timestamp_and_store_times(open_store: StoreFactory) -> None:
    store = open_store()
    times = iter([1000, 2000, 2000, 3000, 5000, 9000])
    store.clock_ms = lambda: next(times)
    for _ in range(6):
        store.put_message(inner())
    by_time = store.lookup.get_offset_in_queue_by_time
    assert by_time("T", 0, 1000) == 0
    assert by_time("T", 0, 3000) == 3
    assert by_time("T", 0, 3900) == 3  # closer to 3000 than 5000
    assert by_time("T", 0, 4100) == 4
    assert by_time("T", 0, 4000) == 3  # tie -> the earlier neighbour
    assert by_time("T", 0, 2000) in (1, 2)
    assert by_time("T", 0, 10) == 0
    assert by_time("T", 0, 99999) == 5
    assert by_time("nope", 0, 1000) == 0
    assert store.lookup.get_earliest_message_time("T", 0) == 1000
    assert store.lookup.get_earliest_message_time("nope", 0) == -1
    assert store.lookup.get_message_store_timestamp("T", 0, 4) == 5000
    assert store.lookup.get_message_store_timestamp("T", 0, 6) == -1


def test_time_never_goes_backwards(open_store: StoreFactory) -> None:
    store = open_store()
    times = iter([5000, 4000])
    store.clock_ms = lambda: next(times)
    store.put_message(inner())
    store.put_message(inner())
    assert store.lookup.get_message_store_timestamp("T", 0, 1) == 5000


def test_select_and_look_by_offset(open_store: StoreFactory) -> None:
    store = open_store()
    res = store.put_message(inner(body=b"abc"))
    assert res.append_result is not None
    raw = store.lookup.select_one_message_by_offset(res.append_result.wrote_offset)
    assert raw is not None and len(raw) == res.append_result.wrote_bytes
    assert store.lookup.select_one_message_by_offset(123456) is None
    assert store.lookup.look_message_by_offset(99999) is None


def test_flush_from_another_thread_while_putting(open_store: StoreFactory) -> None:
    store = open_store(mapped_file_size_commit_log=1 << 16, flush_disk_type="SYNC_FLUSH")
    done = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not done.is_set():
                assert store.flush() <= store.get_max_phy_offset()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for i in range(500):
            assert store.put_message(inner(body=bytes(100), queue_id=i % 4)).is_ok
    finally:
        done.set()
        t.join(10)
    assert not errors
    assert store.flush() == store.get_max_phy_offset()


def test_arriving_listener_and_topics(open_store: StoreFactory) -> None:
    store = open_store()
    seen: list[tuple[str, int, int]] = []
    store.message_arriving_listener = lambda topic, qid, max_off, tags, ts: seen.append((topic, qid, max_off))
    store.put_message(inner(topic="A", queue_id=1))
    store.put_messages([inner(topic="B"), inner(topic="B")])
    assert seen == [("A", 1, 1), ("B", 0, 2)]
    assert store.consume_queues.topics_and_queues() == {"A": [1], "B": [0]}
    assert store.delete_topics({"A"}) == 1
    assert store.consume_queues.topics_and_queues() == {"B": [0]}


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from(["a", "b", ""]), st.binary(max_size=300)), max_size=60
    )
)
def test_property_store_matches_model(ops: list[tuple[int, str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        store = MessageStore(make_config(Path(d)), store_host=STORE_HOST)
        store.load()
        for qid, tag, body in ops:
            assert store.put_message(inner(body=body, queue_id=qid, tags=tag or None)).is_ok
        for qid in range(3):
            expect = [b for q, _, b in ops if q == qid]
            assert read_all(store, "T", qid) == expect
            assert read_all(store, "T", qid, {tags_string_to_tags_code("a")}) == [
                b for q, t, b in ops if q == qid and t == "a"
            ]
        store.shutdown()
        reopened = MessageStore(make_config(Path(d)), store_host=STORE_HOST)
        reopened.load()
        for qid in range(3):
            assert read_all(reopened, "T", qid) == [b for q, _, b in ops if q == qid]
        reopened.shutdown()
