"""RouteInfoManager: the name server's routing tables (pure state; the clock is passed in).

Mirrors RocketMQ 4.9's ``RouteInfoManager``. Tables (all keyed by strings)::

    topic_queue_table    topic       -> {broker_name -> QueueData}
    broker_addr_table    broker_name -> BrokerData (cluster, {broker_id -> "ip:port"})
    cluster_addr_table   cluster     -> {broker_name}
    broker_live_table    broker_addr -> BrokerLiveInfo (last REGISTER_BROKER, data version, channel)
    filter_server_table  broker_addr -> [filter server addr]

Invariants: a broker name is in ``cluster_addr_table`` iff it has at least one address in
``broker_addr_table``; removing a broker name's last address drops its QueueData everywhere and
a topic left without QueueData disappears. Only a master (broker id 0) registers topics, and
only on its first registration or when its ``DataVersion`` changed. Like 4.9, topics a broker
no longer reports are *not* removed (DELETE_TOPIC_IN_NAMESRV does that).

Not thread-safe by design: the NameServer touches it only from its event loop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tidemq.protocol.body import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from tidemq.protocol.topic import MASTER_ID, PermName

log = logging.getLogger(__name__)

BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000
"""Default silence (ms) after which a broker is dropped (``BROKER_CHANNEL_EXPIRED_TIME``)."""


@dataclass(slots=True)
class BrokerLiveInfo:
    """Liveness of one broker address. Mirrors ``BrokerLiveInfo``.

    Attributes:
        last_update_timestamp: ms of its last REGISTER_BROKER.
        data_version: the topic-table version it last reported.
        channel: the connection it registered over (any object; compared by identity).
        ha_server_addr: its HA address (``ip:port``).
    """

    last_update_timestamp: int
    data_version: DataVersion
    channel: object | None
    ha_server_addr: str


@dataclass(slots=True)
class RegisterBrokerResult:
    """What REGISTER_BROKER answers: the master's HA and broker addresses (slaves only)."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


