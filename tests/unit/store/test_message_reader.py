"""MessageReader: the scan of a pull without a tag filter gives exactly what the entry-by-entry scan
gives (records, queue offsets, next offset, status, slave advice), across segment rolls, interleaved
queues, per-pull count and byte limits, in-memory and in-disk limits."""

from __future__ import annotations

import random
import struct

import pytest

from tests.unit.store.conftest import StoreFactory, inner, result_fields
from tidemq.protocol.message_codec import decode_messages
from tidemq.store import GetMessageStatus, MessageStore
from tidemq.store.config import CQ_STORE_UNIT_SIZE
from tidemq.store.message_reader import MessageReader


def _fill(store: MessageStore, rng: random.Random, count: int, one_size: bool = False) -> None:
    """Messages of random sizes on queues 0 and 1: runs that are contiguous in the commit log, single
    messages that interleave the queues, and batches of one size; ``one_size``: every body 40 bytes
    (records of one size: the reader's one-size scan)."""
    sent = 0
    while sent < count:
        queue = rng.randrange(2)
        if one_size:
            batch = [
                inner(body=bytes([65 + sent % 26]) * 40, queue_id=queue) for _ in range(rng.randrange(1, 30))
            ]
            assert store.put_messages(batch).is_ok
            sent += len(batch)
        elif rng.random() < 0.5:
            size = rng.randrange(1, 60)
            batch = [
                inner(body=bytes([65 + sent % 26]) * size, queue_id=queue)
                for _ in range(rng.randrange(1, 12))
            ]
            assert store.put_messages(batch).is_ok
            sent += len(batch)
        else:
            body = bytes([97 + sent % 26]) * rng.randrange(1, 300)
            assert store.put_message(inner(body=body, queue_id=queue)).is_ok
            sent += 1


@pytest.mark.parametrize("one_size", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_unfiltered_scan_equals_the_entry_by_entry_scan(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, seed: int, one_size: bool
) -> None:
    rng = random.Random(seed)
    store = open_store(
        mapped_file_size_consume_queue=20 * rng.choice([10, 64, 1000]),
        max_transfer_count_on_message_in_memory=rng.choice([8, 32, 500]),
        max_transfer_bytes_on_message_in_memory=rng.choice([2000, 256 * 1024]),
        max_transfer_count_on_message_in_disk=rng.choice([4, 8]),
        max_transfer_bytes_on_message_in_disk=rng.choice([900, 64 * 1024]),
    )
    _fill(store, rng, 400, one_size)
    if one_size and seed % 3 == 0:  # damaged entries: each points at another record of the same size
        for queue in (0, 1):
            cq = store.find_consume_queue("T", queue)
            assert cq is not None
            entries = [cq.get_unit(i) for i in range(store.get_max_offset_in_queue("T", queue))]
            for i in rng.sample(range(len(entries)), 4):
                victim = entries[rng.randrange(len(entries))]
                assert victim is not None
                cq._write_at(i * CQ_STORE_UNIT_SIZE, struct.pack(">q", victim.commit_log_offset))
    if seed % 2:  # most of the log counts as "in disk": the other limits, and advice to pull from a slave
        store._reader.memory_limit = rng.randrange(0, store.commit_log.get_max_offset())
    queries = [
        (queue, rng.randrange(0, store.get_max_offset_in_queue("T", queue) + 2), rng.choice([1, 7, 32, 2000]))
        for queue in (0, 1)
        for _ in range(60)
    ]
    fast = [store.get_message("g", "T", q, offset, n, None) for q, offset, n in queries]
    monkeypatch.setattr(MessageReader, "_scan_unfiltered", lambda *args: False)
    slow = [store.get_message("g", "T", q, offset, n, None) for q, offset, n in queries]
    assert [result_fields(r) for r in fast] == [result_fields(r) for r in slow]
    found = [r for r in fast if r.status is GetMessageStatus.FOUND]
    assert found and any(len(r.chunks) < r.message_count for r in found)  # runs were read as one chunk


def test_pull_body_is_every_record_in_queue_order(open_store: StoreFactory) -> None:
    store = open_store(
        max_transfer_count_on_message_in_memory=1000, max_transfer_bytes_on_message_in_memory=10**6
    )
    bodies = [f"m{i}".encode() * (1 + i % 5) for i in range(300)]
    for start in range(0, 300, 10):  # batches on queue 0, singles on queue 1 in between, segment rolls
        assert store.put_messages([inner(body=b, queue_id=0) for b in bodies[start : start + 10]]).is_ok
        assert store.put_message(inner(body=b"other", queue_id=1)).is_ok
    got: list[bytes] = []
    offset = 0
    while offset < store.get_max_offset_in_queue("T", 0):
        result = store.get_message("g", "T", 0, offset, 1000, None)
        assert result.status is GetMessageStatus.FOUND
        got += [m.body for m in decode_messages(result.body())]
        offset = result.next_begin_offset
    assert got == bodies
