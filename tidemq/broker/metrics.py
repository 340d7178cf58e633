"""Prometheus metrics of a broker (``tidemq serve --metrics-port PORT``), through ``prometheus_client``.

Metric names are rocketmq-exporter's where one exists, so its Grafana dashboards and alert rules
work unchanged (labels ``cluster``, ``broker``, ``topic``, ``group`` as the exporter sets them):

=========================================  ======  ===========================================
metric                                     type    value
=========================================  ======  ===========================================
rocketmq_broker_tps                        gauge   messages stored per second (last minute, as every TPS)
rocketmq_broker_qps                        gauge   messages handed to consumers per second
rocketmq_producer_tps                      gauge   per topic, messages stored per second
rocketmq_producer_message_size             gauge   per topic, bytes stored per second
rocketmq_producer_offset                   gauge   per topic, sum of the queues' max offsets
rocketmq_consumer_tps                      gauge   per topic and group, messages pulled per second
rocketmq_consumer_message_size             gauge   per topic and group, bytes pulled per second
rocketmq_consumer_offset                   gauge   per topic and group, sum of committed offsets
rocketmq_group_diff                        gauge   per topic and group, messages not yet consumed
rocketmq_message_accumulation              gauge   same as rocketmq_group_diff (the exporter's sum)
rocketmq_group_get_latency_by_storetime    gauge   ms since the oldest unconsumed message was stored
rocketmq_brokeruntime_*, _retrydiff, ...   gauge   the rest of the exporter's series: metrics_exporter.py
tidemq_messages_put_total                  counter per topic, messages stored
tidemq_message_bytes_put_total             counter per topic, bytes stored
tidemq_messages_get_total                  counter per topic and group, messages pulled
tidemq_unconsumed_messages_deleted_total   counter messages retention deleted before a group had them
=========================================  ======  ===========================================

plus the standard ``process_*`` (CPU, memory, open fds), ``python_gc_*`` and ``python_info``.

Values are read at scrape time: the collector runs in the HTTP server's thread and takes one
snapshot on the broker's event loop (so it never reads a table while the loop changes it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from tidemq.broker.metrics_exporter import (
    ExporterSnapshot,
    client_status,
    exporter_families,
    exporter_snapshot,
    gauge_family,
)
from tidemq.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    MINUTE,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
)
from tidemq.protocol.topic import is_internal_topic

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

__all__ = ["BrokerCollector", "MetricsServer", "take_snapshot"]

log = logging.getLogger(__name__)

SNAPSHOT_TIMEOUT = 5.0
"""Seconds a scrape waits for the broker loop to take its snapshot."""


@dataclass
class _GroupRow:
    topic: str
    group: str
    consumer_offset: int = 0
    diff: int = 0
    latency_ms: int = 0
    online: int = 0
    model: str = "CLUSTERING"


@dataclass
class _Snapshot:
    cluster: str
    broker: str
    broker_tps: float = 0.0
    broker_qps: float = 0.0
    put_total: int = 0
    get_total: int = 0
    topics: dict[str, tuple[float, float, int, int, int]] = field(default_factory=dict)
    consumers: dict[tuple[str, str], tuple[float, float, int]] = field(default_factory=dict)
    groups: list[_GroupRow] = field(default_factory=list)
    pop: list[tuple[str, str, int, int, int, int, int]] = field(default_factory=list)
    exporter: ExporterSnapshot | None = None
    transactions: dict[str, Any] = field(default_factory=dict)


def take_snapshot(broker: Broker) -> _Snapshot:
    """Every figure the metrics need, read on the broker's loop thread."""
    stats = broker.broker_stats
    now = time.monotonic()
    snap = _Snapshot(cluster=broker.config.broker_cluster_name, broker=broker.config.broker_name)
    put = stats.get(BROKER_PUT_NUMS, stats.cluster_name)
    get = stats.get(BROKER_GET_NUMS, stats.cluster_name)
    snap.broker_tps = put.snapshot(MINUTE, now).tps if put else 0.0
    snap.broker_qps = get.snapshot(MINUTE, now).tps if get else 0.0
    snap.put_total, snap.get_total = stats.put_total, stats.get_total
    _read_topics(broker, snap, now)
    for key, item in list(stats.tables[GROUP_GET_NUMS].items()):
        size_item = stats.get(GROUP_GET_SIZE, key)
        snap.consumers[tuple(key.split("@", 1))] = (  # type: ignore[index]
            item.snapshot(MINUTE, now).tps,
            size_item.snapshot(MINUTE, now).tps if size_item else 0.0,
            item.value,
        )
    snap.groups = _group_rows(broker)
    from tidemq.broker.pop.service import pop_metric_rows

    snap.pop = pop_metric_rows(broker)  # POP groups (docs/rocketmq5.md)
    snap.exporter = exporter_snapshot(broker)
    from tidemq.broker.transaction.visibility import pending_rows

    snap.transactions = pending_rows(broker)  # pending half messages (docs/transactions.md)
    return snap


