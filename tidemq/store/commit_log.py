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
        self, mf: MappedFile, check_crc: bool, on_record: Callable[[RecordInfo], None] | None
    ) -> tuple[int, bool]:
        """Walk one segment. Returns ``(valid end position, clean)``; ``clean`` is False on corruption."""
        data = mf.read(0, mf.file_size)
        view = memoryview(data)
        size = len(view)
        pos = 0
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
        for i in range(idx, len(files)):
            mf = files[i]
            if i > idx and mf.file_from_offset != files[i - 1].file_from_offset + self.mapped_file_size:
                log.warning("commit log: segment %s does not follow its predecessor; dropped", mf.path.name)
                break
            pos, clean = self._scan_file(mf, check_crc, on_record)
            end = mf.file_from_offset + pos
            if not clean:
                log.warning("commit log: torn or corrupt record at offset %d; truncating the tail", end)
                break
            if pos < mf.file_size:
                break
        self.queue.truncate_dirty_files(end)
        return end

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
