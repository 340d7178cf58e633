"""The consume-queue scan with an SQL92 record filter: every matching record exactly once, in queue
order, across commit-log segment rolls and per-pull count limits; non-matching spans answered
NO_MATCHED_MESSAGE with the next offset past them."""

from __future__ import annotations

import random

import pytest

from tests.unit.store.conftest import StoreFactory, inner, result_fields
from tidemq.protocol.filter import tags_hash
from tidemq.protocol.message_codec import decode_messages
from tidemq.protocol.sql92 import compile_sql92
from tidemq.protocol.sql92.record import record_filter
from tidemq.store import GetMessageStatus, MessageStore
from tidemq.store.filtered_scan import RecordFilter
from tidemq.store.message_reader import MessageReader


def _scan_all(
    store: MessageStore, end: int, max_nums: int, tag_codes: set[int] | None, matcher: RecordFilter
) -> list[int]:
    """Pull the whole queue (consume-queue files hold 10 entries here); the ``i`` property of each
    message returned, checking each answer on the way."""
    got: list[int] = []
    offset = 0
    while offset < end:
        result = store.get_message("G", "T", 0, offset, max_nums, tag_codes, matcher)
        assert result.status in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE)
        assert result.message_count <= max_nums
        msgs = decode_messages(b"".join(result.chunks))
        assert result.message_queue_offsets == [m.queue_offset for m in msgs]
        got += [int(m.properties["i"]) for m in msgs]
        assert result.next_begin_offset > offset
        offset = result.next_begin_offset
    return got


@pytest.mark.parametrize("max_nums", [1, 4, 32])
def test_every_match_once_in_order(open_store: StoreFactory, max_nums: int) -> None:
    store = open_store()
    for i in range(90):  # ~8 commit-log segments of 4 KiB
        props = {"m": str(i % 3), "i": str(i)}
        assert store.put_message(
            inner(body=b"x" * (i % 50), tags="A" if i % 2 else "B", properties=props)
        ).is_ok
    matcher = record_filter(compile_sql92("m = 0"))
    assert _scan_all(store, 90, max_nums, None, matcher) == list(range(0, 90, 3))
    # with a tag filter as well: both must accept
    assert _scan_all(store, 90, max_nums, {tags_hash("A")}, matcher) == list(range(3, 90, 6))


def test_a_span_without_match_moves_past_it(open_store: StoreFactory) -> None:
    store = open_store()
    for i in range(20):
        assert store.put_message(inner(properties={"a": str(i)})).is_ok
    result = store.get_message("G", "T", 0, 0, 32, None, record_filter(compile_sql92("a > 100")))
    assert (result.status, result.next_begin_offset, result.message_count) == (
        GetMessageStatus.NO_MATCHED_MESSAGE,
        10,  # the end of the first consume-queue file
        0,
    )


@pytest.mark.parametrize("seed", range(4))
def test_a_filter_that_takes_everything_reads_what_the_plain_scan_reads(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Windows, per-pull count and byte limits (in memory and "in disk"), segment rolls, interleaved
    queues: with a filter accepting every record the filtered scan answers exactly as the
    entry-by-entry scan of RocketMQ's ``getMessage`` does."""
    rng = random.Random(seed)
    store = open_store(
        mapped_file_size_consume_queue=20 * rng.choice([10, 64, 1000]),
        max_transfer_count_on_message_in_memory=rng.choice([8, 32, 500]),
        max_transfer_bytes_on_message_in_memory=rng.choice([2000, 256 * 1024]),
        max_transfer_count_on_message_in_disk=rng.choice([4, 8]),
        max_transfer_bytes_on_message_in_disk=rng.choice([900, 64 * 1024]),
    )
    for i in range(300):
        batch = [inner(body=bytes([65 + i % 26]) * rng.randrange(1, 80), queue_id=rng.randrange(2))]
        assert store.put_messages(batch).is_ok
    if seed % 2:
        store._reader.memory_limit = rng.randrange(0, store.commit_log.get_max_offset())
    queries = [
        (queue, rng.randrange(0, store.get_max_offset_in_queue("T", queue) + 2), rng.choice([1, 7, 32, 2000]))
        for queue in (0, 1)
        for _ in range(40)
    ]
    filtered = [
        store.get_message("g", "T", q, offset, n, None, lambda buf, pos: True) for q, offset, n in queries
    ]
    monkeypatch.setattr(MessageReader, "_scan_unfiltered", lambda *args: False)
    plain = [store.get_message("g", "T", q, offset, n, None) for q, offset, n in queries]
    assert [result_fields(r) for r in filtered] == [result_fields(r) for r in plain]
    assert sum(r.message_count for r in filtered) > 100 and max(r.message_count for r in filtered) > 1
