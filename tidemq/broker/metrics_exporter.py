"""The rest of rocketmq-exporter's series (``RMQMetricsCollector``) that a tidemq broker can compute.

:mod:`tidemq.broker.metrics` serves the exporter's topic / group / broker TPS series; this module
adds the ``rocketmq_brokeruntime_*`` gauges (from the same table GET_BROKER_RUNTIME_INFO answers,
so ``brokerStatus`` and ``/metrics`` agree), the retry / dead-letter series, the per-group
consume figures, producer and consumer connection counts and the master's replication lag.
Labels are the exporter's, so its Grafana dashboards work unchanged.

:data:`NOT_EXPORTED` lists every exporter series tidemq does not serve and why (docs/operations.md
prints the same list): nothing is left out silently. TPS figures use one window everywhere: the
last minute (``rocketmq_broker_tps``, ``clusterList``, the dashboard's Cluster and Topics pages).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily, Metric

from tidemq.broker.stats import GROUP_GET_NUMS, MINUTE
from tidemq.protocol.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

__all__ = ["EXPORTED", "NOT_EXPORTED", "ExporterSnapshot", "exporter_families", "exporter_snapshot"]

RUNTIME_LABELS = ["cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"]
"""The exporter's ``BROKER_RUNTIME_METRIC_LABEL_NAMES``."""

RUNTIME_SERIES: dict[str, str] = {
    "msg_put_total_today_now": "msgPutTotalTodayNow",
    "msg_gettotal_today_now": "msgGetTotalTodayNow",
    "msg_puttotal_todaymorning": "msgPutTotalTodayMorning",
    "msg_gettotal_todaymorning": "msgGetTotalTodayMorning",
    "msg_puttotal_yesterdaymorning": "msgPutTotalYesterdayMorning",
    "msg_gettotal_yesterdaymorning": "msgGetTotalYesterdayMorning",
    "put_message_size_total": "putMessageSizeTotal",
    "put_message_average_size": "putMessageAverageSize",
    "putmessage_times_total": "putMessageTimesTotal",
    "commitlog_maxoffset": "commitLogMaxOffset",
    "commitlog_minoffset": "commitLogMinOffset",
    "commitlog_disk_ratio": "commitLogDiskRatio",
    "consumequeue_disk_ratio": "consumeQueueDiskRatio",
    "earliest_message_timestamp": "earliestMessageTimeStamp",
    "dispatch_behind_bytes": "dispatchBehindBytes",
}
"""``rocketmq_brokeruntime_<suffix>`` -> runtime-info key (a number)."""

TPS_SERIES: dict[str, str] = {
    "put_tps": "putTps",
    "gettransfered_tps": "getTransferedTps",
    "gettotal_tps": "getTotalTps",
    "getfound_tps": "getFoundTps",
}
"""``rocketmq_brokeruntime_<prefix>{10,60,600}`` -> runtime-info key (``"tps10 tps60 tps600"``)."""

_THREAD_POOLS = "tidemq's broker runs on one asyncio event loop: there are no send/pull/query thread pools"
NOT_EXPORTED: dict[str, str] = {
    **{
        f"rocketmq_brokeruntime_{name}": _THREAD_POOLS
        for name in [
            "send_threadpool_queue_size",
            "send_threadpoolqueue_capacity",
            "send_threadpoolqueue_headwait_timemills",
            "pull_threadpoolqueue_size",
            "pull_threadpoolqueue_capacity",
            "pull_threadpoolqueue_headwait_timemills",
            "query_threadpoolqueue_size",
            "query_threadpool_queue_capacity",
            "query_threadpoolqueue_headwait_timemills",
        ]
    },
    **{
        f"rocketmq_brokeruntime_pmdt_{b}": "put latencies are not bucketed (no PutMessageDistributeTimeMap)"
        for b in [
            "0ms",
            "0to10ms",
            "10to50ms",
            "50to100ms",
            "100to200ms",
            "200to500ms",
            "500to1s",
            "1to2s",
            "2to3s",
            "3to4s",
            "4to5s",
            "5to10s",
            "10stomore",
        ]
    },
    "rocketmq_brokeruntime_put_latency_99": "put latency percentiles are not measured on the broker",
    "rocketmq_brokeruntime_put_latency_999": "put latency percentiles are not measured on the broker",
    "rocketmq_brokeruntime_putmessage_entire_time_max": "the longest put is not tracked",
    "rocketmq_brokeruntime_getmessage_entire_time_max": "the longest get is not tracked",
    "rocketmq_brokeruntime_pagecache_lock_time_mills": "no page-cache lock timer (puts are serialised on the loop)",
    "rocketmq_brokeruntime_getmiss_tps10": "pulls that find nothing are not counted",
    "rocketmq_brokeruntime_getmiss_tps60": "pulls that find nothing are not counted",
    "rocketmq_brokeruntime_getmiss_tps600": "pulls that find nothing are not counted",
    "rocketmq_brokeruntime_dispatch_maxbuffer": "no dispatch buffer: consume queues are written inside the put",
    "rocketmq_brokeruntime_remain_transientstore_buffer_numbs": "no transient store pool (transientStorePoolEnable)",
    "rocketmq_brokeruntime_start_accept_sendrequest_time": "no startAcceptSendRequestTimeStamp setting",
    "rocketmq_send_back_nums": "SNDBCK_PUT_NUMS is not counted (the retry topic's put counts show it)",
    "rocketmq_group_get_latency": "the exporter's per-queue pull latency is not kept (see get_latency_by_storetime)",
}
"""Exporter series a tidemq broker does not serve, each with the reason."""

