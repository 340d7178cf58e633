"""The commit log: segmented, append-only record storage. Mirrors RocketMQ's ``CommitLog``.

Records (protocol.md §5.1) are appended to segments of ``mapped_file_size_commit_log`` bytes; a
record never spans segments: when ``record + 8`` bytes do not fit, the rest of the segment gets a
blank filler ``[remaining (4)][0xCBD43194 (4)]`` and the next segment starts. Writes are serialised
by the message store; reads (``pread``) run concurrently.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from pathlib import Path

from tidemq.errors import ProtocolError, StoreError
from tidemq.protocol.message_codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    RecordInfo,
    body_crc,
    read_record_info,
    store_timestamp_position,
)
from tidemq.protocol.record_layout import POS_SYS_FLAG, SIZE_MAGIC
from tidemq.store.mapped_file import MappedFile, MappedFileQueue

log = logging.getLogger(__name__)

END_FILE_MIN_BLANK_LENGTH = 8
HOLE_MAGIC_CODE = -626843393  # 0xDAA320FF: tidemq's marker of a damaged range set aside by recovery
_MAGIC_BYTES = tuple(struct.pack(">i", m) for m in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2))
_BLANK = SIZE_MAGIC
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class CommitLog:
    """Segmented commit log in ``store_path`` (``CommitLog`` + its ``MappedFileQueue``).

    Args:
        store_path: directory of the segments.
        mapped_file_size: segment size in bytes.
    """

    def __init__(self, store_path: str | Path, mapped_file_size: int) -> None:
        self.mapped_file_size = mapped_file_size
        self.queue = MappedFileQueue(store_path, mapped_file_size)
        self.damaged_dir = Path(store_path).parent / "damaged"
        """Where :meth:`set_aside` keeps damaged ranges (``<store root>/damaged`` by default)."""

    def load(self) -> None:
        """Open the existing segments (positions are set by :meth:`recover`)."""
        self.queue.load()

    # ---- offsets
    def get_min_offset(self) -> int:
        """Offset of the first byte still stored (start of the first segment)."""
        return self.queue.get_min_offset()

    def get_max_offset(self) -> int:
        """Offset just past the last written byte (where the next record goes)."""
        return self.queue.get_max_offset()

    def roll_next_file(self, offset: int) -> int:
        """Start offset of the segment after the one containing ``offset``."""
        return offset + self.mapped_file_size - offset % self.mapped_file_size

    # ---- append
    def reserve(self, size: int) -> tuple[MappedFile, int]:
        """Room for ``size`` bytes in one segment: ``(segment, in-file position)``.

        Writes the blank filler and rolls to a new segment when the rest of the current one is too
        small (``END_OF_FILE`` in RocketMQ). Caller holds the store's put lock.

        Raises:
            StoreError: ``size`` cannot fit in any segment, or a segment cannot be created.
        """
        if size + END_FILE_MIN_BLANK_LENGTH > self.mapped_file_size:
            raise StoreError(f"{size} bytes do not fit in a {self.mapped_file_size}-byte commit-log segment")
        files = self.queue.files
        mf = files[-1] if files else None
        if mf is None or mf.wrote_position >= mf.file_size:  # none yet, or full: a new one
            mf = self.queue.get_last_mapped_file(0)
            assert mf is not None
        remaining = mf.file_size - mf.wrote_position
        if size + END_FILE_MIN_BLANK_LENGTH > remaining:
            mf.write(mf.wrote_position, _BLANK.pack(remaining, BLANK_MAGIC_CODE))
            mf.wrote_position = mf.file_size
            mf = self.queue.get_last_mapped_file(0)
            assert mf is not None
        return mf, mf.wrote_position

    # ---- reads
    def get_message(self, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes at ``offset``; None if deleted or not written yet."""
        return self.queue.select(offset, size)

    def get_record(self, offset: int) -> bytes | None:
        """The whole record starting at ``offset`` (size read from its header); None if absent."""
        head = self.queue.select(offset, 8)
        if head is None:
            return None
        size, magic = _BLANK.unpack(head)
        if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) or size <= 8:
            return None
        return self.queue.select(offset, size)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``offset`` (ms), -1 if it is gone."""
        head = self.queue.select(offset, min(size, 76))
        if head is None or len(head) < 64:
            return -1
        sys_flag = _I32.unpack_from(head, POS_SYS_FLAG)[0]
        pos = store_timestamp_position(sys_flag)
        if pos + 8 > len(head):
            return -1
        return int(_I64.unpack_from(head, pos)[0])

    # ---- recovery
    def _scan_file(
        self,
        mf: MappedFile,
        check_crc: bool,
        on_record: Callable[[RecordInfo], None] | None,
        start: int = 0,
    ) -> tuple[int, bool]:
        """Walk one segment from ``start``. Returns ``(valid end position, clean)``; ``clean`` is
        False on corruption. Holes left by an earlier resynchronisation are stepped over."""
        data = mf.read(0, mf.file_size)
        view = memoryview(data)
        size = len(view)
        pos = start
        while pos + 8 <= size:
            total, magic = _BLANK.unpack_from(view, pos)
            if magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
                if total <= 8 or pos + total > size:
                    return pos, False
                try:
                    info = read_record_info(view, pos)
                except ProtocolError:
                    return pos, False
                if info.commit_log_offset != mf.file_from_offset + pos:
                    return pos, False
                if check_crc:
                    start = pos + info.body_offset
                    if body_crc(view[start : start + info.body_length]) != info.body_crc:
                        return pos, False
                if on_record is not None:
                    on_record(info)
                pos += total
            elif magic == BLANK_MAGIC_CODE and total == size - pos:
                return size, True
            elif magic == HOLE_MAGIC_CODE and 8 <= total <= size - pos:
                pos += total  # a damaged range set aside by an earlier recovery
            elif total == 0 and magic == 0:
                return pos, True
            else:
                return pos, False
        return pos, True

    def recover(
        self, start_offset: int, check_crc: bool, on_record: Callable[[RecordInfo], None] | None
    ) -> int:
        """Re-validate segments from the one holding ``start_offset`` forward, truncating a torn tail.

        Segments before the start are trusted as full. ``on_record`` gets every valid record scanned
        (for re-dispatch to consume queues). Returns the recovered end offset (the max offset).
        Mirrors ``recoverNormally`` / ``recoverAbnormally``.
        """
        files = self.queue.files
        if not files:
            return 0
        for mf in files:
            mf.wrote_position = mf.flushed_position = mf.file_size
        idx = 0
        for i, mf in enumerate(files):
            if mf.file_from_offset <= start_offset:
                idx = i
        end = files[idx].file_from_offset
        i, pos_in = idx, 0
        while i < len(files):
            mf = files[i]
            if (
                i > idx
                and pos_in == 0
                and mf.file_from_offset != files[i - 1].file_from_offset + self.mapped_file_size
            ):
                log.warning("commit log: segment %s does not follow its predecessor; dropped", mf.path.name)
                break
            pos, clean = self._scan_file(mf, check_crc, on_record, pos_in)
            end = mf.file_from_offset + pos
            pos_in = 0
            if not clean:
                found = self.find_next_record(end, check_crc, files[i:])
                if found is None:
                    log.warning(
                        "commit log: torn or corrupt record at offset %d and no valid record after it; "
                        "truncating the tail (%d bytes dropped)",
                        end,
                        self._written_bytes_after(end, files[i:]),
                    )
                    break
                self.set_aside(end, found)
                j = next(
                    k
                    for k in range(i, len(files))
                    if files[k].file_from_offset <= found < files[k].file_from_offset + self.mapped_file_size
                )
                i, pos_in = j, found - files[j].file_from_offset
                continue
            if pos < mf.file_size:
                break
            i += 1
        self.queue.truncate_dirty_files(end)
        return end

    def scan_all(self, on_record: Callable[[RecordInfo], None]) -> None:
        """Call ``on_record`` for every valid record of every segment (read-only; no CRC check),
        stepping over holes and resynchronising past damaged data (used to rebuild consume queues)."""
        files = list(self.queue.files)
        for i, mf in enumerate(files):
            pos = 0
            while True:
                pos, clean = self._scan_file(mf, False, on_record, pos)
                if clean:
                    break
                found = self.find_next_record(mf.file_from_offset + pos, False, files[i : i + 1])
                if found is None:
                    break
                pos = found - mf.file_from_offset

    def find_next_record(self, bad: int, check_crc: bool, files: list[MappedFile]) -> int | None:
        """The offset of the first valid record after ``bad`` (magic code, size, its own
        PHYSICALOFFSET and, with ``check_crc``, the body CRC agree), searching ``files``; None if none.

        The search looks for the magic code's bytes (a C-speed ``find``), not at every offset.
        """
        for mf in files:
            base = mf.file_from_offset
            if base + mf.file_size <= bad:
                continue
            data = mf.read(0, mf.file_size)
            view = memoryview(data)
            pos = max(0, bad + 1 - base)
            while True:
                hits = [h for h in (data.find(m, pos + 4) for m in _MAGIC_BYTES) if h >= 0]
                if not hits:
                    break
                cand = min(hits) - 4
                pos = cand + 1
                if cand < 0 or base + cand <= bad:
                    continue
                if self._valid_record_at(view, cand, base, check_crc):
                    return base + cand
        return None

    @staticmethod
    def _valid_record_at(view: memoryview, pos: int, base: int, check_crc: bool) -> bool:
        total, _magic = _BLANK.unpack_from(view, pos)
        if total <= 8 or pos + total > len(view):
            return False
        try:
            info = read_record_info(view, pos)
        except ProtocolError:
            return False
        if info.commit_log_offset != base + pos:
            return False
        if check_crc:
            start = pos + info.body_offset
            return body_crc(view[start : start + info.body_length]) == info.body_crc
        return True

    def _written_bytes_after(self, offset: int, files: list[MappedFile]) -> int:
        """Non-zero bytes from ``offset`` to the end of ``files`` (what a truncation drops)."""
        total = 0
        for mf in files:
            start = max(0, offset - mf.file_from_offset)
            if start >= mf.file_size:
                continue
            total += len(mf.read(start, mf.file_size - start).rstrip(b"\x00"))
        return total

    def set_aside(self, bad: int, good: int) -> None:
        """Keep the damaged range ``[bad, good)`` aside and mark it as a hole; one WARNING line.

        The bytes are copied to ``<damaged_dir>/commitlog-<bad>-<good>.bin``; in the log, a range
        inside one segment becomes a hole record (``[size][HOLE_MAGIC_CODE]``) that later scans step
        over. The records before and after it are kept; only what was in the range is lost.
        """
        saved = ""
        try:
            self.damaged_dir.mkdir(parents=True, exist_ok=True)
            target = self.damaged_dir / f"commitlog-{bad:020d}-{good:020d}.bin"
            chunks = []
            for mf in self.queue.files:
                lo, hi = max(bad, mf.file_from_offset), min(good, mf.file_from_offset + mf.file_size)
                if lo < hi:
                    chunks.append(mf.read(lo - mf.file_from_offset, hi - lo))
            target.write_bytes(b"".join(chunks))
            saved = f"; the damaged bytes are kept in {target}"
        except OSError as exc:
            saved = f"; keeping the damaged bytes failed: {exc}"
        seg = self.queue.find_mapped_file_by_offset(bad)
        if seg is not None and good - bad >= 8 and good <= seg.file_from_offset + seg.file_size:
            seg.write(bad - seg.file_from_offset, _BLANK.pack(good - bad, HOLE_MAGIC_CODE))
        log.warning(
            "commit log: corrupt data at offsets %d..%d (%d bytes) skipped, resynchronised on the next "
            "valid record; the message(s) stored in that range are lost, every record after it is kept%s",
            bad,
            good,
            good - bad,
            saved,
        )

    # ---- retention
    def delete_expired_file(
        self, expired_ms: int, now_ms: int, clean_immediately: bool, max_count: int
    ) -> int:
        """Delete old segments, oldest first, never the last one. Mirrors ``deleteExpiredFile``.

        A segment goes when ``now_ms >= last modification + expired_ms`` (or ``clean_immediately``);
        deletion stops at the first segment that must stay. Returns the number deleted.
        """
        doomed: list[MappedFile] = []
        for mf in self.queue.files[:-1]:
            if len(doomed) >= max_count:
                break
            if clean_immediately or now_ms >= mf.last_modified_ms() + expired_ms:
                doomed.append(mf)
            else:
                break
        return self.queue.delete_files(doomed)

    def flush(self) -> int:
        """fsync written data; returns the flushed offset."""
        return self.queue.flush()

    def close(self) -> None:
        self.queue.close()
