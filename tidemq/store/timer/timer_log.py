"""The timer log: fixed-size records of pending timer messages, in segment files.

Mirrors RocketMQ 5's ``TimerLog`` (``store/timer/TimerLog.java``) in spirit. Each record says "the
message stored at commit-log offset ``phy`` (``size`` bytes, queue offset ``cq_offset`` of
``rmq_sys_wheel_timer``) is due at ``deliver_ms``", and points at the previous record of the same
wheel slot (``prev_pos``, -1 for the first), so a slot's records form a chain walked backwards
from the slot's ``last_pos`` (:class:`~tidemq.store.timer.wheel.TimerWheel`). Nothing per timer is
kept in memory.

Record layout (48 bytes, big-endian)::

    0  u32  magic (RECORD_MAGIC)
    4  u8   state (PENDING, DELIVERED, ROLLED, SKIPPED,     mutable, not in the CRC
            CANCELLED)
    5  3x   reserved
    8  i64  prev_pos: previous record of the same slot, -1  mutable, not in the CRC
    16 i64  deliver_ms: when the message is due (epoch ms); with TIMER_CANCEL_FLAG (bit 62) set,
            a cancellation marker due then (``cancels.py``)
    24 i64  phy: commit-log offset of the message in rmq_sys_wheel_timer
    32 i32  size: its record size in bytes
    36 i64  cq_offset: its queue offset in rmq_sys_wheel_timer queue 0
    44 u32  crc32 of bytes [0, 4) + [16, 44)

Records are written with ``os.pwrite`` (no mmap: the pages never count in the broker's RSS) and
survive a killed process as soon as written. A segment holds a whole number of records.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from tidemq.store.mapped_file import MappedFile, MappedFileQueue

__all__ = [
    "CANCELLED",
    "DELIVERED",
    "PENDING",
    "RECORD_MAGIC",
    "RECORD_SIZE",
    "ROLLED",
    "SKIPPED",
    "TimerLog",
    "TimerRecord",
]

log = logging.getLogger(__name__)

RECORD_MAGIC = 0x54494D31  # "TIM1"
RECORD_SIZE = 48
PENDING, DELIVERED, ROLLED, SKIPPED, CANCELLED = 0, 1, 2, 3, 4
"""Record states: waiting; put to its real topic (for a cancellation marker: its time came); rolled
(its message stored again in the timer topic, a newer record stands for it); given up (the store
refused it for good, logged); cancelled (a ``TIMER_DEL_UNIQKEY`` / RECALL_MESSAGE named it)."""
_REC = struct.Struct(">IB3xqqqiqI")
_CRC_PART = struct.Struct(">Iqqiq")
_PREV = struct.Struct(">q")
_CHUNK = 4096 * RECORD_SIZE
"""Bytes read at a time when scanning (4096 records)."""
assert _REC.size == RECORD_SIZE


class TimerRecord(NamedTuple):
    """One timer-log record as read back (``pos`` is its global offset in the log)."""

    pos: int
    state: int
    prev_pos: int
    deliver_ms: int
    phy: int
    size: int
    cq_offset: int


def pack_record(
    prev_pos: int, deliver_ms: int, phy: int, size: int, cq_offset: int, state: int = PENDING
) -> bytes:
    """The 48 bytes of one record (see the module docstring)."""
    crc = zlib.crc32(_CRC_PART.pack(RECORD_MAGIC, deliver_ms, phy, size, cq_offset))
    return _REC.pack(RECORD_MAGIC, state, prev_pos, deliver_ms, phy, size, cq_offset, crc)


def unpack_record(data: bytes | memoryview, offset: int, pos: int) -> TimerRecord | None:
    """The record at ``data[offset:offset+48]`` (global position ``pos``), or None when its magic or
    CRC is wrong (never written, or torn)."""
    magic, state, prev, deliver, phy, size, cq, crc = _REC.unpack_from(data, offset)
    if magic != RECORD_MAGIC or not _crc_ok(data, offset, crc):
        return None
    return TimerRecord(pos, state, prev, deliver, phy, size, cq)


def _crc_ok(data: bytes | memoryview, offset: int, crc: int) -> bool:
    """CRC of bytes [0, 4) + [16, 44) of the record at ``offset`` (chained: no copy)."""
    view = memoryview(data)
    return zlib.crc32(view[offset + 16 : offset + 44], zlib.crc32(view[offset : offset + 4])) == crc


class TimerLog:
    """Segmented file of :class:`TimerRecord` (RocketMQ's ``TimerLog``).

    Args:
        store_path: directory of the segments (``<store root>/timer/timerlog``).
        file_size: segment size in bytes; rounded down to a multiple of :data:`RECORD_SIZE`
            (RocketMQ's ``mappedFileSizeTimerLog``).

    Not thread-safe: one owner (the timer store) appends, reads and marks. :meth:`load` must be called
    first.

    Raises:
        ValueError: ``file_size`` smaller than one record.
    """

    def __init__(self, store_path: str | Path, file_size: int) -> None:
        file_size -= file_size % RECORD_SIZE
        if file_size < RECORD_SIZE:
            raise ValueError(f"timer log segment size must hold at least one {RECORD_SIZE}-byte record")
        self.file_size = file_size
        self.queue = MappedFileQueue(store_path, file_size)

    # ---- lifecycle

    def load(self) -> int:
        """Open the segments and find the end of the written records; returns it (global offset).

        Every segment but the last is full. In the last, the written records are a prefix: the end is
        found by bisecting on the magic word, then stepped back over a torn record (bad CRC), and
        what lies after it is zeroed.

        Raises:
            StoreError: a segment of the wrong size.
        """
        self.queue.load()
        files = self.queue.files
        for mf in files[:-1]:
            mf.wrote_position = mf.flushed_position = self.file_size
        if not files:
            return 0
        last = files[-1]
        lo, hi = 0, self.file_size // RECORD_SIZE  # records [0, lo) written, [hi, n) not
        while lo < hi:
            mid = (lo + hi) // 2
            if _REC.unpack_from(last.read(mid * RECORD_SIZE, RECORD_SIZE))[0] == RECORD_MAGIC:
                lo = mid + 1
            else:
                hi = mid
        while lo > 0 and unpack_record(last.read((lo - 1) * RECORD_SIZE, RECORD_SIZE), 0, 0) is None:
            lo -= 1
        end = lo * RECORD_SIZE
        last.wrote_position = self.file_size  # let zero_from reset it
        last.zero_from(end)
        last.flushed_position = end
        return last.file_from_offset + end

    def close(self) -> None:
        """Unmap and close the segments (no flush: :meth:`flush` first)."""
        self.queue.close()

    @property
    def end(self) -> int:
        """Global offset just past the last record written."""
        return self.queue.get_max_offset()

    @property
    def start(self) -> int:
        """Global offset of the first record still on disk."""
        return self.queue.get_min_offset()

    # ---- writes

    def append(self, data: bytes) -> int:
        """Append packed records (a multiple of :data:`RECORD_SIZE` bytes, at most one segment);
        returns the global offset of the first. A run that does not fit the current segment is split.

        Raises:
            StoreError: the write failed.
        """
        first = -1
        view = memoryview(data)
        while view:
            mf = self.queue.get_last_mapped_file(0)
            assert mf is not None
            room = self.file_size - mf.wrote_position
            part = view[:room]
            if first < 0:
                first = mf.file_from_offset + mf.wrote_position
            mf.write(mf.wrote_position, part)
            view = view[room:]
        return first

    def room(self) -> int:
        """Bytes left in the segment the next append goes to (a new, empty segment is made when the
        last one is full).

        Raises:
            StoreError / OSError: the new segment cannot be made.
        """
        mf = self.queue.get_last_mapped_file(0)
        assert mf is not None
        return self.file_size - mf.wrote_position

    def truncate(self, end: int) -> None:
        """Drop every record at or after global offset ``end`` (zeroed; later segments deleted)."""
        self.queue.truncate_dirty_files(end)

    def _locate(self, pos: int) -> tuple[MappedFile, int] | None:
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        return mf, pos - mf.file_from_offset

    def set_state(self, pos: int, state: int) -> None:
        """Mark the record at ``pos`` (one byte written in place)."""
        found = self._locate(pos)
        if found is not None:
            found[0].write(found[1] + 4, bytes((state,)))

    def set_prev(self, pos: int, prev_pos: int) -> None:
        """Re-link the record at ``pos`` (a wheel rebuild)."""
        found = self._locate(pos)
        if found is not None:
            found[0].write(found[1] + 8, _PREV.pack(prev_pos))

    def flush(self) -> int:
        """fdatasync what was written; returns the flushed global offset."""
        return self.queue.flush()

    # ---- reads

    def read(self, pos: int) -> TimerRecord | None:
        """The record at global ``pos``, or None (deleted segment, not written, or damaged)."""
        found = self._locate(pos)
        if found is None:
            return None
        mf, at = found
        data = mf.select(at, RECORD_SIZE)
        if data is None:
            return None
        return unpack_record(data, 0, pos)

    def scan(self, start: int = 0) -> Iterator[TimerRecord | int]:
        """Every record from ``start`` (a record boundary) to the end, in order, read in chunks; a
        damaged one is yielded as its position (an ``int``) instead."""
        for mf in list(self.queue.files):
            base = mf.file_from_offset
            if base + mf.wrote_position <= start:
                continue
            pos = max(start - base, 0)
            while pos < mf.wrote_position:
                n = min(_CHUNK, mf.wrote_position - pos)
                n -= n % RECORD_SIZE
                data = mf.select(pos, n)
                if data is None or not n:
                    break
                at = base + pos
                for off, fields in zip(range(0, n, RECORD_SIZE), _REC.iter_unpack(data), strict=True):
                    if fields[0] == RECORD_MAGIC and _crc_ok(data, off, fields[7]):
                        yield TimerRecord(at + off, *fields[1:7])
                    else:
                        yield at + off
                pos += n

    def segment_has_pending(self, mf: MappedFile) -> bool:
        """Whether a segment still holds a PENDING record (read in chunks, state bytes only)."""
        pos = 0
        while pos < mf.wrote_position:
            n = min(_CHUNK, mf.wrote_position - pos)
            data = mf.select(pos, n)
            if data is None:
                return False
            if PENDING in data[4::RECORD_SIZE]:
                return True
            pos += n
        return False

    def delete_delivered_segments(self) -> int:
        """Delete the oldest segments (never the last) that hold no PENDING record; returns how many."""
        doomed: list[MappedFile] = []
        for mf in self.queue.files[:-1]:
            if self.segment_has_pending(mf):
                break
            doomed.append(mf)
        if doomed:
            log.info("timer log: deleting %d delivered segment(s) from %s", len(doomed), doomed[0].path.name)
        return self.queue.delete_files(doomed)