CLIENT_SERIES: dict[str, str] = {
    "rocketmq_client_consume_fail_msg_count": "consumeFailedMsgs",
    "rocketmq_client_consume_fail_msg_tps": "consumeFailedTPS",
    "rocketmq_client_consume_ok_msg_tps": "consumeOKTPS",
    "rocketmq_client_consume_rt": "consumeRT",
    "rocketmq_client_consumer_pull_rt": "pullRT",
    "rocketmq_client_consumer_pull_tps": "pullTPS",
}
"""``rocketmq_client_*`` -> the ``ConsumeStatus`` field each online consumer reports."""

EXPORTED = (
    [f"rocketmq_brokeruntime_{s}" for s in RUNTIME_SERIES]
    + [f"rocketmq_brokeruntime_{p}{w}" for p in TPS_SERIES for w in (10, 60, 600)]
    + [
        "rocketmq_brokeruntime_commitlogdir_capacity_total",
        "rocketmq_brokeruntime_commitlogdir_capacity_free",
        "rocketmq_brokeruntime_remain_howmanydata_toflush",
        "rocketmq_broker_commitlog_diff",
        "rocketmq_group_retrydiff",
        "rocketmq_group_dlqdiff",
        "rocketmq_topic_retry_offset",
        "rocketmq_topic_dlq_offset",
        "rocketmq_group_consume_total_offset",
        "rocketmq_group_consume_tps",
        "rocketmq_group_count",
        "rocketmq_producer_count",
    ]
    + list(CLIENT_SERIES)
)
"""The series this module serves."""


@dataclass
class ExporterSnapshot:
    """Figures read on the broker's loop for one scrape."""

    cluster: str
    broker: str
    addr: str
    runtime: dict[str, str] = field(default_factory=dict)
    disk_total: int = 0
    disk_free: int = 0
    unflushed: int = 0
    commitlog_diff: int | None = None
    retry_diff: list[tuple[str, str, int, str, int]] = field(default_factory=list)
    dlq_diff: list[tuple[str, str, int, str, int]] = field(default_factory=list)
    retry_offset: dict[str, int] = field(default_factory=dict)
    dlq_offset: dict[str, int] = field(default_factory=dict)
    group_consume: list[tuple[str, str, int, float]] = field(default_factory=list)
    group_count: list[tuple[str, str, str, int]] = field(default_factory=list)
    producer_count: dict[str, int] = field(default_factory=dict)
    clients: list[tuple[str, str, str, str, dict[str, float]]] = field(default_factory=list)
    """``(clientAddr, clientId, group, topic, ConsumeStatus)`` of each online consumer's topics."""


def exporter_snapshot(broker: Broker) -> ExporterSnapshot:
    """Read everything :func:`exporter_families` needs (on the broker's loop thread)."""
    from tidemq.broker.processor.admin_runtime import BrokerRuntimeProcessor

    cfg = broker.config
    snap = ExporterSnapshot(cfg.broker_cluster_name, cfg.broker_name, broker.addr)
    snap.runtime = BrokerRuntimeProcessor(broker).runtime_info()
    store = broker.store
    try:
        usage = shutil.disk_usage(broker.store_config.store_path_root_dir)
        snap.disk_total, snap.disk_free = usage.total, usage.free
    except OSError:
        pass
    snap.unflushed = sum(
        max(mf.wrote_position - mf.flushed_position, 0) for mf in store.commit_log.queue.files
    )
    service = broker.ha.service if broker.ha is not None else None
    if service is not None and service.connection_count > 0:
        snap.commitlog_diff = max(store.get_max_phy_offset() - service.push2slave_max_offset, 0)
    _group_figures(broker, snap)
    for group, channels in broker.producer_manager.get_group_channel_table().items():
        snap.producer_count[group] = len(channels)
    return snap


CLIENT_TIMEOUT = 2.0
"""Seconds a scrape waits for the consumers' GET_CONSUMER_RUNNING_INFO answers."""