def _read_topics(broker: Broker, snap: _Snapshot, now: float) -> None:
    """``snap.topics``: per topic (internal ones only once they have puts), the 1-minute put rate and
    bytes a second, the sum of its queues' max offsets, messages and bytes stored."""
    stats = broker.broker_stats
    store = broker.store
    for topic, tc in list(broker.topic_config_manager.topic_config_table.items()):
        nums = stats.get(TOPIC_PUT_NUMS, topic)
        size = stats.get(TOPIC_PUT_SIZE, topic)
        if nums is None and is_internal_topic(topic, frozenset((snap.cluster, snap.broker))):
            continue
        offset = sum(max(store.get_max_offset_in_queue(topic, q), 0) for q in range(tc.write_queue_nums))
        snap.topics[topic] = (
            nums.snapshot(MINUTE, now).tps if nums else 0.0,
            size.snapshot(MINUTE, now).tps if size else 0.0,
            offset,
            nums.value if nums else 0,
            size.value if size else 0,
        )


def _group_rows(broker: Broker) -> list[_GroupRow]:
    """One row per (topic, group) with committed offsets: their sum, the lag, the age (ms) of the
    oldest unconsumed message, members online and message model."""
    store = broker.store
    tcm = broker.topic_config_manager
    now_ms = time.time_ns() // 1_000_000
    com = broker.consumer_offset_manager
    rows = []
    for key in sorted(com.offset_table):
        topic, _, group = key.partition("@")
        if tcm.select_topic_config(topic) is None or not group:
            continue
        row = _GroupRow(topic, group)
        oldest = 0
        for qid, committed in com.query_offset_table(group, topic).items():
            max_off = max(store.get_max_offset_in_queue(topic, qid), 0)
            row.consumer_offset += committed
            lag = max(max_off - committed, 0)
            row.diff += lag
            if lag > 0:
                ts = store.lookup.get_message_store_timestamp(topic, qid, committed)
                if ts > 0 and (oldest == 0 or ts < oldest):
                    oldest = ts
        row.latency_ms = max(now_ms - oldest, 0) if oldest else 0
        info = broker.consumer_manager.get_consumer_group_info(group)
        if info is not None:
            row.online = len(info.channel_info_table)
            row.model = str(getattr(info.message_model, "value", info.message_model) or "CLUSTERING")
        rows.append(row)
    return rows


class BrokerCollector:
    """A ``prometheus_client`` collector reading one broker at scrape time.

    Args:
        broker: the started broker (its ``loop`` is used for the snapshot).
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def _snapshot(self) -> _Snapshot:
        loop = self.broker.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return take_snapshot(self.broker)

        async def snap() -> _Snapshot:
            s = take_snapshot(self.broker)
            if s.exporter is not None:  # the consumers' own figures (rocketmq_client_*)
                s.exporter.clients = await client_status(self.broker)
            return s

        return asyncio.run_coroutine_threadsafe(snap(), loop).result(SNAPSHOT_TIMEOUT)

    def collect(self) -> Iterator[Metric]:
        """Yield every metric family (called by ``prometheus_client`` on each scrape)."""
        if self.broker.loop is None or not self.broker.started:
            return
        s = self._snapshot()
        cb = [s.cluster, s.broker]
        yield from _broker_families(s, cb, self.broker.store.retention.unconsumed_deleted)
        yield from _topic_families(s, cb)
        yield from _consumer_families(s, cb)
        pl = ["cluster", "broker", "group", "topic"]
        for i, (name, doc, make) in enumerate(POP_FAMILIES, start=2):
            yield make(name, doc, pl, [([*cb, r[0], r[1]], r[i]) for r in s.pop])
        yield from _group_diff_families(s)
        if s.exporter is not None:
            yield from exporter_families(s.exporter)
        if s.transactions:
            from tidemq.broker.transaction.visibility import metric_families

            yield from metric_families(s.cluster, s.broker, s.transactions)


def _broker_families(s: _Snapshot, cb: list[str], unconsumed_deleted: int) -> Iterator[Metric]:
    """The broker's put and pull rates and what forced retention deleted unconsumed."""
    yield gauge_family(
        "rocketmq_broker_tps",
        "BrokerPutNums: messages stored per second",
        ["cluster", "broker"],
        [(cb, s.broker_tps)],
    )
    yield gauge_family(
        "rocketmq_broker_qps",
        "BrokerGetNums: messages pulled per second",
        ["cluster", "broker"],
        [(cb, s.broker_qps)],
    )
    yield _counter(  # forced retention only (tidemq/store/retention.py); 0 unless opted in
        "tidemq_unconsumed_messages_deleted",
        "Messages retention deleted before some consumer group had consumed them",
        ["cluster", "broker"],
        [(cb, unconsumed_deleted)],
    )


