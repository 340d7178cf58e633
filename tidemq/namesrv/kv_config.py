"""KVConfigManager: the name server's namespaced key/value store.

Mirrors RocketMQ's ``KVConfigManager`` (PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE).
Persisted, when a path is configured, as RocketMQ's ``kvConfig.json``::

    {"configTable": {"ORDER_TOPIC_CONFIG": {"TopicA": "broker-a:4;broker-b:4"}}}
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tidemq.store.config_file import atomic_write_json, load_json

log = logging.getLogger(__name__)

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
"""KV namespace of ordered-topic configs (RocketMQ's ``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``)."""


class KVConfigManager:
    """Namespaced string key/value table. Mirrors ``KVConfigManager``.

    Args:
        path: ``kvConfig.json`` to load at :meth:`load` and rewrite after each change;
            ``None`` keeps everything in memory.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.config_table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read the file (if configured and present).

        Raises:
            StoreError: the file (and its ``.bak``) cannot be parsed.
        """
        if self.path is None:
            return
        obj = load_json(self.path)
        if obj is None:
            return
        table = obj.get("configTable") if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            log.warning("%s has no configTable object; ignoring it", self.path)
            return
        for namespace, entries in table.items():
            if isinstance(entries, dict):
                self.config_table[str(namespace)] = {str(k): str(v) for k, v in entries.items()}
        log.info("loaded KV config from %s (%d namespaces)", self.path, len(self.config_table))

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """Set ``namespace``/``key`` to ``value`` and persist."""
        self.config_table.setdefault(namespace, {})[key] = value
        self.persist()

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        """The value of ``namespace``/``key``, or None."""
        return self.config_table.get(namespace, {}).get(key)

    def delete_kv_config(self, namespace: str, key: str) -> None:
        """Remove ``namespace``/``key`` (no error if absent) and persist."""
        table = self.config_table.get(namespace)
        if table is not None and table.pop(key, None) is not None:
            self.persist()

    def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of every key/value in ``namespace``, or None when the namespace is unknown."""
        table = self.config_table.get(namespace)
        return dict(table) if table is not None else None

    def persist(self) -> None:
        """Write the table to the configured file (atomically); no-op without a path."""
        if self.path is None:
            return
        atomic_write_json(self.path, {"configTable": self.config_table})
