"""The broker's consumer-group configs. Mirrors RocketMQ's ``SubscriptionGroupManager``.

File ``<store>/config/subscriptionGroup.json``::

    {"dataVersion": {...}, "subscriptionGroupTable": {"G": {"brokerId": 0, "consumeBroadcastEnable": true,
      "consumeEnable": true, "consumeFromMinEnable": true, "groupName": "G",
      "notifyConsumerIdsChangedEnable": true, "retryMaxTimes": 16, "retryQueueNums": 1,
      "whichBrokerWhenConsumeSlowly": 1}}}

``find_subscription_group_config(group)`` auto-creates a default config when
``auto_create_subscription_group`` is on (RocketMQ's default), as heartbeats and pulls expect.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from tidemq.broker.config import BrokerConfig
from tidemq.broker.config_persist import PersistedConfig
from tidemq.broker.names import is_valid_group
from tidemq.broker.topic_config import now_ms
from tidemq.errors import StoreError
from tidemq.protocol.body import DataVersion, SubscriptionGroupConfig
from tidemq.protocol.topic import BROKER_BUILTIN_GROUPS
from tidemq.store.config_file import load_json

log = logging.getLogger(__name__)


class SubscriptionGroupManager(PersistedConfig):
    """Consumer-group configs of this broker. Mirrors ``SubscriptionGroupManager``.

    Args:
        broker_config: for ``auto_create_subscription_group``.
        path: the ``subscriptionGroup.json`` path.
    """

    def __init__(self, broker_config: BrokerConfig, path: str | Path) -> None:
        super().__init__()
        self.broker_config = broker_config
        self.path = Path(path)
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion(timestamp=now_ms(), counter=0)
        self._lock = threading.RLock()
        for group in BROKER_BUILTIN_GROUPS:
            cfg = SubscriptionGroupConfig(group_name=group)
            if group == "TOOLS_CONSUMER" or group.startswith("CID_ONS"):
                cfg.consume_broadcast_enable = True
            self.subscription_group_table[group] = cfg

    def load(self) -> None:
        """Read the file (or its ``.bak``).

        Raises:
            StoreError: both copies are corrupt or the content has the wrong shape.
        """
        obj = load_json(self.path)
        if obj is None:
            return
        if not isinstance(obj, dict) or not isinstance(obj.get("subscriptionGroupTable", {}), dict):
            raise StoreError(f"{self.path}: not a subscriptionGroup.json object")
        try:
            with self._lock:
                for name, cfg in obj.get("subscriptionGroupTable", {}).items():
                    self.subscription_group_table[str(name)] = SubscriptionGroupConfig.from_json(cfg)
                if isinstance(obj.get("dataVersion"), dict):
                    self.data_version = DataVersion.from_json(obj["dataVersion"])
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"{self.path}: malformed subscription group config ({exc})") from exc

    def encode(self) -> dict[str, Any]:
        """The JSON object written to disk."""
        with self._lock:
            return {
                "dataVersion": self.data_version.to_json(),
                "subscriptionGroupTable": {
                    name: cfg.to_json() for name, cfg in sorted(self.subscription_group_table.items())
                },
            }

    def replace_all(self, groups: dict[str, SubscriptionGroupConfig], version: DataVersion) -> None:
        """Make ``groups`` (by group name) the whole table at ``version``: a slave taking its
        master's configs (``SlaveSynchronize.syncSubscriptionGroupConfig``). Follow with a persist."""
        with self._lock:
            self.subscription_group_table.clear()
            self.subscription_group_table.update(groups)
            self.data_version = version

    def _next_version(self) -> None:
        self.data_version = DataVersion(timestamp=now_ms(), counter=self.data_version.counter + 1)

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The config of ``group``; created with defaults when missing and auto-create is on.

        Mirrors ``findSubscriptionGroupConfig``. Returns None when missing and auto-create is off.
        """
        cfg = self.subscription_group_table.get(group)
        if cfg is not None:
            return cfg
        if not self.broker_config.auto_create_subscription_group:
            return None
        if not is_valid_group(group):  # never create state from a bad name (tidemq.broker.names)
            return None
        with self._lock:
            cfg = self.subscription_group_table.get(group)
            if cfg is not None:
                return cfg
            cfg = SubscriptionGroupConfig(group_name=group)
            self.subscription_group_table[group] = cfg
            self._next_version()
        log.info("auto create subscription group %s", group)
        self.persist_soon()
        return cfg

    def update_subscription_group_config(self, cfg: SubscriptionGroupConfig) -> None:
        """Create or replace a group config (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)."""
        with self._lock:
            self.subscription_group_table[cfg.group_name] = cfg
            self._next_version()
        self.persist_soon()

    def delete_subscription_group_config(self, group: str) -> bool:
        """Remove a group config; False if it did not exist."""
        with self._lock:
            if self.subscription_group_table.pop(group, None) is None:
                return False
            self._next_version()
        self.persist_soon()
        return True

    def contains(self, group: str) -> bool:
        return group in self.subscription_group_table
