"""Warm commit-log segments made ahead of need. Mirrors RocketMQ's ``AllocateMappedFileService``
with ``warmMapedFileEnable`` (``MappedFile.warmMappedFile``).

A segment is a sparse file: its blocks are allocated when written back, so the ``fdatasync`` that
SYNC_FLUSH runs after every put also commits the file system's journal for the new blocks. A warm
segment has every block written with zeros and synced before the first record goes in; an
``fdatasync`` after an append then writes data pages only. On this machine's ext4, after a 33 KB
append: 101 us against 165 us for a sparse file (``bench/fsync_warm.py``).

The service warms the next segment in a daemon thread, as ``<offset>.tmp`` in the segment's
directory (the store's loader skips ``.tmp`` files), and the segment queue renames it into place when
it rolls to that segment (:meth:`take`). The put path never waits for the disk beyond a warm already
under way for exactly that segment (about 50 ms for 64 MiB here), and falls back to a sparse file
when a warm failed. Warming into the live segment is never done: its zero pages would then be
flushed by the same ``fdatasync`` that a send waits for.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
TAKE_WAIT = 1.0
"""Seconds the put path waits for a warm already under way for the segment it needs (the next
segment's warm starts when the current one is taken, so it waits only on a disk slower than the
sends; the first segment of an empty log is warmed by the store's load)."""


def fsync_dir(path: Path) -> None:
    """fsync directory ``path`` so a file created or renamed in it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def discard_warm_files(directory: Path) -> int:
    """Delete ``<20 digits>.tmp`` files left in ``directory`` by a run that stopped; returns how many."""
    removed = 0
    if not directory.is_dir():
        return 0
    for path in directory.iterdir():
        stem = path.name.removesuffix(".tmp")
        if path.name.endswith(".tmp") and len(stem) == 20 and stem.isdigit():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed += 1
    return removed


class AllocateMappedFileService:
    """Warms one segment at a time, ahead of need, in a daemon thread.

    Args:
        file_size: segment size in bytes.
        room: ``room(nbytes)`` says whether the disk has room for ``nbytes`` more (the store's:
            still at or below ``disk_space_warning_level_ratio`` after them). A segment is warmed only
            then; otherwise the queue makes a sparse one when it needs it (blocks taken as written),
            so a warm never fills the disk and refuses sends while there is space for them.

    Use: :meth:`request` the path of the segment that comes next; :meth:`take` it when the queue
    rolls to it (True: the warm file is now at ``path``); :meth:`shutdown` at store shutdown.
    """

    def __init__(self, file_size: int, room: Callable[[int], bool] | None = None) -> None:
        self.file_size = file_size
        self.room = room
        self.skipped = 0
        """Warms not done for want of disk space (for tests and stats)."""
        self._cond = threading.Condition()
        self._wanted: Path | None = None  # the segment the thread warms or has warmed
        self._ready = False
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self.warmed = 0
        """Segments warmed so far (for tests and stats)."""

    def request(self, path: Path) -> None:
        """Warm ``path`` (a segment not yet created) in the background. A different segment asked
        before, and not taken, is dropped."""
        with self._cond:
            if self._closed or path == self._wanted:
                return
            self._drop_locked()
            self._wanted, self._ready = path, False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="allocate-mapped-file", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait_ready(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the requested segment's warm; True when it is ready
        (the store's load waits so for the first segment of an empty commit log)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._ready or self._wanted is None or self._closed, timeout
            ) and (self._ready)

    def take(self, path: Path, timeout: float = TAKE_WAIT) -> bool:
        """Move the warm file of ``path`` into place; False when there is none (the caller creates a
        sparse segment). Waits up to ``timeout`` seconds for a warm of ``path`` under way."""
        with self._cond:
            if self._wanted != path:
                return False
            self._cond.wait_for(lambda: self._ready or self._wanted != path or self._closed, timeout)
            if not self._ready or self._closed or self._wanted != path:
                if self._wanted == path:
                    self._drop_locked()
                return False
            tmp = segment_tmp_path(path)
            try:
                os.rename(tmp, path)
                fsync_dir(path.parent)  # an fdatasync of the data later does not commit the rename
            except OSError as exc:
                log.warning("cannot move warm segment %s into place: %s", tmp, exc)
                self._drop_locked()
                return False
            self._wanted, self._ready = None, False
            return True

    def shutdown(self) -> None:
        """Stop the thread and delete a warm file not taken."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._cond:
            self._drop_locked()

    # -- internals -----------------------------------------------------------------------------

    def _drop_locked(self) -> None:
        """Forget the wanted segment; its file goes unless the thread is still writing it (the
        thread then deletes it itself, seeing it is no longer wanted)."""
        if self._wanted is not None and not self._busy:
            with contextlib.suppress(FileNotFoundError):
                segment_tmp_path(self._wanted).unlink()
        self._wanted, self._ready = None, False

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or (self._wanted is not None and not self._ready))
                if self._closed:
                    return
                path = self._wanted
                assert path is not None
                self._busy = True
            ok = self._has_room() and self._warm(segment_tmp_path(path))
            with self._cond:
                self._busy = False
                if ok and self._wanted == path and not self._closed:
                    self._ready = True
                    self.warmed += 1
                else:
                    with contextlib.suppress(FileNotFoundError):
                        segment_tmp_path(path).unlink()
                    if self._wanted == path:
                        self._wanted = None  # failed: the queue creates a sparse segment
                self._cond.notify_all()

    def _has_room(self) -> bool:
        """Whether the disk has room for one more segment; the first refusal after a warm is one
        INFO line (each put then allocates blocks as it writes)."""
        if self.room is None or self.room(self.file_size):
            return True
        if not self.skipped:
            log.info("not warming the next commit-log segment: no room for %d more bytes", self.file_size)
        self.skipped += 1
        return False

    def _warm(self, tmp: Path) -> bool:
        """Write ``file_size`` zero bytes to ``tmp`` and fdatasync it; False (logged) on an I/O error."""
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            log.warning("cannot create warm segment %s: %s", tmp, exc)
            return False
        try:
            zeros = bytes(min(_CHUNK, self.file_size))
            for pos in range(0, self.file_size, len(zeros)):
                if self._closed:
                    return False
                os.pwrite(fd, zeros[: self.file_size - pos], pos)
            os.fdatasync(fd)
            return True
        except OSError as exc:
            log.warning("cannot warm segment %s: %s", tmp, exc)
            return False
        finally:
            os.close(fd)


def segment_tmp_path(path: Path) -> Path:
    """Where segment ``path`` is made before it is moved into place: ``<name>.tmp``, the name the
    store's loader skips and :func:`discard_warm_files` deletes."""
    return path.with_name(path.name + ".tmp")
