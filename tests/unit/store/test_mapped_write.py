"""MappedFile writes through a shared map: what a pwrite gave (visible to reads and to other
descriptors at once, durable with fdatasync, ENOSPC as an OSError with nothing written), with
blocks reserved ahead so a mapped write never faults on a full disk."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.errors import StoreError
from tidemq.store import mapped_file
from tidemq.store.mapped_file import RESERVE_CHUNK, MappedFile

from .conftest import inner

SIZE = 3 * RESERVE_CHUNK


def segment(tmp: Path, size: int = SIZE) -> MappedFile:
    return MappedFile(tmp / "00000000000000000000", size)


def test_mapped_writes_read_back_through_pread_and_another_descriptor(tmp_path: Path) -> None:
    mf = segment(tmp_path)
    assert mf._mm is not None
    mf.write(0, b"abc")
    mf.write(3, memoryview(b"--defg")[2:])
    assert mf.read(0, 7) == b"abcdefg" and mf.wrote_position == 7
    with open(mf.path, "rb") as f:
        assert f.read(7) == b"abcdefg"
    assert mf.flush() == 7
    assert os.stat(mf.path).st_blocks * 512 <= RESERVE_CHUNK + 8192  # reserved ahead, not the file
    mf.close()


@given(st.lists(st.tuples(st.integers(0, SIZE - 1), st.binary(min_size=1, max_size=70_000)), max_size=12))
def test_any_writes_read_back_as_with_pwrite(tmp_path_factory: pytest.TempPathFactory, writes: list) -> None:
    tmp = tmp_path_factory.mktemp("seg")
    mf = segment(tmp)
    expect = bytearray(SIZE)
    for pos, data in writes:
        data = data[: SIZE - pos]
        mf.write(pos, data)
        expect[pos : pos + len(data)] = data
    assert mf.read(0, SIZE) == bytes(expect)
    assert mf.wrote_position == max((p + len(d[: SIZE - p]) for p, d in writes), default=0)
    mf.destroy()


def test_no_space_for_the_reservation_is_an_oserror_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mf = segment(tmp_path)
    mf.write(0, b"x" * 100)

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mapped_file.os, "posix_fallocate", no_space)
    with pytest.raises(OSError) as caught:
        mf.write(RESERVE_CHUNK + 50, b"y" * 100)  # past the reserved blocks
    assert caught.value.errno == errno.ENOSPC
    assert mf.wrote_position == 100 and mf.read(RESERVE_CHUNK + 50, 100) == bytes(100)
    mf.write(100, b"z")  # still inside the reserved blocks: written
    monkeypatch.undo()
    mf.write(RESERVE_CHUNK + 50, b"y" * 100)  # space again
    assert mf.read(RESERVE_CHUNK + 50, 100) == b"y" * 100
    mf.close()


def test_no_reservation_on_this_file_system_falls_back_to_pwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mf = segment(tmp_path)

    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(mapped_file.os, "posix_fallocate", unsupported)
    mf.write(0, b"abc")
    assert mf._mm is None and mf.read(0, 3) == b"abc"
    mf.write(SIZE - 3, b"end")
    assert mf.read(SIZE - 3, 3) == b"end"
    with pytest.raises(StoreError):
        mf.write(SIZE - 2, b"end")
    mf.close()


def test_zeroed_tail_is_reserved_again_before_a_mapped_write(tmp_path: Path) -> None:
    mf = segment(tmp_path)
    mf.write(0, b"a" * 5000)
    mf.zero_from(1000)
    assert mf._reserved <= 1000 and mf.wrote_position == 1000
    assert mf.read(990, 20) == b"a" * 10 + bytes(10)
    mf.write(1000, b"b" * 10)
    assert mf.read(995, 20) == b"a" * 5 + b"b" * 10 + bytes(5)
    mf.close()


def test_a_write_after_the_last_release_fails_as_an_oserror(tmp_path: Path) -> None:
    mf = segment(tmp_path)
    mf.write(0, b"abc")
    mf.destroy()
    with pytest.raises(OSError):
        mf.write(3, b"def")


def test_a_full_segment_is_unmapped_when_the_next_one_starts(tmp_path: Path) -> None:
    queue = mapped_file.MappedFileQueue(tmp_path, 4096)
    first = queue.get_last_mapped_file()
    assert first is not None
    first.write(0, b"a" * 4096)
    second = queue.get_last_mapped_file()
    assert second is not first and first._mm is None and second is not None and second._mm is not None
    assert first.read(4000, 96) == b"a" * 96
    first.zero_from(4000)  # recovery truncating it: the pwrite path
    first.write(4000, b"b" * 96)
    assert first.read(3999, 97) == b"a" + b"b" * 96
    queue.close()


def test_segments_that_cannot_be_mapped_are_written_with_pwrite_and_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_map(*_args: object) -> None:
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(mapped_file.mmap, "mmap", no_map)
    monkeypatch.setattr(mapped_file, "_map_failures", 0)
    caplog.set_level("DEBUG", logger=mapped_file.__name__)
    segments = [MappedFile(tmp_path / f"{i * SIZE:020d}", SIZE) for i in range(3)]
    for mf in segments:
        mf.write(0, b"abc")
        assert mf._mm is None and mf.read(0, 3) == b"abc"
        mf.close()
    assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG", "DEBUG"]


def test_the_commit_log_is_mapped_under_async_flush_only(open_store: Any) -> None:
    """SYNC_FLUSH writes the commit log with pwrite (a mapped page cleaned by every send's fsync
    faults on the next write); ASYNC_FLUSH maps it; consume queues never are (a map keeps a second
    descriptor, and a broker holds one consume-queue file per queue)."""
    for flush, mapped in (("ASYNC_FLUSH", True), ("SYNC_FLUSH", False)):
        store = open_store(flush_disk_type=flush)
        assert store.put_message(inner(body=b"x")).is_ok
        store.dispatch_pending()
        last = store.commit_log.queue.last()
        cq = store.find_consume_queue("T", 0)
        assert last is not None and cq is not None and cq.queue.last() is not None
        assert (last._mm is not None) is mapped and cq.queue.last()._mm is None
        store.shutdown()
