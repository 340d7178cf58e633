"""Fixed-size segment files. Mirrors RocketMQ's ``MappedFile`` and ``MappedFileQueue``.

A segment is a file named by its 20-digit zero-padded start offset, preallocated (sparse) to the
segment size, written through a shared memory map (as RocketMQ's ``MappedFile``: an append is a
memory copy, not a ``pwrite`` system call) and read with ``os.pread`` on one file descriptor (the
same page cache, so a read sees every write at once; ``fdatasync`` on the descriptor writes the
mapped pages back). A mapped write only lands in blocks reserved beforehand with
``posix_fallocate``, :data:`RESERVE_CHUNK` bytes at a time ahead of the writes: a full disk then
fails that reservation with ``ENOSPC`` (an ``OSError``, as a ``pwrite`` would) and never faults a
write into a hole (``SIGBUS``). Where a map or a reservation cannot be made for another reason the
segment falls back to ``os.pwrite``. Positions:
``wrote_position`` (bytes written, in-memory truth) and ``flushed_position`` (fsynced).
A segment is reference counted so that a reader never touches a closed (and maybe reused) file
descriptor while retention deletes the file.
"""

from __future__ import annotations

import errno
import itertools
import logging
import mmap
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from tidemq.errors import StoreError

if TYPE_CHECKING:
    from tidemq.store.allocate import AllocateMappedFileService

log = logging.getLogger(__name__)

_ZERO_CHUNK = 1 << 20
RESERVE_CHUNK = 1 << 18
"""Bytes of blocks reserved (``posix_fallocate``) past a mapped write's end when it needs more:
one system call per 256 KiB written, and a file never more than 256 KiB past its data on disk."""
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
_map_failures = 0


def offset_to_file_name(offset: int) -> str:
    """``1024`` -> ``"00000000000000001024"`` (RocketMQ's ``UtilAll.offset2FileName``)."""
    return f"{offset:020d}"