async def client_status(
    broker: Broker, timeout: float = CLIENT_TIMEOUT
) -> list[tuple[str, str, str, str, dict[str, float]]]:
    """Ask every online consumer for its running info (GET_CONSUMER_RUNNING_INFO, as the exporter
    does) and return its ``statusTable`` rows; clients that do not answer in time are skipped."""
    from tidemq.protocol.body import fastjson_loads
    from tidemq.protocol.codes import RequestCode, ResponseCode
    from tidemq.protocol.command import RemotingCommand

    async def ask(group: str, info: object) -> list[tuple[str, str, str, str, dict[str, float]]]:
        channel: Any = getattr(info, "channel", None)
        client_id = str(getattr(info, "client_id", ""))
        ext = {"consumerGroup": group, "clientId": client_id, "jstackEnable": "false"}
        request = RemotingCommand.create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
        try:
            response = await channel.invoke(request, timeout)
            if response.code != ResponseCode.SUCCESS or not response.body:
                return []
            table = (fastjson_loads(response.body) or {}).get("statusTable") or {}
        except Exception:  # an old or busy client: no figures this scrape
            return []
        addr = str(getattr(channel, "remote_addr", ""))
        return [
            (
                addr,
                client_id,
                group,
                str(topic),
                {k: float(v) for k, v in dict(status).items() if _is_number(v)},
            )
            for topic, status in sorted(table.items())
            if isinstance(status, dict)
        ]

    jobs = [
        ask(group, info)
        for group, group_info in sorted(broker.consumer_manager.consumer_table.items())
        for info in list(group_info.channel_info_table.values())
    ]
    rows: list[tuple[str, str, str, str, dict[str, float]]] = []
    for part in await asyncio.gather(*jobs):
        rows.extend(part)
    return rows


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _topic_max(broker: Broker, topic: str) -> int:
    tc = broker.topic_config_manager.select_topic_config(topic)
    if tc is None:
        return 0
    return sum(max(broker.store.get_max_offset_in_queue(topic, q), 0) for q in range(tc.write_queue_nums))


def _group_figures(broker: Broker, snap: ExporterSnapshot) -> None:
    """Retry / DLQ diffs and offsets, per-group consume figures, online consumer counts."""
    com = broker.consumer_offset_manager
    stats = broker.broker_stats
    now = time.monotonic()
    for topic in broker.topic_config_manager.topics():
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            snap.retry_offset[topic] = _topic_max(broker, topic)
        elif topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            snap.dlq_offset[topic[len(DLQ_GROUP_TOPIC_PREFIX) :]] = _topic_max(broker, topic)
    for key in sorted(com.offset_table):
        topic, _, group = key.partition("@")
        if not group:
            continue
        committed = sum(com.query_offset_table(group, topic).values())
        info = broker.consumer_manager.get_consumer_group_info(group)
        online = len(info.channel_info_table) if info is not None else 0
        model = str(getattr(getattr(info, "message_model", None), "value", "CLUSTERING") or "CLUSTERING")
        if topic == RETRY_GROUP_TOPIC_PREFIX + group:
            diff = max(snap.retry_offset.get(topic, 0) - committed, 0)
            snap.retry_diff.append((group, topic, online, model, diff))
        elif topic == DLQ_GROUP_TOPIC_PREFIX + group:
            continue
        else:
            item = stats.get(GROUP_GET_NUMS, f"{topic}@{group}")
            tps = item.snapshot(MINUTE, now).tps if item else 0.0
            snap.group_consume.append((topic, group, committed, tps))
    for group, dlq_max in sorted(snap.dlq_offset.items()):
        topic = DLQ_GROUP_TOPIC_PREFIX + group
        committed = sum(com.query_offset_table(group, topic).values())
        info = broker.consumer_manager.get_consumer_group_info(group)
        online = len(info.channel_info_table) if info is not None else 0
        snap.dlq_diff.append((group, topic, online, "CLUSTERING", max(dlq_max - committed, 0)))
    for group, info in sorted(broker.consumer_manager.consumer_table.items()):
        channels = list(info.channel_info_table.values())
        addrs = ",".join(sorted(str(getattr(c.channel, "remote_addr", "")) for c in channels))
        ids = ",".join(sorted(c.client_id for c in channels))
        snap.group_count.append((addrs, ids, group, len(channels)))


