"""Committed consumer offsets per (topic, group, queue). Mirrors RocketMQ's ``ConsumerOffsetManager``.

File ``<store>/config/consumerOffset.json`` in RocketMQ's shape::

    {"offsetTable": {"TopicA@GroupA": {"0": 123, "1": 98}}}

Persisting (every ``flushConsumerOffsetInterval``, 5 s) appends one line per (topic, group) whose
offsets changed to ``consumerOffset.json.journal`` (``store/config_journal.py``) instead of
rewriting the whole table, so its cost follows the groups that committed, not all the groups the
broker knows; the whole file is rewritten when the journal outgrows it, at shutdown and on a slave's
sync. The file then carries a ``dataVersion`` (as RocketMQ 5's does) that orders it against the
journal. :func:`load_offset_table` reads both, as a restart does.

Rule: a broker never starts with silently reset offsets. ``load()`` falls back to ``.bak`` when the
main file is corrupt (``tidemq.store.config_file.load_json``) and raises ``StoreError`` when both are
corrupt, so the broker refuses to start rather than re-deliver or skip a whole backlog.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from tidemq.broker.names import is_valid_group, is_valid_topic
from tidemq.errors import StoreError
from tidemq.store.config_file import atomic_write_json, load_json
from tidemq.store.config_journal import ConfigJournal

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"


def offset_key(topic: str, group: str) -> str:
    """The table key RocketMQ uses: ``topic + "@" + group``."""
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


class ConsumerOffsetManager:
    """Consumer offsets committed to this broker. Mirrors ``ConsumerOffsetManager``.

    Args:
        path: the ``consumerOffset.json`` path (parent directories are created on persist).

    Offsets are logical consume-queue offsets (the next message to consume). ``query_offset``
    returns -1 when nothing was committed. Thread-safe (one lock around the table).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.offset_table: dict[str, dict[int, int]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._changed: set[str] = set()
        """Keys committed to (or removed) since the last persist."""
        self.version = 0
        """Counter of persists (the file's ``dataVersion.counter``; orders it against the journal)."""
        self.journal = ConfigJournal(self.path)

    # -- persistence ---------------------------------------------------------------------------

    def load(self) -> None:
        """Read the file (or its ``.bak``), then the changes journalled after it. Missing file =
        empty table.

        Raises:
            StoreError: both the file and its ``.bak`` are corrupt, or the content has the wrong shape.
        """
        parsed, version = _read_offsets(self.path, self.journal)
        with self._lock:
            self.offset_table = parsed
            self.version = version
        try:
            self.journal.snapshot_bytes = self.path.stat().st_size
        except OSError:
            self.journal.snapshot_bytes = 0
        log.info("loaded %d consumer offset entries from %s", len(parsed), self.path)

    def encode(self) -> dict[str, object]:
        """The JSON object written to disk (queue ids as string keys)."""
        with self._lock:
            return {
                "offsetTable": {
                    key: {str(qid): off for qid, off in sorted(queues.items())}
                    for key, queues in self.offset_table.items()
                },
                "dataVersion": {"counter": self.version, "timestamp": time.time_ns() // 1_000_000},
            }

    def persist(self, *, force: bool = True) -> bool:
        """Persist the offsets: with ``force`` (shutdown, a slave's sync) the whole file atomically
        (tmp + fsync + rename, previous kept as ``.bak``); without, only the (topic, group) entries
        changed since the last persist, appended to the journal (nothing at all when none changed;
        the whole file when there is none yet or the journal outgrew it).

        Returns:
            True when something was written.

        Raises:
            StoreError: the file or journal cannot be written (the changes stay pending).
        """
        with self._write_lock:  # one writer at a time (the periodic task, a slave's sync, shutdown)
            with self._lock:
                if not force and not self._changed:
                    return False
                changed, self._changed = self._changed, set()
                self.version += 1
                whole = force or not self.path.exists() or self.journal.needs_compaction()
                changes = [
                    (key, _queues_json(self.offset_table.get(key))) for key in sorted(changed) if not whole
                ]
                version = self.version
            try:
                if whole:
                    atomic_write_json(self.path, self.encode())
                    self.journal.snapshot_bytes = self.path.stat().st_size
                    self.journal.truncate()
                else:
                    self.journal.append(version, time.time_ns() // 1_000_000, changes)
            except (OSError, StoreError):
                with self._lock:
                    self._changed |= changed
                raise
        return True

    # -- offsets -----------------------------------------------------------------------------

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Store ``offset`` for (group, topic, queue); a smaller value than stored is logged, still kept."""
        if not (is_valid_group(group) and is_valid_topic(topic)):  # no state from bad names
            log.debug("ignoring offset commit of %r / %r from %s: bad name", group, topic, client_host)
            return
        key = offset_key(topic, group)
        with self._lock:
            queues = self.offset_table.setdefault(key, {})
            old = queues.get(queue_id)
            queues[queue_id] = offset
            self._changed.add(key)
        if old is not None and offset < old:
            log.debug(
                "[NOTIFYME] update consumer offset less than store. client=%s key=%s queue=%d new=%d old=%d",
                client_host,
                key,
                queue_id,
                offset,
                old,
            )

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when none."""
        with self._lock:
            queues = self.offset_table.get(offset_key(topic, group))
            if queues is None:
                return -1
            return queues.get(queue_id, -1)

    def query_offset_table(self, group: str, topic: str) -> dict[int, int]:
        """A copy of ``{queue_id: offset}`` for (group, topic) (empty when none)."""
        with self._lock:
            return dict(self.offset_table.get(offset_key(topic, group), {}))

    def which_topic_by_consumer(self, group: str) -> set[str]:
        """Topics for which ``group`` has committed offsets."""
        with self._lock:
            keys = list(self.offset_table)
        out: set[str] = set()
        for key in keys:
            topic, sep, grp = key.partition(TOPIC_GROUP_SEPARATOR)
            if sep and grp == group:
                out.add(topic)
        return out

    def which_group_by_topic(self, topic: str) -> set[str]:
        """Groups that committed offsets for ``topic``."""
        with self._lock:
            keys = list(self.offset_table)
        out: set[str] = set()
        for key in keys:
            tpc, sep, grp = key.partition(TOPIC_GROUP_SEPARATOR)
            if sep and tpc == topic:
                out.add(grp)
        return out

    def clean_offset_by_topic(self, topic: str) -> None:
        """Forget every group's offsets for ``topic`` (topic deleted)."""
        prefix = topic + TOPIC_GROUP_SEPARATOR
        with self._lock:
            for key in [k for k in self.offset_table if k.startswith(prefix)]:
                del self.offset_table[key]
                self._changed.add(key)

    def remove_offset(self, group: str) -> None:
        """Forget ``group``'s offsets of every topic (``removeOffset``: DELETE_SUBSCRIPTIONGROUP with
        ``removeOffset=true``)."""
        suffix = TOPIC_GROUP_SEPARATOR + group
        with self._lock:
            for key in [k for k in self.offset_table if k.endswith(suffix)]:
                del self.offset_table[key]
                self._changed.add(key)


def _queues_json(queues: dict[int, int] | None) -> dict[str, int] | None:
    return None if queues is None else {str(qid): off for qid, off in sorted(queues.items())}


def _read_offsets(path: Path, journal: ConfigJournal) -> tuple[dict[str, dict[int, int]], int]:
    obj = load_json(path)
    parsed: dict[str, dict[int, int]] = {}
    version = 0
    if obj is not None:
        table = obj.get("offsetTable") if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            raise StoreError(f"{path}: no 'offsetTable' object; refusing to start with reset offsets")
        try:
            for key, queues in table.items():
                parsed[str(key)] = {int(qid): int(off) for qid, off in dict(queues).items()}
            data_version = obj.get("dataVersion")
            version = int(data_version.get("counter", 0)) if isinstance(data_version, dict) else 0
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{path}: malformed offsetTable ({exc}); refusing to start") from exc
    for entry in journal.replay(version if obj is not None else -1):
        if entry.value is None:
            parsed.pop(entry.key, None)
        else:
            parsed[entry.key] = {int(qid): int(off) for qid, off in dict(entry.value).items()}
        version = entry.version
    return parsed, version


def load_offset_table(path: str | Path) -> dict[str, Any]:
    """The offsets a broker restarting on ``path`` would load (``consumerOffset.json`` and its
    journal), in the file's shape ``{"T@G": {"0": offset}}``; {} when there are none. For tools
    and tests that look at a store from outside.

    Raises:
        StoreError: as :meth:`ConsumerOffsetManager.load`.
    """
    table, _ = _read_offsets(Path(path), ConfigJournal(path))
    return {key: {str(q): o for q, o in queues.items()} for key, queues in table.items()}