class MappedFile:
    """One segment file. Mirrors ``MappedFile`` (with ``ReferenceResource``).

    Args:
        path: file path; its name must be the 20-digit start offset.
        file_size: segment size in bytes; a new file is preallocated (sparse) to this size.
        mapped: write through a shared map (default); False: ``pwrite`` only.

    Raises:
        StoreError: the name is not a 20-digit offset or the file cannot be opened.
    """

    def __init__(self, path: Path, file_size: int, *, mapped: bool = True) -> None:
        if len(path.name) != 20 or not path.name.isdigit():
            raise StoreError(f"{path}: segment file name must be a 20-digit start offset")
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(self._fd).st_size < file_size:
                os.ftruncate(self._fd, file_size)
        except OSError as exc:
            raise StoreError(f"cannot open segment {path}: {exc}") from exc
        self.wrote_position = 0
        self.flushed_position = 0
        self._mm: mmap.mmap | None = None
        """The shared map writes go through; None: ``pwrite`` (no map could be made)."""
        self._reserved = 0
        """Bytes ``[0, _reserved)`` hold allocated blocks: a mapped write below it cannot fault."""
        try:
            if mapped:
                self._mm = mmap.mmap(self._fd, file_size)
        except (OSError, ValueError) as exc:  # e.g. vm.max_map_count reached: one WARNING, then DEBUG
            global _map_failures
            _map_failures += 1
            log.log(
                logging.WARNING if _map_failures == 1 else logging.DEBUG,
                "segment %s is written with pwrite: cannot map it: %s (vm.max_map_count may be too low; "
                "later segments that cannot be mapped are logged at DEBUG)",
                path,
                exc,
            )
        self._refs = 1
        self._available = True
        self._ref_lock = threading.Lock()

    # ---- reference counting (ReferenceResource)
    def hold(self) -> bool:
        """Take a reference for a read/flush; False if the file is being destroyed."""
        with self._ref_lock:
            if not self._available:
                return False
            self._refs += 1
            return True

    def release(self) -> None:
        """Drop a reference taken by :meth:`hold`; closes the fd after :meth:`destroy`."""
        with self._ref_lock:
            self._refs -= 1
            if self._refs == 0 and self._fd >= 0:
                mm, self._mm = self._mm, None  # a later write takes the pwrite path (EBADF)
                if mm is not None:
                    mm.close()
                os.close(self._fd)
                self._fd = -1

    @property
    def available(self) -> bool:
        return self._available

    # ---- I/O
    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``pos`` (in-file) and advance ``wrote_position`` to its end if beyond.

        Raises:
            StoreError: the write would pass the end of the segment, or the OS failed.
        """
        end = pos + len(data)
        mm = self._mm
        if mm is not None and end <= self._reserved and pos >= 0:  # the usual append: a copy
            mm[pos:end] = data
        elif (
            mm is None and pos >= 0 and end <= self.file_size and os.pwrite(self._fd, data, pos) == len(data)
        ):
            pass  # an unmapped file (consume queues): one pwrite, whole (else _write_slow writes it again)
        else:
            self._write_slow(pos, data, end)
        if end > self.wrote_position:
            self.wrote_position = end

    def _write_slow(self, pos: int, data: bytes | bytearray | memoryview, end: int) -> None:
        """:meth:`write` past the reserved blocks (reserve more, then copy) or without a map."""
        if end > self.file_size or pos < 0:
            raise StoreError(f"{self.path}: write [{pos}, {end}) beyond segment size {self.file_size}")
        if self._mm is not None:
            reserve_to = min(self.file_size, end + RESERVE_CHUNK)
            try:
                os.posix_fallocate(self._fd, self._reserved, reserve_to - self._reserved)
            except OSError as exc:
                if exc.errno in _NO_SPACE:
                    raise  # as a pwrite would: nothing written, the disk guard takes it from here
                log.warning(
                    "segment %s is written with pwrite from now: no block reservation: %s", self.path, exc
                )
                mm, self._mm = self._mm, None
                mm.close()
            else:
                self._reserved = reserve_to
                self._mm[pos:end] = data
                return
        done = os.pwrite(self._fd, data, pos)
        if done < len(data):  # short writes are rare but legal
            view = memoryview(data)
            while done < len(view):
                done += os.pwrite(self._fd, view[done:], pos + done)

    def unmap(self) -> None:
        """Drop the shared map (a full segment, written no more): its pages leave the process's
        resident set; a later write (recovery truncating it) takes the ``pwrite`` path."""
        mm, self._mm = self._mm, None
        if mm is not None:
            mm.close()

    def read(self, pos: int, size: int) -> bytes:
        """``size`` bytes at in-file ``pos`` (caller holds a reference)."""
        data = os.pread(self._fd, size, pos)
        while len(data) < size:  # short reads are rare but legal
            more = os.pread(self._fd, size - len(data), pos + len(data))
            if not more:
                break
            data += more
        return data

    def select(self, pos: int, size: int) -> bytes | None:
        """Read ``size`` bytes at ``pos`` if they are within the written data; None otherwise."""
        if pos < 0 or size < 0 or pos + size > self.wrote_position or not self.hold():
            return None
        try:
            return self.read(pos, size)
        finally:
            self.release()

    def zero_from(self, pos: int) -> None:
        """Zero the file from ``pos`` to its end (drop a torn tail); ``wrote_position`` := ``pos``."""
        os.ftruncate(self._fd, pos)  # the map stays valid: the file is its full size again below
        os.ftruncate(self._fd, self.file_size)
        self._reserved = min(self._reserved, pos)  # the blocks past pos are holes again
        self.wrote_position = pos
        self.flushed_position = min(self.flushed_position, pos)

    def flush(self) -> int:
        """fdatasync if anything was written since the last flush; returns ``flushed_position``."""
        pos = self.wrote_position
        if pos > self.flushed_position and self.hold():
            try:
                os.fdatasync(self._fd)
            finally:
                self.release()
            self.flushed_position = pos
        return self.flushed_position

    def last_modified_ms(self) -> int:
        """The file's modification time in ms (0 if it is gone)."""
        try:
            return int(os.stat(self.path).st_mtime * 1000)
        except OSError:
            return 0

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def destroy(self) -> None:
        """Unlink the file; the fd closes once the last reader releases it."""
        with self._ref_lock:
            if not self._available:
                return
            self._available = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.release()

    def close(self) -> None:
        """Close without deleting (shutdown)."""
        with self._ref_lock:
            if not self._available:
                return
            self._available = False
        self.release()

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"


