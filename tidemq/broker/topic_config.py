"""The broker's topic table. Mirrors RocketMQ's ``TopicConfigManager``.

File ``<store>/config/topics.json`` in RocketMQ's shape::

    {"dataVersion": {"counter": N, "timestamp": ms},
     "topicConfigTable": {"T": {"order": false, "perm": 6, "readQueueNums": 8, "topicFilterType": "SINGLE_TAG",
                                "topicName": "T", "topicSysFlag": 0, "writeQueueNums": 8}}}

Built-in topics (as RocketMQ's constructor creates them): ``SELF_TEST_TOPIC`` (1 queue), ``TBW102``
(``default_topic_queue_nums`` queues, perm 7, only when ``auto_create_topic_enable``), the cluster-name
and broker-name topics (perm INHERIT, plus read/write when enabled), ``OFFSET_MOVED_EVENT`` (1) and
``SCHEDULE_TOPIC_XXXX`` (18 queues, one per delay level), ``rmq_sys_wheel_timer`` (1 queue: timer
messages, RocketMQ 5), ``<cluster>_REPLY_TOPIC`` (1 queue, where
request-reply answers are stored).

Every change bumps ``data_version`` and is persisted (off the event loop in a broker:
``config_persist.py``) as one line per changed topic appended to ``topics.json.journal``
(``store/journaled_table.py``); ``topics.json`` itself is rewritten whole only when the journal has
outgrown it, and at shutdown, so creating N topics one at a time writes O(N) bytes, not O(N²).
``on_change`` (set by the broker) then re-registers the broker with the name servers, sending only
the topics changed since its last registration (RocketMQ's ``registerIncrementBrokerData``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tidemq.broker.config import BrokerConfig
from tidemq.broker.config_persist import PersistedConfig
from tidemq.errors import StoreError
from tidemq.protocol.body import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from tidemq.protocol.topic import (
    AUTO_CREATE_TOPIC_KEY,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TIMER_TOPIC,
    PermName,
)
from tidemq.store.config_journal import JournalEntry
from tidemq.store.journaled_table import JournaledTable

log = logging.getLogger(__name__)

SCHEDULE_TOPIC_QUEUE_NUMS = 18
DEFAULT_TOPIC_QUEUE_NUMS = 16  # RocketMQ's TopicConfig default


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def make_topic_config(
    topic: str,
    queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
    perm: int = PermName.PERM_READ | PermName.PERM_WRITE,
    *,
    write_queue_nums: int | None = None,
    topic_filter_type: str = "SINGLE_TAG",
    topic_sys_flag: int = 0,
    order: bool = False,
) -> TopicConfig:
    """A ``TopicConfig`` with ``queue_nums`` read queues (and as many write queues unless given)."""
    return TopicConfig(
        topic_name=topic,
        read_queue_nums=queue_nums,
        write_queue_nums=queue_nums if write_queue_nums is None else write_queue_nums,
        perm=perm,
        topic_filter_type=topic_filter_type,
        topic_sys_flag=topic_sys_flag,
        order=order,
    )


class TopicConfigManager(PersistedConfig):
    """Topic configs of this broker. Mirrors ``TopicConfigManager``.

    Args:
        broker_config: for the built-in topics and the auto-create switch.
        path: the ``topics.json`` path.

    Thread-safe; ``on_change()`` is called (without arguments, outside the lock) after a topic was
    created, updated or deleted.
    """

    def __init__(self, broker_config: BrokerConfig, path: str | Path) -> None:
        super().__init__()
        self.broker_config = broker_config
        self.path = Path(path)
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion(timestamp=now_ms(), counter=0)
        self.on_change: Callable[[], None] | None = None
        self.fallback: Callable[[str], TopicConfig | None] | None = None
        """A slave's lookup of topics it holds messages of but has not copied yet (slave_sync.py)."""
        self._lock = threading.RLock()
        self.file = JournaledTable(
            self.path, self._lock, encode=self.encode, journal_value=self._topic_json, version=self._version
        )
        """``topics.json`` and its journal; every changed topic is marked in it."""
        self.journal = self.file.journal
        self.unregistered: dict[str, TopicConfig | None] = {}
        """Topics changed since the broker last registered them with the name servers."""
        self._add_builtin_topics()

    # -- built-ins and persistence -------------------------------------------------------------

    def _add_builtin_topics(self) -> None:
        cfg = self.broker_config
        rw = PermName.PERM_READ | PermName.PERM_WRITE
        table = self.topic_config_table
        table[SELF_TEST_TOPIC] = make_topic_config(SELF_TEST_TOPIC, 1)
        if cfg.auto_create_topic_enable:
            table[AUTO_CREATE_TOPIC_KEY] = make_topic_config(
                AUTO_CREATE_TOPIC_KEY, cfg.default_topic_queue_nums, rw | PermName.PERM_INHERIT
            )
        perm = PermName.PERM_INHERIT | (rw if cfg.cluster_topic_enable else 0)
        table[cfg.broker_cluster_name] = make_topic_config(
            cfg.broker_cluster_name, DEFAULT_TOPIC_QUEUE_NUMS, perm
        )
        perm = PermName.PERM_INHERIT | (rw if cfg.broker_topic_enable else 0)
        table[cfg.broker_name] = make_topic_config(cfg.broker_name, 1, perm)
        table[OFFSET_MOVED_EVENT] = make_topic_config(OFFSET_MOVED_EVENT, 1)
        table[SCHEDULE_TOPIC] = make_topic_config(SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUMS)
        table[TIMER_TOPIC] = make_topic_config(TIMER_TOPIC, 1)  # timer messages (broker/timer_service.py)
        reply = f"{cfg.broker_cluster_name}_REPLY_TOPIC"  # request-reply (TopicConfigManager, 4.6+)
        table[reply] = make_topic_config(reply, 1)
        if cfg.trace_topic_enable and cfg.msg_trace_topic_name:  # message trace (TopicConfigManager)
            table[cfg.msg_trace_topic_name] = make_topic_config(cfg.msg_trace_topic_name, 1)

    def load(self) -> None:
        """Read ``topics.json`` (falling back to ``.bak``), then the changes journalled after it;
        entries override the built-ins.

        Raises:
            StoreError: both files are corrupt or the content has the wrong shape.
        """
        replayed = self.file.load(self._load_snapshot, self._apply_change)
        if replayed:
            log.info("replayed %d topic change(s) from %s", replayed, self.journal.path)
        if not self.broker_config.auto_create_topic_enable:
            self.topic_config_table.pop(AUTO_CREATE_TOPIC_KEY, None)

    def _load_snapshot(self, obj: Any) -> int:
        if not isinstance(obj, dict) or not isinstance(obj.get("topicConfigTable", {}), dict):
            raise StoreError(f"{self.path}: not a topics.json object")
        try:
            with self._lock:
                for name, tc in obj.get("topicConfigTable", {}).items():
                    self.topic_config_table[str(name)] = TopicConfig.from_json(tc)
                if isinstance(obj.get("dataVersion"), dict):
                    self.data_version = DataVersion.from_json(obj["dataVersion"])
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"{self.path}: malformed topic config ({exc})") from exc
        log.info("loaded %d topic configs from %s", len(self.topic_config_table), self.path)
        return self.data_version.counter

    def _apply_change(self, entry: JournalEntry) -> None:
        with self._lock:
            if entry.value is None:
                self.topic_config_table.pop(entry.key, None)
            else:
                self.topic_config_table[entry.key] = TopicConfig.from_json(entry.value)
            self.data_version = DataVersion(timestamp=entry.timestamp, counter=entry.version)

    def _topic_json(self, topic: str) -> dict[str, Any] | None:
        tc = self.topic_config_table.get(topic)
        return None if tc is None else tc.to_json()

    def _version(self) -> tuple[int, int]:
        return self.data_version.counter, self.data_version.timestamp

    def encode(self) -> dict[str, Any]:
        """The JSON object written to ``topics.json``."""
        with self._lock:
            return {
                "dataVersion": self.data_version.to_json(),
                "topicConfigTable": {
                    name: tc.to_json() for name, tc in sorted(self.topic_config_table.items())
                },
            }

    def _next_version(self, *topics: str) -> None:
        """Bump the data version after ``topics`` changed (call with the lock held)."""
        self.data_version = DataVersion(timestamp=now_ms(), counter=self.data_version.counter + 1)
        for topic in topics:
            tc = self.topic_config_table.get(topic)
            self.file.mark_changed(topic)
            self.unregistered[topic] = tc

    # -- persistence: journal appends, whole snapshots ------------------------------------------

    def persist(self) -> None:
        """Write ``topics.json`` whole (previous copy kept as ``.bak``) and empty the journal; one
        writer at a time. Used at shutdown.

        Raises:
            StoreError: the file cannot be written.
        """
        self.file.write(whole=True)

    def persist_changes(self) -> None:
        """Persist what changed since the last write: appended to the journal (one fdatasync), or a
        whole snapshot when there is none yet, the journal outgrew it, the table was replaced or the
        last write failed (:class:`~tidemq.store.journaled_table.JournaledTable`).

        Raises:
            StoreError: the journal or the file cannot be written (the changes stay pending).
        """
        self.file.write()

    def persist_soon(self) -> None:
        """Persist after a change (:meth:`persist_changes`), queued off the caller's thread when the
        broker set :attr:`persist_later`, else at once."""
        if self.persist_later is None:
            self.persist_changes()
        else:
            self.pending_write = self.persist_later(self.persist_changes)

    def replace_table(self, table: dict[str, TopicConfig], data_version: DataVersion) -> None:
        """Replace every topic config at once (a slave copying its master's table); the next write
        is a whole snapshot."""
        with self._lock:
            self.topic_config_table.clear()
            self.topic_config_table.update(table)
            self.data_version = data_version
            self.file.mark_replaced()
        self.persist_soon()

    def take_unregistered(self) -> dict[str, TopicConfig | None]:
        """The topics changed since the last call (None: deleted), for an incremental registration."""
        with self._lock:
            changed, self.unregistered = self.unregistered, {}
        return changed

    def _changed(self) -> None:
        self.persist_soon()
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.exception("topic change callback failed")

    def build_topic_config_serialize_wrapper(self) -> TopicConfigSerializeWrapper:
        """Topic table + data version, the REGISTER_BROKER body payload."""
        with self._lock:
            return TopicConfigSerializeWrapper(
                topic_config_table=dict(self.topic_config_table), data_version=self.data_version
            )

    # -- queries ------------------------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        """The config of ``topic``, or None (a slave also asks :attr:`fallback`)."""
        tc = self.topic_config_table.get(topic)
        if tc is None and self.fallback is not None:
            return self.fallback(topic)
        return tc

    def is_order_topic(self, topic: str) -> bool:
        tc = self.topic_config_table.get(topic)
        return bool(tc is not None and tc.order)

    def topics(self) -> list[str]:
        """Every topic name, sorted."""
        with self._lock:
            return sorted(self.topic_config_table)

    # -- creation / update ----------------------------------------------------------------------

    def create_topic_in_send_message_method(
        self,
        topic: str,
        default_topic: str,
        remote_addr: str,
        client_default_topic_queue_nums: int,
        topic_sys_flag: int,
    ) -> TopicConfig | None:
        """Auto-create ``topic`` on first send from the template ``default_topic`` (normally TBW102).

        Mirrors ``TopicConfigManager.createTopicInSendMessageMethod``: only if the template exists
        and has PERM_INHERIT; queues = min(client's ``defaultTopicQueueNums``, template write
        queues); perm = template perm without INHERIT. Returns the (new or existing) config, or None.
        """
        created = False
        with self._lock:
            tc = self.topic_config_table.get(topic)
            if tc is not None:
                return tc
            template = self.topic_config_table.get(default_topic)
            if template is None:
                log.warning(
                    "create new topic %s failed: default topic %s does not exist", topic, default_topic
                )
                return None
            perm = template.perm
            if default_topic == AUTO_CREATE_TOPIC_KEY and not self.broker_config.auto_create_topic_enable:
                perm = PermName.PERM_READ | PermName.PERM_WRITE
            if not perm & PermName.PERM_INHERIT:
                log.warning(
                    "create new topic %s failed: default topic %s has no inherit perm (%d), producer %s",
                    topic,
                    default_topic,
                    perm,
                    remote_addr,
                )
                return None
            queue_nums = max(0, min(client_default_topic_queue_nums, template.write_queue_nums))
            tc = make_topic_config(
                topic,
                queue_nums,
                perm & ~PermName.PERM_INHERIT,
                topic_filter_type=template.topic_filter_type,
                topic_sys_flag=topic_sys_flag,
            )
            log.info("create new topic by default topic %s: %s, producer %s", default_topic, tc, remote_addr)
            self.topic_config_table[topic] = tc
            self._next_version(topic)
            created = True
        if created:
            self._changed()
        return tc

    def create_topic_in_send_message_back_method(
        self, topic: str, client_default_topic_queue_nums: int, perm: int, topic_sys_flag: int
    ) -> TopicConfig:
        """Create ``topic`` (retry / DLQ topics) with the given queues and perm if it is missing.

        Mirrors ``createTopicInSendMessageBackMethod``. Returns the (new or existing) config.
        """
        with self._lock:
            tc = self.topic_config_table.get(topic)
            if tc is not None:
                return tc
            tc = make_topic_config(
                topic, client_default_topic_queue_nums, perm, topic_sys_flag=topic_sys_flag
            )
            self.topic_config_table[topic] = tc
            self._next_version(topic)
        log.info("create topic %s with %d queues, perm %d", topic, client_default_topic_queue_nums, perm)
        self._changed()
        return tc

    def update_topic_config(self, tc: TopicConfig) -> None:
        """Create or replace ``tc`` (UPDATE_AND_CREATE_TOPIC). Mirrors ``updateTopicConfig``."""
        with self._lock:
            old = self.topic_config_table.get(tc.topic_name)
            self.topic_config_table[tc.topic_name] = tc
            self._next_version(tc.topic_name)
        log.info("%s topic config %s (was %s)", "update" if old else "create", tc, old)
        self._changed()

    def update_topic_config_list(self, configs: list[TopicConfig]) -> list[str]:
        """Create or replace several topics with one data-version bump, one persist and one
        re-registration (UPDATE_AND_CREATE_TOPIC_LIST, 18; RocketMQ 5's ``updateTopicConfigList``).
        Configs equal to the current ones are left alone.

        Returns:
            The names of the topics created or changed.
        """
        with self._lock:
            changed = [tc for tc in configs if self.topic_config_table.get(tc.topic_name) != tc]
            if not changed:
                return []
            for tc in changed:
                self.topic_config_table[tc.topic_name] = tc
            self._next_version(*(tc.topic_name for tc in changed))
        log.info("create or update %d topic configs: %s", len(changed), _names(changed))
        self._changed()
        return [tc.topic_name for tc in changed]

    def delete_topic_config(self, topic: str) -> bool:
        """Remove ``topic``; returns False if it did not exist. Mirrors ``deleteTopicConfig``."""
        with self._lock:
            old = self.topic_config_table.pop(topic, None)
            if old is None:
                return False
            self._next_version(topic)
        log.info("delete topic config %s", old)
        self._changed()
        return True


def _names(configs: list[TopicConfig], limit: int = 10) -> str:
    names = [tc.topic_name for tc in configs[:limit]]
    more = len(configs) - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")
