"""A JSON config table kept on disk as a whole snapshot plus a change journal.

The broker's topic table (``topics.json``, ``broker/topic_config.py``) and its committed consumer
offsets (``consumerOffset.json``, ``broker/offset_manager.py``) change a few keys at a time in tables
of many. :class:`JournaledTable` persists such a table so that a change costs O(changed keys):

* a write appends one CRC'd line per changed key to ``<file>.journal`` and fdatasyncs once
  (:class:`~tidemq.store.config_journal.ConfigJournal`, which documents the line format);
* the whole file (the *snapshot*, in the shape RocketMQ's tools read) is rewritten atomically
  (tmp + fsync + rename, ``.bak`` kept) when there is none yet, when the journal has outgrown it,
  when asked (shutdown, a slave's sync), when the table was replaced whole, and after a failed write
  (a torn journal line would hide every line appended after it), and the journal is then emptied;
* loading reads the snapshot, then applies the journal lines the snapshot does not hold yet (those
  with a version above the snapshot's ``dataVersion.counter``; all of them when there is no
  snapshot), stopping at a torn or corrupt line.

The owner keeps its table and its lock; it tells the table which keys changed (under its lock) and
supplies how to encode the snapshot, a key's journal value and the version of a write.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from tidemq.errors import StoreError
from tidemq.store.config_file import atomic_write_json, load_json
from tidemq.store.config_journal import ConfigJournal, JournalEntry

__all__ = ["JournaledTable"]


class JournaledTable:
    """The persistence of one config table: ``<path>`` (snapshot) and ``<path>.journal``.

    Args:
        path: the snapshot file (``.../config/topics.json``); parent directories are made on write.
        lock: the owner's lock around its table. :meth:`write` holds it while it takes the changed
            keys and calls ``journal_value`` and ``version``; :meth:`mark_changed` and
            :meth:`mark_replaced` expect the caller to hold it.
        encode: ``() -> dict``, the whole snapshot in the file's JSON shape; called without ``lock``
            held (it takes the lock itself).
        journal_value: ``key -> JSON value``, or None when the key is gone (a deletion line).
        version: ``() -> (counter, timestamp_ms)`` of the write about to happen; the counter must
            be the one ``encode`` writes as ``dataVersion.counter`` (an owner that counts writes
            bumps it here).

    Writes are serialised (one writer at a time); thread-safe with the owner's lock as above.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        lock: AbstractContextManager[Any],
        *,
        encode: Callable[[], dict[str, Any]],
        journal_value: Callable[[str], Any | None],
        version: Callable[[], tuple[int, int]],
    ) -> None:
        self.path = Path(path)
        self.journal = ConfigJournal(self.path)
        self._lock = lock
        self._encode = encode
        self._journal_value = journal_value
        self._version = version
        self._write_lock = threading.Lock()
        self._changed: set[str] = set()
        self._snapshot_due = False

    def mark_changed(self, key: str) -> None:
        """``key`` was put or removed; the next :meth:`write` persists it (caller holds the lock)."""
        self._changed.add(key)

    def mark_replaced(self) -> None:
        """The whole table was replaced: the next :meth:`write` is a snapshot (caller holds the lock)."""
        self._changed.clear()
        self._snapshot_due = True

    def load(self, read_snapshot: Callable[[Any], int], apply: Callable[[JournalEntry], None]) -> int:
        """Load the snapshot (falling back to ``.bak``), then the journalled changes after it.

        Args:
            read_snapshot: ``obj -> counter``: fills the owner's table from the snapshot's JSON and
                returns its ``dataVersion.counter``; not called when there is no snapshot.
            apply: applies one journalled change (``entry.value`` None: the key was removed), in
                order; ``entry.version`` / ``entry.timestamp`` are the table's version after it.

        Returns:
            How many journal lines were applied.

        Raises:
            StoreError: the snapshot and its ``.bak`` are both corrupt, ``read_snapshot`` refused
                the content, or the journal cannot be read.
        """
        obj = load_json(self.path)
        after = read_snapshot(obj) if obj is not None else -1
        replayed = 0
        for entry in self.journal.replay(after):
            apply(entry)
            replayed += 1
        try:
            self.journal.snapshot_bytes = self.path.stat().st_size
        except OSError:
            self.journal.snapshot_bytes = 0
        return replayed

    def write(self, *, whole: bool = False) -> bool:
        """Persist the keys changed since the last write: one journal append, or a snapshot (with
        ``whole``, or when one is due: module docstring). Nothing is written when no key changed and
        no snapshot is due.

        Returns:
            True when something was written.

        Raises:
            StoreError: the file or the journal cannot be written; the changes stay pending and the
                next write is a snapshot.
        """
        with self._write_lock:
            with self._lock:
                snapshot = (
                    whole or self._snapshot_due or not self.path.exists() or self.journal.needs_compaction()
                )
                if not snapshot and not self._changed:
                    return False
                changed, self._changed = self._changed, set()
                self._snapshot_due = False
                counter, timestamp = self._version()
                lines = [] if snapshot else [(key, self._journal_value(key)) for key in sorted(changed)]
            try:
                if snapshot:
                    atomic_write_json(self.path, self._encode())
                    self.journal.snapshot_bytes = self.path.stat().st_size
                    self.journal.truncate()
                else:
                    self.journal.append(counter, timestamp, lines)
            except (OSError, StoreError):
                with self._lock:
                    self._changed |= changed
                    self._snapshot_due = True
                raise
        return True