def _topic_families(s: _Snapshot, cb: list[str]) -> Iterator[Metric]:
    """Per topic: put rate, bytes a second, offset, messages and bytes stored."""
    tl = ["cluster", "broker", "topic"]
    t_rows = sorted(s.topics.items())
    yield gauge_family(
        "rocketmq_producer_tps", "TopicPutNums per second", tl, [([*cb, t], v[0]) for t, v in t_rows]
    )
    yield gauge_family(
        "rocketmq_producer_message_size",
        "TopicPutMessageSize per second (bytes)",
        tl,
        [([*cb, t], v[1]) for t, v in t_rows],
    )
    yield gauge_family(
        "rocketmq_producer_offset",
        "TopicOffset: sum of the queues' max offsets",
        tl,
        [([*cb, t], v[2]) for t, v in t_rows],
    )
    yield _counter("tidemq_messages_put", "Messages stored", tl, [([*cb, t], v[3]) for t, v in t_rows])
    yield _counter(
        "tidemq_message_bytes_put", "Message bytes stored", tl, [([*cb, t], v[4]) for t, v in t_rows]
    )


def _consumer_families(s: _Snapshot, cb: list[str]) -> Iterator[Metric]:
    """Per topic and group: pull rate, bytes a second, messages pulled, committed offset, latency."""
    gl = ["cluster", "broker", "topic", "group"]
    c_rows = sorted(s.consumers.items())
    yield gauge_family(
        "rocketmq_consumer_tps",
        "GroupGetNums per second",
        gl,
        [([*cb, t, g], v[0]) for (t, g), v in c_rows],
    )
    yield gauge_family(
        "rocketmq_consumer_message_size",
        "GroupGetMessageSize per second (bytes)",
        gl,
        [([*cb, t, g], v[1]) for (t, g), v in c_rows],
    )
    yield _counter(
        "tidemq_messages_get",
        "Messages pulled by consumers",
        gl,
        [([*cb, t, g], v[2]) for (t, g), v in c_rows],
    )
    yield gauge_family(
        "rocketmq_consumer_offset",
        "GroupOffset: sum of committed offsets",
        gl,
        [([*cb, r.topic, r.group], r.consumer_offset) for r in s.groups],
    )
    yield gauge_family(
        "rocketmq_group_get_latency_by_storetime",
        "ms since the oldest unconsumed message was stored",
        gl,
        [([*cb, r.topic, r.group], r.latency_ms) for r in s.groups],
    )


def _group_diff_families(s: _Snapshot) -> Iterator[Metric]:
    """rocketmq-exporter's lag series (labelled by group and topic, no cluster or broker)."""
    dl = ["group", "topic", "countOfOnlineConsumers", "msgModel"]
    yield gauge_family(
        "rocketmq_group_diff",
        "GroupDiff: messages not yet consumed",
        dl,
        [([r.group, r.topic, str(r.online), r.model], r.diff) for r in s.groups],
    )
    yield gauge_family(
        "rocketmq_message_accumulation",
        "Messages not yet consumed (sum over queues)",
        ["group", "topic"],
        [([r.group, r.topic], r.diff) for r in s.groups],
    )


def _pop_families() -> list[tuple[str, str, Any]]:
    return [
        ("tidemq_pop_inflight_messages", "POP: popped messages not acked yet and not revived", gauge_family),
        ("tidemq_pop_messages", "POP: messages handed out by pops (redeliveries included)", _counter),
        ("tidemq_pop_acks", "POP: acks received", _counter),
        ("tidemq_pop_redeliveries", "POP: messages visible again after their invisible time", _counter),
        ("tidemq_pop_dead_letters", "POP: messages moved to %DLQ% after retryMaxTimes", _counter),
    ]


def _counter(
    name: str, doc: str, labels: list[str], rows: list[tuple[list[str], float]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    for values, value in rows:
        family.add_metric(values, float(value))
    return family


class MetricsServer:
    """``/metrics`` over HTTP for one broker, on ``prometheus_client``'s threaded server.

    Args:
        broker: the broker to expose (started before the first scrape).
        host: interface to listen on.
        port: TCP port (0 = a free port; the real one is :attr:`port` after :meth:`start`).

    Raises (from :meth:`start`):
        OSError: the port cannot be bound.
    """

    def __init__(self, broker: Broker, host: str = "0.0.0.0", port: int = 0) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.registry = CollectorRegistry()
        self.registry.register(BrokerCollector(broker))  # type: ignore[arg-type]
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._server: Any = None
        self._thread: Any = None

    def start(self) -> int:
        """Start serving; returns the bound port."""
        self._server, self._thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        self.port = int(self._server.server_port)
        log.info("metrics at http://%s:%d/metrics", self.host, self.port)
        return self.port

    def stop(self) -> None:
        """Stop the HTTP server. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None


POP_FAMILIES = _pop_families()
