"""Disk space, pure parts: df's ratio, the disk-full guard's states and log lines, ENOSPC on a put."""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from tidemq.store.disk import DiskSpaceGuard, DiskUsage, disk_util_text
from tidemq.store.mapped_file import MappedFile
from tidemq.store.results import PutMessageStatus

from .conftest import StoreFactory, inner

MiB = 1 << 20


def test_ratio_is_dfs_reserved_blocks_count_neither_used_nor_available() -> None:
    # the machine: df said 27% where (blocks - bavail) / blocks said 0.70
    blocks, bfree, bavail, frsize = 66_053_021, 59_692_257, 20_236_964, 4096
    usage = DiskUsage("/", blocks * frsize, (blocks - bfree) * frsize, bavail * frsize)
    assert usage.percent == pytest.approx(100 * 6_360_764 / (6_360_764 + 20_236_964))
    assert 23.9 < usage.percent < 24.0
    assert (blocks - bavail) / blocks > 0.69  # the old formula
    assert usage.percent_after(0) == pytest.approx(usage.percent)
    assert disk_util_text(93.456) == "CL:  0.93 CQ:  0.93 INDEX:  0.93"


def _usage(percent: float, total: int = 100 * MiB) -> DiskUsage:
    used = int(total * percent / 100)
    return DiskUsage("/fs", total, used, total - used)


def test_guard_one_warning_per_change_with_counts(caplog: pytest.LogCaptureFixture) -> None:
    level = [50.0]
    guard = DiskSpaceGuard("/fs", 90, usage=lambda _p: _usage(level[0]))
    states: list[bool] = []
    guard.listeners.append(states.append)
    caplog.set_level(logging.WARNING, "tidemq.store.disk")
    assert not guard.poll(0)
    level[0] = 95.0
    refused = sum(guard.poll(i * (2 * MiB)) for i in range(1, 6))  # each poll past CHECK_BYTES re-reads
    assert refused == 5 and guard.full and guard.refused == 5
    level[0] = 90.0  # at the level: writable again
    assert not guard.poll(100 * MiB)
    assert states == [True, False]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("disk full:") and "95.0% used" in lines[0] and "above" in lines[0]
    assert lines[1].startswith("disk writable again:") and "5 put(s) were refused" in lines[1]
    assert not any(r.exc_info for r in caplog.records)


def test_enospc_on_a_put_is_disk_full_without_traceback(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store()
    assert store.put_message(inner(body=b"before")).is_ok

    def no_space(self: MappedFile, pos: int, data: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    caplog.set_level(logging.WARNING)
    with monkeypatch.context() as m:
        m.setattr(MappedFile, "write", no_space)
        results = [store.put_message(inner(body=b"refused %d" % i)) for i in range(20)]
    assert {r.status for r in results} == {PutMessageStatus.DISK_FULL}
    assert results[0].disk_full and "disk full" in results[0].remark
    assert not any(r.exc_info for r in caplog.records)
    assert sum("disk full:" in r.getMessage() for r in caplog.records) == 1
    store.disk_guard.check(store.get_max_phy_offset())  # the real disk has room: writable again
    assert store.put_message(inner(body=b"after")).is_ok
    assert store.get_max_offset_in_queue("T", 0) == 2


def test_warm_segment_only_when_there_is_room(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store(flush_disk_type="SYNC_FLUSH")
    allocator = store.commit_log.queue.allocator
    assert allocator is not None and allocator.room is not None
    assert allocator.room(4096)  # this machine's disk has room for a small segment
    assert not allocator.room(1 << 60)  # nor any disk for an exabyte


def test_retention_keeps_what_a_consumer_has_not_consumed_unless_forced(
    open_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(file_reserved_time=0)  # every full segment has expired
    for i in range(150):
        assert store.put_message(inner(body=b"m%03d" % i * 10)).is_ok
    segments = len(store.commit_log.queue.files)
    assert segments >= 4
    floors = {("T", 0): {"g": 0, "h": 150}}
    store.retention.floor_providers.append(lambda: floors)
    assert store.retention.delete_expired_files() == 0  # g has consumed nothing
    floors[("T", 0)]["g"] = 60
    assert store.retention.delete_expired_files() >= 1  # what g consumed goes, nothing else
    assert store.get_min_offset_in_queue("T", 0) <= 60
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    store.config.clean_file_forcibly_enable = True
    caplog.set_level(logging.ERROR)
    assert store.retention.delete_expired_files() >= 1
    assert len(store.commit_log.queue.files) == 1
    lost_to = store.get_min_offset_in_queue("T", 0)
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert "(cleanFileForciblyEnable=true)" in line
    assert f"T queue 0 offsets 60..{lost_to - 1} ({lost_to - 60} message(s); consumers g)" in line
    assert store.retention.unconsumed_deleted == lost_to - 60


def test_a_service_needing_the_commit_log_keeps_it(
    open_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(file_reserved_time=0)
    offsets = [store.put_message(inner(body=b"m%03d" % i * 10)).append_result for i in range(150)]
    needed = offsets[60]
    assert needed is not None
    store.retention.offset_providers["timer log"] = lambda: needed.wrote_offset
    assert store.retention.delete_expired_files() >= 1
    assert store.get_min_phy_offset() <= needed.wrote_offset  # its segment and later ones stay
    store.config.clean_file_forcibly_enable = True
    caplog.set_level(logging.ERROR)
    assert store.retention.delete_expired_files() >= 1
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert f"timer log still needed commit-log offsets {needed.wrote_offset}.." in line


def test_enospc_writing_a_consume_queue_holds_the_dispatch_until_space_returns(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tidemq.store.consume_queue import ConsumeQueue

    store = open_store()
    scheduled: list[Callable[[], None]] = []
    store.dispatcher.schedule = scheduled.append  # deferred dispatch, as in the broker
    assert store.put_message(inner(body=b"first")).is_ok
    while scheduled:
        scheduled.pop()()
    caplog.set_level(logging.WARNING)
    with monkeypatch.context() as m:

        def no_space(*_args: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        m.setattr(ConsumeQueue, "put_entries", no_space)
        acked = store.put_message(inner(body=b"acked before the disk ran out"))
        assert acked.is_ok and acked.append_result is not None
        while scheduled:
            scheduled.pop()()  # the drain fails: no exception, the put stays pending
        assert store.disk_guard.full and store.dispatcher.pending
        assert store.put_message(inner(body=b"refused")).disk_full
        result = store.get_message("g", "T", 0, 0, 32, None)  # reads go on with what is visible
        assert result.message_count == 1
        store.flush_consume_queue()  # the checkpoint does not claim the pending entry
        assert store.checkpoint.logics_offset == acked.append_result.wrote_offset
    assert not any(r.exc_info for r in caplog.records)
    store.disk_guard.check()  # writable again: the held-back put is dispatched
    while scheduled:
        scheduled.pop()()
    result = store.get_message("g", "T", 0, 0, 32, None)
    assert result.message_count == 2 and not store.dispatcher.pending