class MappedFileQueue:
    """An ordered list of segments in one directory. Mirrors ``MappedFileQueue``.

    The list is replaced, never mutated, so readers may take a snapshot without a lock;
    structural changes (create, delete, truncate) happen under ``self.lock``.
    """

    def __init__(self, store_path: str | Path, mapped_file_size: int) -> None:
        self.store_path = Path(store_path)
        self.mapped_file_size = mapped_file_size
        self.files: list[MappedFile] = []
        self.lock = threading.RLock()
        self.mapped = True
        """Segments opened from now on are written through a shared map; False: with ``pwrite``."""
        self.allocator: AllocateMappedFileService | None = None
        """Warms the next segment ahead of need (the commit log under SYNC_FLUSH); None: sparse."""

    def load(self) -> None:
        """Open every segment of the directory (positions are set by recovery).

        Raises:
            StoreError: a segment whose size is not ``mapped_file_size`` or whose name is not an offset.
        """
        if not self.store_path.is_dir():
            return
        files: list[MappedFile] = []
        for path in sorted(self.store_path.iterdir()):
            if path.name.endswith(".tmp") or not path.is_file():
                continue
            size = path.stat().st_size
            if size != self.mapped_file_size:
                raise StoreError(
                    f"{path}: size {size} differs from the configured segment size {self.mapped_file_size}"
                )
            files.append(MappedFile(path, self.mapped_file_size, mapped=self.mapped))
        for prev, nxt in itertools.pairwise(files):
            if nxt.file_from_offset != prev.file_from_offset + self.mapped_file_size:
                log.warning(
                    "segment gap between %s and %s in %s", prev.path.name, nxt.path.name, self.store_path
                )
        self.files = files

    # ---- lookup
    def first(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def get_last_mapped_file(self, start_offset: int = 0, need_create: bool = True) -> MappedFile | None:
        """The segment being written; creates one (at ``start_offset`` or after a full last one)."""
        last = self.last()
        if last is not None and not last.is_full():
            return last
        if not need_create:
            return last
        with self.lock:
            last = self.last()
            if last is None:
                create_at = start_offset - start_offset % self.mapped_file_size
            elif last.is_full():
                create_at = last.file_from_offset + self.mapped_file_size
            else:
                return last
            self.store_path.mkdir(parents=True, exist_ok=True)
            path = self.store_path / offset_to_file_name(create_at)
            if self.allocator is not None:
                self.allocator.take(path)  # the warm file, when ready, becomes the segment
            mf = MappedFile(path, self.mapped_file_size, mapped=self.mapped)
            if last is not None:
                last.unmap()  # full: written no more, read with pread
            self.files = [*self.files, mf]
            self.request_next()
            return mf

    def request_next(self) -> None:
        """Ask the :attr:`allocator` (if any) to warm the segment after the last one (the first
        segment when there is none)."""
        if self.allocator is None:
            return
        last = self.last()
        start = 0 if last is None else last.file_from_offset + self.mapped_file_size
        self.allocator.request(self.store_path / offset_to_file_name(start))

    def find_mapped_file_by_offset(self, offset: int) -> MappedFile | None:
        """The segment containing global ``offset``, or None (deleted or not yet created)."""
        files = self.files
        if not files or offset < files[0].file_from_offset:
            return None
        idx = (offset - files[0].file_from_offset) // self.mapped_file_size
        if (
            idx < len(files)
            and files[idx].file_from_offset <= offset < files[idx].file_from_offset + self.mapped_file_size
        ):
            return files[idx]
        for mf in files:  # gap-tolerant fallback
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        return None

    def get_min_offset(self) -> int:
        """Start offset of the first segment (0 when there is none)."""
        first = self.first()
        return first.file_from_offset if first is not None else 0

    def get_max_offset(self) -> int:
        """Global offset just past the last written byte."""
        last = self.last()
        return last.file_from_offset + last.wrote_position if last is not None else 0

    def select(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at global ``offset`` if written and still present, else None."""
        mf = self.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select(offset - mf.file_from_offset, size)

    # ---- flush
    def flush(self) -> int:
        """fsync every segment with unflushed data; returns the flushed global offset."""
        flushed = 0
        for mf in self.files:
            if mf.flushed_position < mf.wrote_position:
                mf.flush()
            flushed = mf.file_from_offset + mf.flushed_position
        return flushed

    # ---- structural changes
    def truncate_dirty_files(self, offset: int) -> None:
        """Drop everything at or after global ``offset``: zero the tail, delete later segments."""
        with self.lock:
            keep: list[MappedFile] = []
            for mf in self.files:
                end = mf.file_from_offset + self.mapped_file_size
                if end <= offset:
                    keep.append(mf)
                elif mf.file_from_offset <= offset:
                    mf.zero_from(offset - mf.file_from_offset)
                    keep.append(mf)
                else:
                    mf.destroy()
            self.files = keep

    def delete_files(self, doomed: list[MappedFile]) -> int:
        """Remove ``doomed`` segments from the queue and destroy them; returns how many."""
        if not doomed:
            return 0
        with self.lock:
            ids = {id(mf) for mf in doomed}
            self.files = [mf for mf in self.files if id(mf) not in ids]
        for mf in doomed:
            mf.destroy()
        return len(doomed)

    def destroy(self) -> None:
        """Delete every segment and the directory (topic removal)."""
        with self.lock:
            files, self.files = self.files, []
        for mf in files:
            mf.destroy()
        try:
            self.store_path.rmdir()
        except OSError:
            pass

    def close(self) -> None:
        with self.lock:
            for mf in self.files:
                mf.close()
