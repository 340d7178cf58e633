"""Committed consumer offsets per (topic, group, queue). Mirrors RocketMQ's ``ConsumerOffsetManager``.

File ``<store>/config/consumerOffset.json`` in RocketMQ's shape::

    {"offsetTable": {"TopicA@GroupA": {"0": 123, "1": 98}}}

Persisting (every ``flushConsumerOffsetInterval``, 5 s) appends one line per (topic, group) whose
offsets changed to ``consumerOffset.json.journal`` (``store/journaled_table.py``) instead of
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
from tidemq.store.config_journal import JournalEntry
from tidemq.store.journaled_table import JournaledTable

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
        self.version = 0
        """Counter of persists (the file's ``dataVersion.counter``; orders it against the journal)."""
        self.file = JournaledTable(
            self.path,
            self._lock,
            encode=self.encode,
            journal_value=self._queues_json,
            version=self._next_version,
        )
        """``consumerOffset.json`` and its journal; keys committed to or removed are marked in it."""
        self.journal = self.file.journal

    # -- persistence ---------------------------------------------------------------------------

    def load(self) -> None:
        """Read the file (or its ``.bak``), then the changes journalled after it. Missing file =
        empty table.

        Raises:
            StoreError: both the file and its ``.bak`` are corrupt, or the content has the wrong shape.
        """
        with self._lock:
            self.offset_table, self.version = {}, 0
        self.file.load(self._read_snapshot, self._apply_change)
        log.info("loaded %d consumer offset entries from %s", len(self.offset_table), self.path)

    def _read_snapshot(self, obj: Any) -> int:
        table = obj.get("offsetTable") if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            raise StoreError(f"{self.path}: no 'offsetTable' object; refusing to start with reset offsets")
        try:
            parsed = {
                str(key): {int(q): int(o) for q, o in dict(queues).items()} for key, queues in table.items()
            }
            data_version = obj.get("dataVersion")
            version = int(data_version.get("counter", 0)) if isinstance(data_version, dict) else 0
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{self.path}: malformed offsetTable ({exc}); refusing to start") from exc
        with self._lock:
            self.offset_table, self.version = parsed, version
        return version

    def _apply_change(self, entry: JournalEntry) -> None:
        with self._lock:
            if entry.value is None:
                self.offset_table.pop(entry.key, None)
            else:
                self.offset_table[entry.key] = {int(q): int(o) for q, o in dict(entry.value).items()}
            self.version = entry.version

    def _queues_json(self, key: str) -> dict[str, int] | None:
        queues = self.offset_table.get(key)
        return None if queues is None else {str(qid): off for qid, off in sorted(queues.items())}

    def _next_version(self) -> tuple[int, int]:
        self.version += 1
        return self.version, time.time_ns() // 1_000_000

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
        the whole file when there is none yet, the journal outgrew it or the last write failed).

        Returns:
            True when something was written.

        Raises:
            StoreError: the file or journal cannot be written (the changes stay pending).
        """
        return self.file.write(whole=force)

    # -- offsets -----------------------------------------------------------------------------

    def copy_table(self) -> dict[str, dict[int, int]]:
        """A copy of the offsets, ``{"topic@group": {queue_id: next offset}}``, taken under the lock."""
        with self._lock:
            return {key: dict(queues) for key, queues in self.offset_table.items()}

    def put_all(self, table: dict[str, dict[int, int]]) -> None:
        """Overwrite the entries named in ``table`` (``{"topic@group": {queue_id: offset}}``),
        keeping the others: a slave taking its master's offsets (``offsetTable.putAll`` in
        ``SlaveSynchronize.syncConsumerOffset``). Not journalled: follow with ``persist()``."""
        with self._lock:
            self.offset_table.update(table)

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
            self.file.mark_changed(key)
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
                self.file.mark_changed(key)

    def remove_offset(self, group: str) -> None:
        """Forget ``group``'s offsets of every topic (``removeOffset``: DELETE_SUBSCRIPTIONGROUP with
        ``removeOffset=true``)."""
        suffix = TOPIC_GROUP_SEPARATOR + group
        with self._lock:
            for key in [k for k in self.offset_table if k.endswith(suffix)]:
                del self.offset_table[key]
                self.file.mark_changed(key)


def load_offset_table(path: str | Path) -> dict[str, Any]:
    """The offsets a broker restarting on ``path`` would load (``consumerOffset.json`` and its
    journal), in the file's shape ``{"T@G": {"0": offset}}``; {} when there are none. For tools
    and tests that look at a store from outside.

    Raises:
        StoreError: as :meth:`ConsumerOffsetManager.load`.
    """
    manager = ConsumerOffsetManager(path)
    manager.load()
    return {key: {str(q): o for q, o in queues.items()} for key, queues in manager.offset_table.items()}