class RouteInfoManager:
    """Routing state of a name server. Mirrors ``RouteInfoManager`` (method names in snake_case).

    Example::

        rim = RouteInfoManager()
        rim.register_broker("DefaultCluster", "10.0.0.5:10911", "broker-a", 0, "10.0.0.5:10912",
                            wrapper, [], channel=None, now=now_ms)
        route = rim.pick_topic_route_data("TopicA")   # TopicRouteData | None
    """

    def __init__(self, broker_channel_expired_time_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS) -> None:
        self.broker_channel_expired_time_ms = broker_channel_expired_time_ms
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ registration

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        filter_server_list: list[str] | None,
        channel: object | None,
        now: int,
    ) -> RegisterBrokerResult:
        """Record a REGISTER_BROKER (103). Mirrors ``RouteInfoManager.registerBroker``.

        Args:
            cluster_name, broker_addr, broker_name, broker_id, ha_server_addr: from the header.
            topic_config_wrapper: the broker's topic table and data version (None = empty).
            filter_server_list: filter servers (None = unchanged, [] = none).
            channel: the connection it came over (so its close removes the broker at once).
            now: current time in ms.

        Returns:
            For a slave whose master is alive: the master's HA and broker addresses.
        """
        wrapper = topic_config_wrapper or TopicConfigSerializeWrapper(data_version=DataVersion(0, 0))
        addrs, register_first = self._put_broker_addr(cluster_name, broker_name, broker_id, broker_addr)
        if broker_id == MASTER_ID and (
            register_first or self.is_broker_topic_config_changed(broker_addr, wrapper.data_version)
        ):
            for topic_config in wrapper.topic_config_table.values():
                self._create_and_update_queue_data(broker_name, topic_config)
        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            now, wrapper.data_version, channel, ha_server_addr
        )
        if previous is None:
            log.info(
                "new broker registered: %s %s (id %d) HA %s",
                broker_name,
                broker_addr,
                broker_id,
                ha_server_addr,
            )
        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[broker_addr] = list(filter_server_list)
            else:
                self.filter_server_table.pop(broker_addr, None)
        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            live = self.broker_live_table.get(master_addr) if master_addr else None
            if master_addr is not None and live is not None:
                return RegisterBrokerResult(live.ha_server_addr, master_addr)
        return RegisterBrokerResult()

    def _put_broker_addr(
        self, cluster_name: str, broker_name: str, broker_id: int, broker_addr: str
    ) -> tuple[dict[int, str], bool]:
        """Record ``broker_addr`` as ``broker_id`` of ``broker_name`` in ``cluster_name`` (an address
        that had another id loses it: a slave promoted to master, or the reverse).

        Returns:
            The broker name's ``{broker_id: addr}`` and whether this is the first registration of the
            name or of the id (a master then registers its topics whatever its data version).
        """
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster_name, broker_name, {})
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.broker_addrs
        for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[other_id]
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        return addrs, register_first or old_addr is None

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        """True unless ``broker_addr`` last reported exactly ``data_version``."""
        prev = self.query_broker_topic_config(broker_addr)
        return prev is None or prev != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        """The data version ``broker_addr`` last reported, or None."""
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live is not None else None

    def update_broker_info_update_timestamp(self, broker_addr: str, now: int) -> None:
        """Refresh the liveness of ``broker_addr`` (QUERY_DATA_VERSION when unchanged)."""
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_timestamp = now

    def _create_and_update_queue_data(self, broker_name: str, topic_config: TopicConfig) -> None:
        queue_data = QueueData(
            broker_name=broker_name,
            read_queue_nums=topic_config.read_queue_nums,
            write_queue_nums=topic_config.write_queue_nums,
            perm=topic_config.perm,
            topic_sys_flag=topic_config.topic_sys_flag,
        )
        table = self.topic_queue_table.setdefault(topic_config.topic_name, {})
        old = table.get(broker_name)
        table[broker_name] = queue_data
        if old is None:
            log.info("new topic registered: %s on %s", topic_config.topic_name, broker_name)
        elif old != queue_data:
            log.info(
                "topic changed: %s on %s: %s -> %s", topic_config.topic_name, broker_name, old, queue_data
            )

    def unregister_broker(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """Handle UNREGISTER_BROKER (104). Mirrors ``RouteInfoManager.unregisterBroker``."""
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            return
        broker_data.broker_addrs.pop(broker_id, None)
        if broker_data.broker_addrs:
            return
        del self.broker_addr_table[broker_name]
        names = self.cluster_addr_table.get(cluster_name)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster_name]
        self._remove_topic_by_broker_name(broker_name)
        log.info("broker %s (%s) unregistered; its topics were removed", broker_name, broker_addr)

    def _remove_topic_by_broker_name(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            table = self.topic_queue_table[topic]
            table.pop(broker_name, None)
            if not table:
                del self.topic_queue_table[topic]

    # ------------------------------------------------------------------ liveness

    def scan_not_active_broker(self, now: int) -> list[tuple[str, BrokerLiveInfo]]:
        """Drop brokers whose last registration is older than the expiry. Mirrors ``scanNotActiveBroker``.

        Args:
            now: current time in ms.

        Returns:
            ``(broker_addr, live_info)`` of each dropped broker, so the caller can close
            ``live_info.channel``.
        """
        expired = [
            (addr, live)
            for addr, live in self.broker_live_table.items()
            if live.last_update_timestamp + self.broker_channel_expired_time_ms < now
        ]
        for addr, live in expired:
            log.warning(
                "broker %s expired: no registration for %d ms", addr, now - live.last_update_timestamp
            )
            self.broker_live_table.pop(addr, None)
            self.on_channel_destroy(addr, live.channel)
        return expired

    def on_channel_destroy(self, remote_addr: str, channel: object | None = None) -> str | None:
        """Forget the broker behind a closed connection. Mirrors ``onChannelDestroy``.

        The broker is found by ``channel`` identity in the live table, else ``remote_addr`` is
        taken as its broker address. Its address is removed from its BrokerData; if that was
        the group's last address the broker name leaves its cluster and its QueueData go.

        Returns:
            The broker address removed, or None when the connection was not a broker's.
        """
        found: str | None = None
        if channel is not None:
            found = next((a for a, live in self.broker_live_table.items() if live.channel is channel), None)
        if found is None:
            found = remote_addr
        if not found:
            return None
        self.broker_live_table.pop(found, None)
        self.filter_server_table.pop(found, None)
        broker_name: str | None = None
        for name, broker_data in self.broker_addr_table.items():
            ids = [i for i, a in broker_data.broker_addrs.items() if a == found]
            if ids:
                broker_name = name
                for i in ids:
                    del broker_data.broker_addrs[i]
                break
        if broker_name is None:
            return None
        log.info("broker %s (%s) gone: connection closed or expired", broker_name, found)
        if not self.broker_addr_table[broker_name].broker_addrs:
            del self.broker_addr_table[broker_name]
            for cluster in list(self.cluster_addr_table):
                names = self.cluster_addr_table[cluster]
                if broker_name in names:
                    names.discard(broker_name)
                    if not names:
                        del self.cluster_addr_table[cluster]
                    break
            self._remove_topic_by_broker_name(broker_name)
        return found

    # ------------------------------------------------------------------ queries

    def pick_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``, or None if it has no QueueData or no live BrokerData.

        Mirrors ``pickupTopicRouteData``. Lists are sorted by broker name; the returned
        objects are copies (safe to mutate / encode later).
        """
        table = self.topic_queue_table.get(topic)
        if not table:
            return None
        queue_datas = [
            QueueData(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
            for _, q in sorted(table.items())
        ]
        broker_datas: list[BrokerData] = []
        filter_servers: dict[str, list[str]] = {}
        for name in sorted(table):
            bd = self.broker_addr_table.get(name)
            if bd is None:
                continue
            broker_datas.append(BrokerData(bd.cluster, bd.broker_name, dict(sorted(bd.broker_addrs.items()))))
            for addr in bd.broker_addrs.values():
                servers = self.filter_server_table.get(addr)
                if servers is not None:
                    filter_servers[addr] = list(servers)
        if not broker_datas:
            return None
        return TopicRouteData(queue_datas, broker_datas, filter_servers)

    def get_all_cluster_info(self) -> ClusterInfo:
        """Every broker group and cluster (GET_BROKER_CLUSTER_INFO). Mirrors ``getAllClusterInfo``."""
        return ClusterInfo(
            {
                name: BrokerData(bd.cluster, bd.broker_name, dict(sorted(bd.broker_addrs.items())))
                for name, bd in sorted(self.broker_addr_table.items())
            },
            {cluster: set(names) for cluster, names in self.cluster_addr_table.items()},
        )

    def get_all_topic_list(self) -> TopicList:
        """Every topic with a route (GET_ALL_TOPIC_LIST_FROM_NAMESERVER)."""
        return TopicList(set(self.topic_queue_table))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        """Topics served by any broker of ``cluster`` (GET_TOPICS_BY_CLUSTER); empty if unknown."""
        names = self.cluster_addr_table.get(cluster, set())
        return TopicList({t for t, table in self.topic_queue_table.items() if names & table.keys()})

    def get_system_topic_list(self) -> TopicList:
        """Cluster and broker names (their system topics) plus one broker address. Mirrors ``getSystemTopicList``."""
        topics: set[str] = set()
        for cluster, names in self.cluster_addr_table.items():
            topics.add(cluster)
            topics.update(names)
        broker_addr = next(
            (
                next(iter(bd.broker_addrs.values()))
                for bd in self.broker_addr_table.values()
                if bd.broker_addrs
            ),
            None,
        )
        return TopicList(topics, broker_addr)

    # ------------------------------------------------------------------ admin

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """Remove ``topic``'s routes (DELETE_TOPIC_IN_NAMESRV), on every broker or only ``cluster_name``'s."""
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
            return
        table = self.topic_queue_table.get(topic)
        if table is None:
            return
        for name in self.cluster_addr_table.get(cluster_name, set()):
            table.pop(name, None)
        if not table:
            del self.topic_queue_table[topic]

    def wipe_write_perm_of_broker_by_lock(self, broker_name: str) -> int:
        """Clear the write bit of every QueueData of ``broker_name`` (WIPE_WRITE_PERM_OF_BROKER).

        Returns:
            The number of topics touched.
        """
        count = 0
        for table in self.topic_queue_table.values():
            qd = table.get(broker_name)
            if qd is not None:
                qd.perm &= ~PermName.PERM_WRITE
                count += 1
        return count

    def add_write_perm_of_broker_by_lock(self, broker_name: str) -> int:
        """Set every QueueData of ``broker_name`` back to read+write; returns topics touched."""
        count = 0
        for table in self.topic_queue_table.values():
            qd = table.get(broker_name)
            if qd is not None:
                qd.perm = PermName.PERM_READ | PermName.PERM_WRITE
                count += 1
        return count
