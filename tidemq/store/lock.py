"""One process per store: an exclusive ``flock`` on ``<storePathRootDir>/lock``.

Mirrors the ``lock`` file RocketMQ's ``DefaultMessageStore`` takes at start (``FileChannel.tryLock``
on ``<storePathRootDir>/lock``, refusing to run twice). The lock is held for the life of the
:class:`StoreLock` (the process, for a broker); the kernel drops it when the process dies, so a
SIGKILLed broker never leaves a stale lock behind. The holder's pid is written into the file so the
refusal can name it.

Inside one process the same store may be locked once at a time too (a second
:meth:`StoreLock.acquire` on the same directory raises, as a second ``tryLock`` in one JVM does):
the abort file and the checkpoint belong to the one lock holder.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from tidemq.errors import StoreError

__all__ = ["StoreLock", "StoreLockedError"]

LOCK_FILE = "lock"

_held: set[str] = set()
"""Real paths of the stores this process holds (``flock`` is per open file, not per process)."""
_held_guard = threading.Lock()


class StoreLockedError(StoreError):
    """The store directory is locked by another process (or another store in this process)."""


class StoreLock:
    """Exclusive lock on one store directory.

    Args:
        root: the store root (``MessageStoreConfig.store_path_root_dir``); created if missing.

    Example::

        lock = StoreLock("/var/tidemq/store")
        lock.acquire()       # raises StoreLockedError if another process runs on it
        ...
        lock.release()
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()
        self.path = self.root / LOCK_FILE
        self._fd: int | None = None
        self._key = ""

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def holder_pid(self) -> int | None:
        """The pid written in the lock file by its holder (``None`` if unreadable)."""
        try:
            text = self.path.read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def acquire(self) -> None:
        """Take the lock (non-blocking) and write our pid into the lock file. Idempotent.

        Raises:
            StoreLockedError: another process (or another lock in this process) holds it; the
                message names the store and the holder's pid.
            StoreError: the directory or the lock file cannot be created.
        """
        if self._fd is not None:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            key = str(self.root.resolve())
        except OSError as exc:
            raise StoreError(f"cannot use store directory {self.root}: {exc}") from exc
        with _held_guard:
            if key in _held:
                raise StoreLockedError(
                    f"store {self.root} is already in use by this process (pid {os.getpid()})"
                )
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise StoreError(f"cannot create lock file {self.path}: {exc}") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                pid = self.holder_pid()
                who = f"pid {pid}" if pid is not None else "an unknown pid"
                raise StoreLockedError(
                    f"store {self.root} is in use by another tidemq process ({who}); "
                    "use another --store or stop that process"
                ) from None
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            except OSError:  # the pid is informative only
                pass
            _held.add(key)
            self._fd, self._key = fd, key

    def release(self) -> None:
        """Drop the lock (the file stays; its pid is stale once released). Idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with _held_guard:
            _held.discard(self._key)
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
