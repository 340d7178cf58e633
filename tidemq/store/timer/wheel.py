"""The time wheel: one fixed-size slot per ``precision_ms`` of time, in one file on disk.

Mirrors RocketMQ 5's ``TimerWheel`` (``store/timer/TimerWheel.java`` and ``Slot.java``) in spirit.
Slot ``i`` describes the timer-log records of one time ``slot_ms`` (a multiple of the precision with
``slot_ms // precision_ms % slots_total == i``): the first and last record of its chain and how many
were linked. A slot whose stored ``slot_ms`` differs from the asked time is empty for that time (it
belongs to a time ``slots_total`` slots earlier or later).

Slot layout (32 bytes, big-endian): ``i64 slot_ms, i64 first_pos, i64 last_pos, i32 num, i32 magic``.

The file is sparse (``slots_total * 32`` bytes, pages allocated as slots are used) and read and
written with ``os.pread`` / ``os.pwrite``: nothing of it is held in the Python heap, and its pages
are page cache, not the broker's RSS.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from tidemq.errors import StoreError

__all__ = ["SLOT_SIZE", "Slot", "TimerWheel"]

SLOT_SIZE = 32
SLOT_MAGIC = 0x534C4F54  # "SLOT"
_SLOT = struct.Struct(">qqqiI")
assert _SLOT.size == SLOT_SIZE


class Slot(NamedTuple):
    """One wheel slot: its time (ms), the first and last timer-log positions of its chain, and how
    many records were linked into it."""

    slot_ms: int
    first_pos: int
    last_pos: int
    num: int


class TimerWheel:
    """The wheel file (RocketMQ's ``TimerWheel``).

    Args:
        path: the file (``<store root>/timer/timerwheel``).
        slots_total: number of slots; times ``slots_total * precision_ms`` apart share a slot.
        precision_ms: the time one slot covers (ms).

    Raises:
        StoreError: the file cannot be opened.
        ValueError: ``slots_total`` or ``precision_ms`` < 1.

    Attributes:
        resized: True when an existing file had another size (it was reset: the caller must rebuild
            the wheel from the timer log).
    """

    def __init__(self, path: str | Path, slots_total: int, precision_ms: int) -> None:
        if slots_total < 1 or precision_ms < 1:
            raise ValueError("timer wheel needs slots_total >= 1 and precision_ms >= 1")
        self.path = Path(path)
        self.slots_total = slots_total
        self.precision_ms = precision_ms
        self.length = slots_total * SLOT_SIZE
        self.resized = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            size = os.fstat(self._fd).st_size
            if size not in (0, self.length):
                self.resized = True
                os.ftruncate(self._fd, 0)
            os.ftruncate(self._fd, self.length)
        except OSError as exc:
            raise StoreError(f"cannot open timer wheel {self.path}: {exc}") from exc

    def slot_time(self, ms: int) -> int:
        """The start of the slot holding time ``ms`` (floored to the precision)."""
        return ms - ms % self.precision_ms

    def _offset(self, slot_ms: int) -> int:
        return (slot_ms // self.precision_ms) % self.slots_total * SLOT_SIZE

    def raw(self, slot_ms: int) -> Slot:
        """Whatever the slot of ``slot_ms``'s index holds (maybe another time's chain)."""
        data = os.pread(self._fd, SLOT_SIZE, self._offset(slot_ms))
        if len(data) < SLOT_SIZE:
            return Slot(0, -1, -1, 0)
        t, first, last, num, magic = _SLOT.unpack(data)
        if magic != SLOT_MAGIC:
            return Slot(0, -1, -1, 0)
        return Slot(t, first, last, num)

    def get(self, slot_ms: int) -> Slot | None:
        """The slot of time ``slot_ms`` (a slot start), or None when no record was linked for it."""
        slot = self.raw(slot_ms)
        return slot if slot.slot_ms == slot_ms else None

    def next_used(self, from_ms: int, until_ms: int, max_slots: int = 4096) -> tuple[int | None, int]:
        """The first slot time in ``[from_ms, until_ms)`` (slot starts) that has records linked for
        it, in one ``pread`` of at most ``max_slots`` slots (never past the file's end).

        Returns ``(slot_ms, end_ms)``: ``slot_ms`` is None when none of the slots read is used, and
        ``end_ms`` is where the read stopped (``until_ms``, or earlier when capped: look again from
        there). Lets the dequeue skip empty time without one read per slot.
        """
        prec = self.precision_ms
        index = (from_ms // prec) % self.slots_total
        count = min(max(0, (until_ms - from_ms) // prec), max_slots, self.slots_total - index)
        end_ms = from_ms + count * prec
        if count <= 0:
            return None, from_ms
        data = os.pread(self._fd, count * SLOT_SIZE, index * SLOT_SIZE)
        if not data.strip(b"\0"):  # sparse, never used: the common case at rest
            return None, end_ms
        t = from_ms
        for slot_ms, _first, _last, _num, magic in _SLOT.iter_unpack(
            data[: len(data) - len(data) % SLOT_SIZE]
        ):
            if slot_ms == t and magic == SLOT_MAGIC:
                return t, end_ms
            t += prec
        return None, end_ms

    def put(self, slot_ms: int, first_pos: int, last_pos: int, num: int) -> None:
        """Write the slot of time ``slot_ms``."""
        os.pwrite(self._fd, _SLOT.pack(slot_ms, first_pos, last_pos, num, SLOT_MAGIC), self._offset(slot_ms))

    def raw_bytes(self, slot_ms: int) -> bytes:
        """The 32 bytes of the slot of ``slot_ms``'s index, as stored (to put back with
        :meth:`put_raw_bytes`)."""
        return os.pread(self._fd, SLOT_SIZE, self._offset(slot_ms)).ljust(SLOT_SIZE, b"\0")

    def put_raw_bytes(self, slot_ms: int, data: bytes) -> None:
        """Write back what :meth:`raw_bytes` returned."""
        os.pwrite(self._fd, data, self._offset(slot_ms))

    def reset(self) -> None:
        """Empty every slot (before a rebuild)."""
        os.ftruncate(self._fd, 0)
        os.ftruncate(self._fd, self.length)

    def flush(self) -> None:
        """fdatasync the file."""
        os.fdatasync(self._fd)

    def close(self) -> None:
        """Unmap and close the wheel file (no flush: :meth:`flush` first)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
