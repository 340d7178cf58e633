"""Consume queues: per (topic, queue id) index of commit-log positions. Mirrors ``ConsumeQueue``.

A unit is 20 bytes, ``struct ">qiq"``: commit-log offset, record size, tags code. Logical offset N
lives at byte N x 20 of the queue (file = floor(N x 20 / file size)); files live in
``consumequeue/<topic>/<queueId>/<20-digit start byte offset>``. An all-zero unit is an empty slot;
a "pre-blank" unit (``0, 0x7FFFFFFF, 0``) pads a file created in the middle (nothing to read there).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from tidemq.store.config import CQ_STORE_UNIT_SIZE
from tidemq.store.mapped_file import MappedFile, MappedFileQueue

log = logging.getLogger(__name__)

_UNIT = struct.Struct(">qiq")
PRE_BLANK_SIZE = 0x7FFFFFFF
_PRE_BLANK = _UNIT.pack(0, PRE_BLANK_SIZE, 0)


class CqUnit(NamedTuple):
    """One consume-queue entry: commit-log offset, record size (bytes), tags code."""

    commit_log_offset: int
    size: int
    tags_code: int

    def pack(self) -> bytes:
        """The 20-byte big-endian form."""
        return _UNIT.pack(self.commit_log_offset, self.size, self.tags_code)

    @classmethod
    def unpack(cls, data: bytes | memoryview, pos: int = 0) -> CqUnit:
        """Read a unit from ``data[pos:pos+20]``."""
        return cls(*_UNIT.unpack_from(data, pos))

    @property
    def is_valid(self) -> bool:
        """A real entry (not an empty slot, not pre-blank padding)."""
        return self.size > 0 and self.size != PRE_BLANK_SIZE and self.commit_log_offset >= 0


def iter_units(data: bytes) -> list[CqUnit]:
    """Decode consecutive units (trailing partial bytes ignored)."""
    n = len(data) // CQ_STORE_UNIT_SIZE
    return [CqUnit(*t) for t in _UNIT.iter_unpack(memoryview(data)[: n * CQ_STORE_UNIT_SIZE])]


class ConsumeQueue:
    """The consume queue of one (topic, queue id). Mirrors RocketMQ's ``ConsumeQueue``.

    Not thread-safe for writers: the message store serialises puts; reads may run concurrently.

    Args:
        topic, queue_id: the queue.
        root_dir: the ``consumequeue`` directory.
        mapped_file_size: file size in bytes (a multiple of 20).
    """

    def __init__(self, topic: str, queue_id: int, root_dir: str | Path, mapped_file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = mapped_file_size
        self.queue = MappedFileQueue(Path(root_dir) / topic / str(queue_id), mapped_file_size)
        # pwrite, not a shared map: CPython's mmap keeps a dup() of the file's descriptor, so a
        # mapped consume-queue file costs two descriptors, and a broker holds one file per queue
        # with data (the chaos fuzz test saw 3 new queues take 6); the commit log maps only the
        # segment being written.
        self.queue.mapped = False
        self.max_physic_offset = -1
        """End (offset + size) of the last dispatched commit-log record."""
        self.min_logic_offset = 0
        """Byte offset of the first readable unit (min offset x 20)."""

    # ---- offsets
    def get_min_offset_in_queue(self) -> int:
        """Smallest logical offset whose entry (and commit-log data) still exists."""
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        """Number of entries written = the next logical offset."""
        return self.queue.get_max_offset() // CQ_STORE_UNIT_SIZE

    def roll_next_file(self, index: int) -> int:
        """First logical offset of the file after the one holding ``index``."""
        per_file = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        return index + per_file - index % per_file

    # ---- reads
    def get_index_buffer(self, start_index: int, max_bytes: int) -> bytes | None:
        """Units from ``start_index`` to the end of the written data of its file (at most ``max_bytes``).

        Returns None if the file holding ``start_index`` does not exist (OFFSET_FOUND_NULL).
        """
        offset = start_index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        n = min(mf.wrote_position - pos, max_bytes)
        n -= n % CQ_STORE_UNIT_SIZE
        if n <= 0:
            return None
        return mf.select(pos, n)

    def get_unit(self, index: int) -> CqUnit | None:
        """The entry at logical ``index`` if written, else None."""
        data = self.queue.select(index * CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)
        return CqUnit.unpack(data) if data is not None else None

    # ---- writes
    def _write_at(self, offset: int, data: bytes) -> None:
        """Write ``data`` at byte ``offset`` (>= current end or inside written data), rolling files."""
        view = memoryview(data)
        while view:
            mf = self.queue.find_mapped_file_by_offset(offset)
            if mf is None:
                mf = self.queue.get_last_mapped_file(start_offset=offset)
                if (
                    mf is None
                    or not mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size
                ):
                    raise AssertionError(f"consume queue {self.topic}/{self.queue_id}: cannot place {offset}")
            pos = offset - mf.file_from_offset
            n = min(len(view), self.mapped_file_size - pos)
            mf.write(pos, view[:n])
            view = view[n:]
            offset += n

    def put_entries(
        self, cq_offset: int, offsets: Sequence[int], sizes: Sequence[int], tags_codes: Sequence[int]
    ) -> None:
        """:meth:`put_message_position_info` for entries given as columns (commit-log offsets, sizes,
        tag codes): a put's entries, appended at the written end with one write and no object per
        entry; anywhere else as units."""
        if not offsets:
            return
        offset = cq_offset * CQ_STORE_UNIT_SIZE
        end_file = self._end_file(offset, len(offsets))
        if end_file is None:
            self.put_message_position_info(list(map(CqUnit, offsets, sizes, tags_codes)), cq_offset)
            return
        end_file.write(
            offset - end_file.file_from_offset, b"".join(map(_UNIT.pack, offsets, sizes, tags_codes))
        )
        self.max_physic_offset = max(self.max_physic_offset, offsets[-1] + sizes[-1])

    def put_entry(self, cq_offset: int, commit_log_offset: int, size: int, tags_code: int) -> None:
        """:meth:`put_entries` of one entry (every single send): the append at the written end
        without its columns, else as :meth:`put_entries`."""
        offset = cq_offset * CQ_STORE_UNIT_SIZE
        files = self.queue.files
        if files:
            last_file = files[-1]
            pos = offset - last_file.file_from_offset
            if pos == last_file.wrote_position and pos + CQ_STORE_UNIT_SIZE <= last_file.file_size:
                last_file.write(pos, _UNIT.pack(commit_log_offset, size, tags_code))
                end = commit_log_offset + size
                if end > self.max_physic_offset:
                    self.max_physic_offset = end
                return
        self.put_message_position_info([CqUnit(commit_log_offset, size, tags_code)], cq_offset)

    def _end_file(self, offset: int, count: int) -> MappedFile | None:
        """The last file when byte ``offset`` is its written end and it has room for ``count`` more
        units (the usual append: one write, no file search), else None."""
        files = self.queue.files
        if not files:
            return None
        last_file = files[-1]
        pos = offset - last_file.file_from_offset
        if pos != last_file.wrote_position or pos + count * CQ_STORE_UNIT_SIZE > last_file.file_size:
            return None
        return last_file

    def put_message_position_info(self, units: list[CqUnit], cq_offset: int) -> None:
        """Append ``units`` at logical ``cq_offset`` (the store's next offset for this queue).

        Mirrors ``ConsumeQueue.putMessagePositionInfo``; a gap is padded with pre-blank units, an
        offset inside the written range is checked and overwritten only if different (recovery).
        """
        if not units:
            return
        offset = cq_offset * CQ_STORE_UNIT_SIZE
        last = units[-1]
        end_file = self._end_file(offset, len(units))
        if end_file is not None:
            end_file.write(offset - end_file.file_from_offset, b"".join([_UNIT.pack(*u) for u in units]))
            self.max_physic_offset = max(self.max_physic_offset, last.commit_log_offset + last.size)
            return
        end = self.queue.get_max_offset()
        if self.queue.last() is None and offset > 0:
            file_start = offset - offset % self.mapped_file_size
            self._write_at(file_start, _PRE_BLANK * ((offset - file_start) // CQ_STORE_UNIT_SIZE))
            self.min_logic_offset = offset
        elif offset > end:
            log.warning("consume queue %s/%d: gap %d..%d padded", self.topic, self.queue_id, end, offset)
            self._write_at(end, _PRE_BLANK * ((offset - end) // CQ_STORE_UNIT_SIZE))
        elif offset < end:
            same = []
            for i, unit in enumerate(units):
                if (offset + i * CQ_STORE_UNIT_SIZE) >= end or self.get_unit(cq_offset + i) != unit:
                    break
                same.append(unit)
            units = units[len(same) :]
            offset += len(same) * CQ_STORE_UNIT_SIZE
            if not units:
                return
        self._write_at(offset, b"".join(u.pack() for u in units))  # the last unit is still ``last``
        self.max_physic_offset = max(self.max_physic_offset, last.commit_log_offset + last.size)

    # ---- recovery and retention
    def load(self) -> None:
        """Open the files (positions are set by :meth:`recover`)."""
        self.queue.load()

    def recover(self, thorough: bool) -> None:
        """Find the written end. ``thorough`` (after a crash) scans the last 3 files linearly and
        drops everything after the first empty slot; otherwise binary-searches the last file."""
        files = self.queue.files
        if not files:
            return
        for mf in files:
            mf.wrote_position = mf.flushed_position = mf.file_size
        if thorough:
            for idx in range(max(0, len(files) - 3), len(files)):
                mf = files[idx]
                units = iter_units(mf.read(0, mf.file_size))
                for i, unit in enumerate(units):
                    if unit.size <= 0 or unit.commit_log_offset < 0:
                        self.queue.truncate_dirty_files(mf.file_from_offset + i * CQ_STORE_UNIT_SIZE)
                        break
                else:
                    continue
                break
        else:
            mf = files[-1]
            lo, hi = 0, mf.file_size // CQ_STORE_UNIT_SIZE  # first empty slot is in [lo, hi]
            while lo < hi:
                mid = (lo + hi) // 2
                if CqUnit.unpack(mf.read(mid * CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)).size > 0:
                    lo = mid + 1
                else:
                    hi = mid
            mf.wrote_position = mf.flushed_position = lo * CQ_STORE_UNIT_SIZE
        self._refresh_max_physic_offset()

    def _last_unit(self) -> CqUnit | None:
        last = self.queue.last()
        if last is None or last.wrote_position < CQ_STORE_UNIT_SIZE:
            return None
        return CqUnit.unpack(last.read(last.wrote_position - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE))

    def _refresh_max_physic_offset(self) -> None:
        unit = self._last_unit()
        self.max_physic_offset = (
            unit.commit_log_offset + unit.size if unit is not None and unit.is_valid else -1
        )

    def truncate_dirty_logic_files(self, phy_end: int) -> None:
        """Drop entries that point at or beyond commit-log offset ``phy_end`` (``truncateDirtyLogicFiles``)."""
        last = self._last_unit()
        if last is None or last.size == PRE_BLANK_SIZE or last.commit_log_offset + last.size <= phy_end:
            self._refresh_max_physic_offset()
            return
        for mf in reversed(list(self.queue.files)):
            units = iter_units(mf.read(0, mf.wrote_position)) if mf.wrote_position else []
            cut = next(
                (
                    i
                    for i, u in enumerate(units)
                    if u.size != PRE_BLANK_SIZE and u.commit_log_offset + u.size > phy_end
                ),
                None,
            )
            if cut is None:
                break
            self.queue.truncate_dirty_files(mf.file_from_offset + cut * CQ_STORE_UNIT_SIZE)
            if cut > 0:
                break
        self.min_logic_offset = min(self.min_logic_offset, self.queue.get_max_offset())
        self._refresh_max_physic_offset()

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """Move the min offset to the first entry whose commit-log data starts at/after ``phy_min_offset``.

        Units are sorted by commit-log offset (pre-blank padding only at the start of a file), so
        each file is binary-searched.
        """

        def key(mf: MappedFile, index: int) -> int:
            unit = CqUnit.unpack(mf.read(index * CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE))
            return unit.commit_log_offset if unit.is_valid else -1

        for mf in self.queue.files:
            n = mf.wrote_position // CQ_STORE_UNIT_SIZE
            if n == 0 or not mf.hold():
                continue
            try:
                if key(mf, n - 1) < phy_min_offset:
                    continue
                lo, hi = 0, n - 1  # first index with key >= phy_min_offset is in [lo, hi]
                while lo < hi:
                    mid = (lo + hi) // 2
                    if key(mf, mid) >= phy_min_offset:
                        hi = mid
                    else:
                        lo = mid + 1
            finally:
                mf.release()
            self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + lo * CQ_STORE_UNIT_SIZE)
            return
        self.min_logic_offset = max(self.min_logic_offset, self.queue.get_max_offset())

    def delete_expired_file(self, phy_min_offset: int) -> int:
        """Delete files (never the last) whose entries all point below ``phy_min_offset``; returns count."""
        doomed: list[MappedFile] = []
        for mf in self.queue.files[:-1]:
            if mf.wrote_position < CQ_STORE_UNIT_SIZE:
                break
            last = CqUnit.unpack(mf.read(mf.wrote_position - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE))
            if last.commit_log_offset + max(last.size, 0) > phy_min_offset:
                break
            doomed.append(mf)
        count = self.queue.delete_files(doomed)
        self.correct_min_offset(phy_min_offset)
        return count

    def flush(self) -> None:
        self.queue.flush()

    def close(self) -> None:
        self.queue.close()

    def destroy(self) -> None:
        """Delete all files of this queue."""
        self.queue.destroy()
        self.max_physic_offset = -1
        self.min_logic_offset = 0