def _num(text: str | None) -> float:
    try:
        return float(str(text or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


def exporter_families(s: ExporterSnapshot) -> Iterator[Metric]:
    """The metric families of :data:`EXPORTED` from one snapshot, in rocketmq-exporter's order."""
    yield from _runtime_families(s)
    yield from _group_families(s)
    yield from _client_families(s)


def gauge_family(
    name: str, doc: str, labels: list[str], rows: Iterable[tuple[list[str], float]]
) -> GaugeMetricFamily:
    """One gauge family with a sample per ``(label values, value)`` of ``rows`` (the broker's own
    families in :mod:`tidemq.broker.metrics` and rocketmq-exporter's here)."""
    family = GaugeMetricFamily(name, doc, labels=labels)
    for values, value in rows:
        family.add_metric(values, float(value))
    return family


def _runtime_families(s: ExporterSnapshot) -> Iterator[Metric]:
    """``rocketmq_brokeruntime_*`` (runtime figures, TPS windows, commit-log disk) and the slaves' lag."""
    rt = s.runtime
    labels = [
        s.cluster,
        s.addr,
        s.broker,
        rt.get("brokerVersionDesc", ""),
        rt.get("bootTimestamp", "0"),
        rt.get("brokerVersion", "0"),
    ]

    def runtime(suffix: str, doc: str, value: float) -> GaugeMetricFamily:
        return gauge_family(f"rocketmq_brokeruntime_{suffix}", doc, RUNTIME_LABELS, [(labels, value)])

    for suffix, key in RUNTIME_SERIES.items():
        yield runtime(suffix, key, _num(rt.get(key)))
    for prefix, key in TPS_SERIES.items():
        figures = [_num(p) for p in (rt.get(key) or "0 0 0").split()] + [0.0, 0.0, 0.0]
        for window, value in zip((10, 60, 600), figures, strict=False):
            yield runtime(f"{prefix}{window}", f"{key} over {window} s", value)
    yield runtime("commitlogdir_capacity_total", "commit-log disk size (bytes)", s.disk_total)
    yield runtime("commitlogdir_capacity_free", "commit-log disk free (bytes)", s.disk_free)
    yield runtime("remain_howmanydata_toflush", "commit-log bytes written but not fsynced", s.unflushed)
    diff = [] if s.commitlog_diff is None else [([s.cluster, s.addr, s.broker], s.commitlog_diff)]
    yield gauge_family(
        "rocketmq_broker_commitlog_diff",
        "bytes the slaves are behind the master",
        ["cluster", "brokerIP", "broker"],
        diff,
    )


def _group_families(s: ExporterSnapshot) -> Iterator[Metric]:
    """Consumer-group figures: retry and DLQ backlogs and offsets, consumed offsets and TPS, members."""
    dl = ["group", "topic", "countOfOnlineConsumers", "msgModel"]
    for name, doc, rows in (
        ("rocketmq_group_retrydiff", "GroupRetryDiff: retry messages not yet consumed", s.retry_diff),
        ("rocketmq_group_dlqdiff", "GroupDLQDiff: messages in the dead-letter topic", s.dlq_diff),
    ):
        yield gauge_family(
            name, doc, dl, (([g, t, str(online), model], d) for g, t, online, model, d in rows)
        )
    cb = [s.cluster, s.broker]
    yield gauge_family(
        "rocketmq_topic_retry_offset",
        "TopicRetryOffset",
        ["cluster", "broker", "topic"],
        (([*cb, topic], offset) for topic, offset in sorted(s.retry_offset.items())),
    )
    yield gauge_family(
        "rocketmq_topic_dlq_offset",
        "TopicDLQOffset",
        ["cluster", "broker", "group"],
        (([*cb, group], offset) for group, offset in sorted(s.dlq_offset.items())),
    )
    gl = ["cluster", "broker", "topic", "group"]
    yield gauge_family(
        "rocketmq_group_consume_total_offset",
        "GroupConsumeTotalOffset",
        gl,
        (([*cb, topic, group], committed) for topic, group, committed, _ in s.group_consume),
    )
    yield gauge_family(
        "rocketmq_group_consume_tps",
        "GroupConsumeTPS (last minute)",
        gl,
        (([*cb, topic, group], rate) for topic, group, _, rate in s.group_consume),
    )
    yield gauge_family(
        "rocketmq_group_count",
        "online consumers of a group",
        ["caddr", "localaddr", "group"],
        (([caddr, local, group], count) for caddr, local, group, count in s.group_count),
    )


def _client_families(s: ExporterSnapshot) -> Iterator[Metric]:
    """Figures the clients report (``rocketmq_client_*``) and producer counts by group."""
    for name, key in CLIENT_SERIES.items():
        yield gauge_family(
            name,
            key,
            ["clientAddr", "clientId", "group", "topic"],
            # tidemq's clients leave out what they do not measure
            (([addr, cid, group, topic], st[key]) for addr, cid, group, topic, st in s.clients if key in st),
        )
    yield gauge_family(
        "rocketmq_producer_count",
        "producer instance counter",
        ["cluster", "broker", "group"],
        (([s.cluster, s.broker, group], count) for group, count in sorted(s.producer_count.items())),
    )
