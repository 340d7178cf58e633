"""Warm commit-log segments (``warm_maped_file_enable``; on by default with SYNC_FLUSH): every segment
the store writes was zero-filled and synced before its first record, the next one is prepared while
the current one fills, and a crash or restart loses nothing and leaves no stray file."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.unit.store.conftest import StoreFactory
from tests.unit.store.test_recovery import bodies, crash, put_many
from tidemq.store import MessageStoreConfig
from tidemq.store.allocate import AllocateMappedFileService
from tidemq.store.config import ASYNC_FLUSH, SYNC_FLUSH


def segments(root: Path) -> list[Path]:
    return sorted((root / "commitlog").iterdir())


def allocated(path: Path) -> int:
    """Bytes of disk the file really holds (a sparse file holds fewer than its size)."""
    return os.stat(path).st_blocks * 512


def wait_for(cond: object, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def test_default_is_on_with_sync_flush_only() -> None:
    assert MessageStoreConfig(flush_disk_type=SYNC_FLUSH).warm_commit_log
    assert not MessageStoreConfig(flush_disk_type=ASYNC_FLUSH).warm_commit_log
    assert not MessageStoreConfig(flush_disk_type=SYNC_FLUSH, warm_maped_file_enable=False).warm_commit_log
    assert MessageStoreConfig(flush_disk_type=ASYNC_FLUSH, warm_maped_file_enable=True).warm_commit_log


def test_every_segment_is_fully_written_before_use_and_messages_survive_restart(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    store = open_store(flush_disk_type=SYNC_FLUSH, mapped_file_size_commit_log=8192)
    allocator = store.commit_log.queue.allocator
    assert allocator is not None
    wait_for(lambda: allocator.warmed >= 1, "the first segment's warm")
    expect = put_many(store, 200)  # 8 KiB segments: 3 rolls; the last segment is partly written
    files = [p for p in segments(root) if not p.name.endswith(".tmp")]
    assert len(files) >= 3
    last = store.commit_log.queue.last()
    assert last is not None and last.wrote_position < 8192 - 4096  # a sparse one would hold one page
    assert all(allocated(p) >= store.config.mapped_file_size_commit_log for p in files)
    assert allocator.warmed >= len(files)
    store.shutdown()
    assert not [p for p in segments(root) if p.name.endswith(".tmp")]  # the unused warm file goes
    again = open_store(flush_disk_type=SYNC_FLUSH, mapped_file_size_commit_log=8192)
    assert bodies(again) == expect
    more = put_many(again, 30, start=200)
    assert bodies(again) == expect + more


def test_without_warming_segments_stay_sparse(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store(
        flush_disk_type=SYNC_FLUSH, warm_maped_file_enable=False, mapped_file_size_commit_log=1 << 20
    )
    assert store.commit_log.queue.allocator is None
    put_many(store, 5)
    store.flush()
    (segment,) = segments(tmp_path / "store")
    assert allocated(segment) < 1 << 20


def test_crash_keeps_acknowledged_messages_and_drops_the_unused_warm_file(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    store = open_store(flush_disk_type=SYNC_FLUSH)
    allocator = store.commit_log.queue.allocator
    assert allocator is not None
    expect = put_many(store, 50)
    store.flush()
    wait_for(lambda: any(p.name.endswith(".tmp") for p in segments(root)), "the next segment's warm file")
    allocator.shutdown()  # its thread would die with the process; the file it wrote stays
    leftover = root / "commitlog" / "99999999999999999999.tmp"
    leftover.write_bytes(b"")  # any leftover of that shape
    crash(store)
    again = open_store(flush_disk_type=SYNC_FLUSH)
    assert again.recovered_abnormally
    assert bodies(again) == expect
    assert not leftover.exists()  # removed by the load (the next segment's warm file is made anew)
    again_allocator = again.commit_log.queue.allocator
    assert again_allocator is not None
    again_allocator.shutdown()  # deletes the warm file it made and nobody took
    assert all(p.name.isdigit() for p in segments(root))


def test_take_waits_for_a_warm_under_way_and_refuses_another_segment(tmp_path: Path) -> None:
    size = 8 << 20
    service = AllocateMappedFileService(size)
    try:
        first, second = tmp_path / f"{0:020d}", tmp_path / f"{size:020d}"
        service.request(first)
        assert not service.take(second)  # not the one being warmed: the caller makes a sparse file
        assert service.take(first)  # waits for the warm under way
        assert first.stat().st_size == size and allocated(first) >= size
        assert not first.with_name(first.name + ".tmp").exists()
        assert not service.take(first)  # taken once
    finally:
        service.shutdown()


def test_a_failed_warm_falls_back_to_a_sparse_segment(open_store: StoreFactory, tmp_path: Path) -> None:
    """The next segment's warm fails (an I/O error): the roll makes a sparse segment, nothing is lost."""
    root = tmp_path / "store"
    store = open_store(flush_disk_type=SYNC_FLUSH)
    allocator = store.commit_log.queue.allocator
    assert allocator is not None
    wait_for(lambda: allocator.warmed >= 1, "the first segment's warm")
    size = store.config.mapped_file_size_commit_log
    failed = threading.Event()
    real_warm = allocator._warm

    def failing_warm(tmp: Path) -> bool:
        if tmp.name.startswith(f"{size:020d}"):
            failed.set()
            return False
        return real_warm(tmp)

    allocator._warm = failing_warm  # type: ignore[method-assign]
    # the first put takes segment 0 and asks for segment 1, whose warm fails
    expect = put_many(store, 60)
    assert failed.is_set()
    assert len([p for p in segments(root) if p.name.isdigit()]) >= 2
    assert bodies(store) == expect


@pytest.mark.parametrize("flush", [ASYNC_FLUSH, SYNC_FLUSH])
def test_puts_across_rolls_read_back_in_order(open_store: StoreFactory, flush: str) -> None:
    store = open_store(flush_disk_type=flush, warm_maped_file_enable=True)
    expect = put_many(store, 150)
    assert bodies(store) == expect


def test_load_warms_the_first_segment_and_a_log_starting_elsewhere_still_works(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """An empty log's first segment is warm before load returns; a log that starts at another
    offset (an HA slave following its master) makes its own segment, and the unused warm file goes."""
    root = tmp_path / "store"
    store = open_store(flush_disk_type=SYNC_FLUSH)
    allocator = store.commit_log.queue.allocator
    assert allocator is not None and allocator.warmed == 1
    size = store.config.mapped_file_size_commit_log
    with store.put_lock:
        mf = store.commit_log.queue.get_last_mapped_file(start_offset=5 * size)
    assert mf is not None and mf.file_from_offset == 5 * size
    store.shutdown()
    assert sorted(p.name for p in segments(root)) == [f"{5 * size:020d}"]
