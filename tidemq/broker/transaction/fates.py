"""How each decided transaction ended, on disk: what answers an END_TRANSACTION that comes late.

tidemq extension (RocketMQ has no such file: its broker re-puts a message on every matching
COMMIT and never learns that a half message was discarded). The service forgets a transaction once
it is decided; an END that arrives after that (a retried END, a Spark driver re-committing a batch
after a restart, a COMMIT after the half was discarded) is answered from here:

* committed: a COMMIT answers SUCCESS and puts nothing (idempotent, across restarts too);
* rolled back or discarded: a COMMIT is refused (SYSTEM_ERROR, ``Find prepared transaction message
  failed: ...``), so the producer learns its message will never be delivered;
* a ROLLBACK is always answered SUCCESS and writes nothing.

Layout: ``<storePathRootDir>/transaction/fates/<first origin, 20 digits>``, one byte per
transaction at ``origin - first`` (the origin is the half queue offset of a transaction's first
record), :data:`SEGMENT_ORIGINS` origins per file, sparse (unwritten bytes read as 0, unknown).
Files wholly below the half queue's first offset are deleted (:meth:`TransactionFates.delete_below`).

Crash safety: fates are kept in memory when decided and written in runs (one ``pwrite`` per run of
consecutive origins) every :data:`FLUSH_EVERY` decisions and by :meth:`TransactionFates.sync`,
which also fsyncs; the check service calls it before it moves its offsets past any record. Start-up
re-derives the fate of every op record after the op-queue offset (op records carry their decision
in ``TIDEMQ_TX_END``), and a discarded half after the half-queue offset is still pending, so it is
discarded again: neither a killed process nor a machine crash loses a fate.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Final

__all__ = [
    "COMMITTED",
    "DECIDED",
    "DISCARDED",
    "ROLLED_BACK",
    "SEGMENT_ORIGINS",
    "UNKNOWN",
    "TransactionFates",
    "fate_name",
]

log = logging.getLogger(__name__)

UNKNOWN: Final = 0
"""No fate recorded (pending, never seen, or its file deleted)."""
DECIDED: Final = 1
"""Decided by an op record written before fates were recorded (commit or rollback: not known)."""
DISCARDED: Final = 2
"""Moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` after ``transactionCheckMax`` checks without a decision."""
COMMITTED: Final = 8
"""Committed (MessageSysFlag.TRANSACTION_COMMIT_TYPE)."""
ROLLED_BACK: Final = 12
"""Rolled back (MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)."""
SEGMENT_ORIGINS: Final = 1 << 20
"""Origins (bytes) per fate file."""
FLUSH_EVERY: Final = 4096
"""Fates kept in memory before they are written."""

_NAMES = {
    UNKNOWN: "unknown",
    DECIDED: "decided",
    DISCARDED: "discarded",
    COMMITTED: "committed",
    ROLLED_BACK: "rolled back",
}


def fate_name(fate: int) -> str:
    """``"committed"``, ``"rolled back"``, ``"discarded"``, ``"decided"`` or ``"unknown"``."""
    return _NAMES.get(fate, f"fate {fate}")


class TransactionFates:
    """The fate bytes of one broker's transactions (see the module doc).

    Args:
        directory: where the fate files live (created on the first write).

    Not thread-safe: the transaction service calls it from the broker's event loop.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._fds: dict[int, int] = {}
        self._dirty: set[int] = set()
        self._unwritten: dict[int, int] = {}

    def _fd(self, first: int, create: bool) -> int | None:
        fd = self._fds.get(first)
        if fd is None:
            path = self.directory / f"{first:020d}"
            if create:
                self.directory.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
            except FileNotFoundError:
                return None
            self._fds[first] = fd
        return fd

    def get(self, origin: int) -> int:
        """The fate of the transaction whose first half record is at half queue offset ``origin``
        (:data:`UNKNOWN` when none is recorded)."""
        if origin < 0:
            return UNKNOWN
        fate = self._unwritten.get(origin)
        if fate is not None:
            return fate
        first = origin - origin % SEGMENT_ORIGINS
        fd = self._fd(first, create=False)
        if fd is None:
            return UNKNOWN
        raw = os.pread(fd, 1, origin - first)
        return raw[0] if raw else UNKNOWN

    def set(self, origin: int, fate: int) -> None:
        """Record ``fate`` for ``origin`` (in memory; written by :meth:`flush`, durable once
        :meth:`sync` ran)."""
        if origin >= 0:
            self._unwritten[origin] = fate
            if len(self._unwritten) >= FLUSH_EVERY:
                self.flush()

    def flush(self) -> None:
        """Write the fates kept in memory: one ``pwrite`` per run of consecutive origins of a file.
        An I/O error is logged: the ENDs of those transactions are then answered as unknown fates."""
        unwritten, self._unwritten = self._unwritten, {}
        origins = sorted(unwritten)
        i = 0
        while i < len(origins):
            start = origins[i]
            first = start - start % SEGMENT_ORIGINS
            j = i + 1
            while (
                j < len(origins) and origins[j] == origins[j - 1] + 1 and origins[j] < first + SEGMENT_ORIGINS
            ):
                j += 1
            try:
                fd = self._fd(first, create=True)
                assert fd is not None
                os.pwrite(fd, bytes(unwritten[o] for o in origins[i:j]), start - first)
                self._dirty.add(first)
            except OSError as exc:
                log.warning(
                    "transactions: cannot record the fates of half queue offsets %d-%d: %s",
                    start,
                    origins[j - 1],
                    exc,
                )
            i = j

    def sync(self) -> None:
        """:meth:`flush`, then fsync the files written since the last call."""
        self.flush()
        for first in sorted(self._dirty):
            fd = self._fds.get(first)
            if fd is not None:
                try:
                    os.fsync(fd)
                except OSError as exc:
                    log.warning("transactions: fsync of fate file %d failed: %s", first, exc)
        self._dirty.clear()

    def delete_below(self, origin: int) -> int:
        """Delete the files whose every origin is below ``origin`` (the half queue's first offset:
        their half records are gone); returns how many."""
        self.flush()
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return 0
        deleted = 0
        for name in names:
            if not name.isdigit() or int(name) + SEGMENT_ORIGINS > origin:
                continue
            first = int(name)
            fd = self._fds.pop(first, None)
            if fd is not None:
                os.close(fd)
            self._dirty.discard(first)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.directory / name)
            deleted += 1
        return deleted

    def close(self) -> None:
        """:meth:`sync`, then close the files."""
        self.sync()
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
