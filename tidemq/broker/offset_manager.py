"""Committed consumer offsets per (topic, group, queue). Mirrors RocketMQ's ``ConsumerOffsetManager``.

File ``<store>/config/consumerOffset.json`` in RocketMQ's shape::

    {"offsetTable": {"TopicA@GroupA": {"0": 123, "1": 98}}}

Rule: a broker never starts with silently reset offsets. ``load()`` falls back to ``.bak`` when the
main file is corrupt (``tidemq.store.config_file.load_json``) and raises ``StoreError`` when both are
corrupt, so the broker refuses to start rather than re-deliver or skip a whole backlog.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from tidemq.broker.names import is_valid_group, is_valid_topic
from tidemq.errors import StoreError
from tidemq.store.config_file import atomic_write_json, load_json

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
        self._dirty = False

    # -- persistence ---------------------------------------------------------------------------

    def load(self) -> None:
        """Read the file (or its ``.bak``). Missing file = empty table.

        Raises:
            StoreError: both the file and its ``.bak`` are corrupt, or the content has the wrong shape.
        """
        obj = load_json(self.path)
        if obj is None:
            return
        table = obj.get("offsetTable") if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            raise StoreError(f"{self.path}: no 'offsetTable' object; refusing to start with reset offsets")
        parsed: dict[str, dict[int, int]] = {}
        try:
            for key, queues in table.items():
                parsed[str(key)] = {int(qid): int(off) for qid, off in dict(queues).items()}
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{self.path}: malformed offsetTable ({exc}); refusing to start") from exc
        with self._lock:
            self.offset_table = parsed
        log.info("loaded %d consumer offset entries from %s", len(parsed), self.path)

    def encode(self) -> dict[str, object]:
        """The JSON object written to disk (queue ids as string keys)."""
        with self._lock:
            return {
                "offsetTable": {
                    key: {str(qid): off for qid, off in sorted(queues.items())}
                    for key, queues in self.offset_table.items()
                }
            }

    def persist(self, *, force: bool = True) -> bool:
        """Write the table atomically (tmp + fsync + rename, previous kept as ``.bak``).

        With ``force=False`` nothing is written unless an offset changed since the last persist.
        Returns True when the file was written.
        """
        with self._write_lock:  # one writer at a time (the periodic task, a slave's sync, shutdown)
            with self._lock:
                if not force and not self._dirty:
                    return False
                self._dirty = False
            atomic_write_json(self.path, self.encode())
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
            self._dirty = True
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
                self._dirty = True

    def remove_offset(self, group: str) -> None:
        """Forget ``group``'s offsets of every topic (``removeOffset``: DELETE_SUBSCRIPTIONGROUP with
        ``removeOffset=true``)."""
        suffix = TOPIC_GROUP_SEPARATOR + group
        with self._lock:
            for key in [k for k in self.offset_table if k.endswith(suffix)]:
                del self.offset_table[key]
                self._dirty = True
