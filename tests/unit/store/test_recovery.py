"""Restart after clean shutdown, crash recovery (torn tails, lost consume-queue entries), retention."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.store.conftest import StoreFactory, inner
from tidemq.protocol.message_codec import decode_messages, encode_stored_message
from tidemq.store import GetMessageStatus, MessageStore
from tidemq.store.consume_queue import ConsumeQueue, CqUnit


def crash(store: MessageStore) -> None:
    """Drop the store as a killed process would: no flush, no checkpoint, ``abort`` left behind."""
    store.running = False
    store.lock.release()  # the kernel drops a dead process's flock
    store.commit_log.close()
    for cq in store.consume_queue_table.values():
        cq.close()


def bodies(store: MessageStore, topic: str = "T", queue_id: int = 0) -> list[bytes]:
    out: list[bytes] = []
    offset = store.get_min_offset_in_queue(topic, queue_id)
    while (res := store.get_message("g", topic, queue_id, offset, 32, None)).status is GetMessageStatus.FOUND:
        out += [m.body for m in decode_messages(b"".join(res.message_buffers))]
        offset = res.next_begin_offset
    return out


def put_many(store: MessageStore, n: int, start: int = 0, queue_id: int = 0) -> list[bytes]:
    out = []
    for i in range(start, start + n):
        body = f"msg-{i}".encode() * 5
        assert store.put_message(inner(body=body, queue_id=queue_id)).is_ok
        out.append(body)
    return out


def last_segment(root: Path) -> Path:
    return sorted((root / "commitlog").iterdir())[-1]


def test_restart_after_clean_shutdown(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    expect = put_many(store, 120)
    end = store.get_max_phy_offset()
    store.shutdown()
    assert not (tmp_path / "store" / "abort").exists()
    again = open_store()
    assert not again.recovered_abnormally
    assert (tmp_path / "store" / "abort").exists()
    assert again.get_max_phy_offset() == end
    assert bodies(again) == expect
    res = again.put_message(inner(body=b"after"))
    assert res.append_result is not None and res.append_result.logics_offset == 120
    assert res.append_result.wrote_offset >= end
    assert bodies(again)[-1] == b"after"


@pytest.mark.parametrize("garbage", ["torn_record", "random_bytes"])
def test_crash_truncates_torn_tail(open_store: StoreFactory, tmp_path: Path, garbage: str) -> None:
    store = open_store()
    expect = put_many(store, 50)
    store.flush()
    end = store.get_max_phy_offset()
    seg = last_segment(tmp_path / "store")
    pos = end - int(seg.name)
    crash(store)
    if garbage == "torn_record":
        rec = encode_stored_message(
            topic="T", body=b"z" * 300, commit_log_offset=end, store_host="127.0.0.1:1"
        )
        junk = rec[: len(rec) // 2]
    else:
        junk = os.urandom(200)
    with open(seg, "r+b") as f:
        f.seek(pos)
        f.write(junk)
    again = open_store()
    assert again.recovered_abnormally
    assert again.get_max_phy_offset() == end
    assert bodies(again) == expect
    assert seg.read_bytes()[pos : pos + len(junk)] == bytes(len(junk))  # tail zeroed
    assert again.put_message(inner(body=b"next")).is_ok
    assert bodies(again) == [*expect, b"next"]


def test_crash_with_corrupt_body_crc_drops_only_that_record(open_store: StoreFactory, tmp_path: Path) -> None:
    """A record whose body CRC fails is set aside (bytes kept under damaged/); the records after it
    stay readable (recovery resynchronises on the next valid record instead of truncating)."""
    store = open_store(mapped_file_size_commit_log=1 << 16)
    expect = put_many(store, 10)
    r = store.put_message(inner(body=b"victim" * 10))
    expect += put_many(store, 5, start=100)
    end = store.get_max_phy_offset()
    assert r.append_result is not None
    crash(store)
    seg = last_segment(tmp_path / "store")
    with open(seg, "r+b") as f:
        f.seek(r.append_result.wrote_offset - int(seg.name) + r.append_result.wrote_bytes - 40)
        f.write(b"X")  # flips a byte inside the body (properties and topic are in the last bytes)
    again = open_store(mapped_file_size_commit_log=1 << 16)
    assert bodies(again) == expect
    assert again.get_max_phy_offset() == end
    (kept,) = (tmp_path / "store" / "damaged").iterdir()
    assert kept.stat().st_size == r.append_result.wrote_bytes


def test_crash_repairs_consume_queue_entries(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    expect = put_many(store, 8)
    store.flush_consume_queue()  # checkpoint: everything so far is dispatched and durable
    expect += put_many(store, 7, start=8)
    cq = store.find_consume_queue("T", 0)
    assert cq is not None
    cq_files = sorted(cq.queue.store_path.iterdir())
    crash(store)
    # lose the last CQ entries (not yet flushed when the process died) ...
    with open(cq_files[-1], "r+b") as f:
        f.seek(20 * 3)
        f.write(bytes(20 * 2))
    again = open_store()
    assert bodies(again) == expect
    assert again.get_max_offset_in_queue("T", 0) == 15


def test_crash_drops_consume_queue_entries_past_commit_log_end(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    expect = put_many(store, 5)
    end = store.get_max_phy_offset()
    cq = store.find_consume_queue("T", 0)
    assert cq is not None
    cq.put_message_position_info([CqUnit(end, 150, 0), CqUnit(end + 150, 150, 0)], 5)
    crash(store)
    again = open_store()
    assert again.get_max_offset_in_queue("T", 0) == 5
    assert bodies(again) == expect


def test_rebuild_consume_queues_without_checkpoint(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    expect0 = put_many(store, 30, queue_id=0)
    expect1 = put_many(store, 20, start=100, queue_id=1)
    crash(store)
    shutil.rmtree(tmp_path / "store" / "consumequeue")
    (tmp_path / "store" / "checkpoint").unlink()
    again = open_store()
    assert bodies(again, queue_id=0) == expect0
    assert bodies(again, queue_id=1) == expect1


def test_retention_moves_min_offset(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    expect = put_many(store, 150)
    segments = len(os.listdir(tmp_path / "store" / "commitlog"))
    assert segments >= 4
    now = store.clock_ms()
    assert store.retention.delete_expired_files(now_ms=now) == 0  # nothing is 72 h old yet
    deleted = store.retention.delete_expired_files(now_ms=now + 73 * 3600 * 1000)
    assert deleted == segments - 1  # never the segment being written
    assert len(os.listdir(tmp_path / "store" / "commitlog")) == 1
    min_off = store.get_min_offset_in_queue("T", 0)
    assert 0 < min_off < 150
    assert bodies(store) == expect[min_off:]
    res = store.get_message("g", "T", 0, 0, 32, None)
    assert (res.status, res.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, min_off)
    cq = store.find_consume_queue("T", 0)
    assert cq is not None and cq.queue.files[0].file_from_offset > 0  # old CQ files dropped
    assert store.lookup.get_earliest_message_time("T", 0) > 0
    store.shutdown()
    again = open_store()
    assert again.get_min_offset_in_queue("T", 0) == min_off
    assert bodies(again) == expect[min_off:]


def test_message_was_removing_before_consume_queue_cleanup(open_store: StoreFactory) -> None:
    store = open_store()
    put_many(store, 100)
    assert store.commit_log.delete_expired_file(0, 0, clean_immediately=True, max_count=2) == 2
    res = store.get_message("g", "T", 0, 0, 32, None)
    assert res.status is GetMessageStatus.MESSAGE_WAS_REMOVING
    assert res.next_begin_offset > 0
    store.retention.clean_expired_consume_queue()
    res = store.get_message("g", "T", 0, 0, 32, None)
    assert res.status is GetMessageStatus.OFFSET_TOO_SMALL


def test_full_disk_deletes_nothing_unexpired_unless_forcibly_enabled(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    put_many(store, 150)
    names = sorted(os.listdir(tmp_path / "store" / "commitlog"))
    store.retention.disk_used_ratio = lambda: 95.0  # type: ignore[method-assign]
    assert store.retention.delete_expired_files(scheduled=False) == 0  # unexpired: kept, however full
    store.config.clean_file_forcibly_enable = True
    usage = iter([90.0, 88.0, 86.0, 80.0])
    store.retention.disk_used_ratio = lambda: next(usage)  # type: ignore[method-assign]
    assert store.retention.delete_expired_files(scheduled=False) == 3  # oldest first, while above 85%
    assert sorted(os.listdir(tmp_path / "store" / "commitlog")) == names[3:]


def test_force_deletes_unexpired_only_while_above_the_forcibly_ratio(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    put_many(store, 100)
    segments = len(os.listdir(tmp_path / "store" / "commitlog"))
    assert store.retention.delete_expired_files(force=True) == 0  # disk at 0%: nothing to free
    store.retention.disk_used_ratio = lambda: 99.0  # type: ignore[method-assign]
    assert store.retention.delete_expired_files(force=True) == segments - 1
    assert len(os.listdir(tmp_path / "store" / "commitlog")) == 1
    assert store.put_message(inner(body=b"still works")).is_ok
    assert bodies(store)[-1] == b"still works"


def test_deferred_dispatch_is_read_your_writes_and_crash_safe(open_store: StoreFactory) -> None:
    """With dispatch deferred (as the broker runs it), a put's consume-queue entry and index key are
    written after the put returns; yet every read sees them, the arriving listener hears of them only
    when the drain runs, and a checkpoint never claims entries that were not written."""
    store = open_store()
    scheduled: list[Callable[[], None]] = []
    store.dispatcher.schedule = scheduled.append
    heard: list[tuple[str, int, int]] = []
    store.message_arriving_listener = lambda topic, qid, max_off, tags, ts: heard.append(
        (topic, qid, max_off)
    )

    expect = put_many(store, 3)
    assert len(scheduled) == 1  # one drain for the puts pending together
    assert store.dispatcher.pending and not heard
    assert bodies(store) == expect  # the read drained them
    assert not store.dispatcher.pending and not heard  # arrivals are told by the drain, on the loop
    scheduled.pop()()
    assert heard == [("T", 0, 1), ("T", 0, 2), ("T", 0, 3)]

    key = "order-42"
    assert store.put_message(inner(body=b"keyed", properties={"KEYS": key})).is_ok
    assert len(store.lookup.query_message("T", key, 10, 0, 1 << 62).message_buffers) == 1

    expect += put_many(store, 2, start=3)
    store.flush_consume_queue()  # writes the checkpoint: it must cover the pending entries first
    crash(store)
    again = open_store()
    assert bodies(again) == [*expect[:3], b"keyed", *expect[3:]]


def test_deferred_dispatch_that_fails_is_tried_again(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consume-queue write that fails during a deferred dispatch (disk error) is not dropped: the
    drain raises, later puts still get a drain of their own, and the next read dispatches every
    put and finds the messages."""
    store = open_store()
    failures = [OSError("disk said no")]
    real = ConsumeQueue.put_message_position_info

    def flaky(self: ConsumeQueue, units: list[CqUnit], cq_offset: int) -> None:
        if failures:
            raise failures.pop()
        real(self, units, cq_offset)

    monkeypatch.setattr(ConsumeQueue, "put_message_position_info", flaky)
    scheduled: list[Callable[[], None]] = []
    store.dispatcher.schedule = scheduled.append
    expect = put_many(store, 2)
    with pytest.raises(OSError, match="disk said no"):
        scheduled.pop()()  # the drain the broker runs after the put's answer
    expect += put_many(store, 1, start=2)
    assert len(scheduled) == 1  # the failed drain does not leave later puts without one
    assert bodies(store) == expect
