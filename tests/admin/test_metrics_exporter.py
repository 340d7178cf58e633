"""Issue 31: every rocketmq-exporter series a tidemq broker can compute is served (none left out
silently: the others are listed with a reason), with the exporter's labels and real values."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.helpers import wait_for_sync
from tidemq.admin import AdminClient
from tidemq.broker.metrics import BrokerCollector
from tidemq.broker.metrics_exporter import EXPORTED, NOT_EXPORTED
from tidemq.client import ConsumeConcurrentlyStatus, Producer, PushConsumer
from tidemq.protocol.message import Message, MessageQueue
from tidemq.testing import ClusterThread

RMQ_METRICS_COLLECTOR = [
    "rocketmq_broker_commitlog_diff",
    "rocketmq_broker_qps",
    "rocketmq_broker_tps",
    "rocketmq_brokeruntime_commitlog_disk_ratio",
    "rocketmq_brokeruntime_commitlog_maxoffset",
    "rocketmq_brokeruntime_commitlog_minoffset",
    "rocketmq_brokeruntime_commitlogdir_capacity_free",
    "rocketmq_brokeruntime_commitlogdir_capacity_total",
    "rocketmq_brokeruntime_consumequeue_disk_ratio",
    "rocketmq_brokeruntime_dispatch_behind_bytes",
    "rocketmq_brokeruntime_dispatch_maxbuffer",
    "rocketmq_brokeruntime_earliest_message_timestamp",
    "rocketmq_brokeruntime_getfound_tps10",
    "rocketmq_brokeruntime_getfound_tps60",
    "rocketmq_brokeruntime_getfound_tps600",
    "rocketmq_brokeruntime_getmessage_entire_time_max",
    "rocketmq_brokeruntime_getmiss_tps10",
    "rocketmq_brokeruntime_getmiss_tps60",
    "rocketmq_brokeruntime_getmiss_tps600",
    "rocketmq_brokeruntime_gettotal_tps10",
    "rocketmq_brokeruntime_gettotal_tps60",
    "rocketmq_brokeruntime_gettotal_tps600",
    "rocketmq_brokeruntime_gettransfered_tps10",
    "rocketmq_brokeruntime_gettransfered_tps60",
    "rocketmq_brokeruntime_gettransfered_tps600",
    "rocketmq_brokeruntime_msg_gettotal_today_now",
    "rocketmq_brokeruntime_msg_gettotal_todaymorning",
    "rocketmq_brokeruntime_msg_gettotal_yesterdaymorning",
    "rocketmq_brokeruntime_msg_put_total_today_now",
    "rocketmq_brokeruntime_msg_puttotal_todaymorning",
    "rocketmq_brokeruntime_msg_puttotal_yesterdaymorning",
    "rocketmq_brokeruntime_pagecache_lock_time_mills",
    "rocketmq_brokeruntime_pmdt_0ms",
    "rocketmq_brokeruntime_pmdt_0to10ms",
    "rocketmq_brokeruntime_pmdt_100to200ms",
    "rocketmq_brokeruntime_pmdt_10stomore",
    "rocketmq_brokeruntime_pmdt_10to50ms",
    "rocketmq_brokeruntime_pmdt_1to2s",
    "rocketmq_brokeruntime_pmdt_200to500ms",
    "rocketmq_brokeruntime_pmdt_2to3s",
    "rocketmq_brokeruntime_pmdt_3to4s",
    "rocketmq_brokeruntime_pmdt_4to5s",
    "rocketmq_brokeruntime_pmdt_500to1s",
    "rocketmq_brokeruntime_pmdt_50to100ms",
    "rocketmq_brokeruntime_pmdt_5to10s",
    "rocketmq_brokeruntime_pull_threadpoolqueue_capacity",
    "rocketmq_brokeruntime_pull_threadpoolqueue_headwait_timemills",
    "rocketmq_brokeruntime_pull_threadpoolqueue_size",
    "rocketmq_brokeruntime_put_latency_99",
    "rocketmq_brokeruntime_put_latency_999",
    "rocketmq_brokeruntime_put_message_average_size",
    "rocketmq_brokeruntime_put_message_size_total",
    "rocketmq_brokeruntime_put_tps10",
    "rocketmq_brokeruntime_put_tps60",
    "rocketmq_brokeruntime_put_tps600",
    "rocketmq_brokeruntime_putmessage_entire_time_max",
    "rocketmq_brokeruntime_putmessage_times_total",
    "rocketmq_brokeruntime_query_threadpool_queue_capacity",
    "rocketmq_brokeruntime_query_threadpoolqueue_headwait_timemills",
    "rocketmq_brokeruntime_query_threadpoolqueue_size",
    "rocketmq_brokeruntime_remain_howmanydata_toflush",
    "rocketmq_brokeruntime_remain_transientstore_buffer_numbs",
    "rocketmq_brokeruntime_send_threadpool_queue_size",
    "rocketmq_brokeruntime_send_threadpoolqueue_capacity",
    "rocketmq_brokeruntime_send_threadpoolqueue_headwait_timemills",
    "rocketmq_brokeruntime_start_accept_sendrequest_time",
    "rocketmq_client_consume_fail_msg_count",
    "rocketmq_client_consume_fail_msg_tps",
    "rocketmq_client_consume_ok_msg_tps",
    "rocketmq_client_consume_rt",
    "rocketmq_client_consumer_pull_rt",
    "rocketmq_client_consumer_pull_tps",
    "rocketmq_consumer_message_size",
    "rocketmq_consumer_offset",
    "rocketmq_consumer_tps",
    "rocketmq_group_consume_total_offset",
    "rocketmq_group_consume_tps",
    "rocketmq_group_count",
    "rocketmq_group_diff",
    "rocketmq_group_dlqdiff",
    "rocketmq_group_get_latency_by_storetime",
    "rocketmq_group_retrydiff",
    "rocketmq_producer_count",
    "rocketmq_producer_message_size",
    "rocketmq_producer_offset",
    "rocketmq_producer_tps",
    "rocketmq_send_back_nums",
    "rocketmq_topic_dlq_offset",
    "rocketmq_topic_retry_offset",
]
"""Every series name in apache/rocketmq-exporter's RMQMetricsCollector.java (89)."""


def families(broker: Any) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {f.name: [(dict(s.labels), s.value) for s in f.samples] for f in BrokerCollector(broker).collect()}


def test_exporter_series_are_complete_and_real(tmp_path: Path) -> None:
    assert len(RMQ_METRICS_COLLECTOR) == 89
    with ClusterThread(tmp_path) as cluster:
        ns = cluster.namesrv_addr
        with AdminClient(ns) as admin:
            for topic in ("ExpT", "%RETRY%idle-g", "%DLQ%idle-g"):
                admin.create_topic(topic, 1)
        producer = Producer(namesrv_addr=ns, producer_group="exp-p")
        producer.start()
        got: list[str] = []
        lock = threading.Lock()

        def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
            with lock:
                got.extend(m.body.decode() for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            namesrv_addr=ns, consumer_group="exp-g", consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        consumer.subscribe("ExpT", "*")
        consumer.register_message_listener(listener)
        try:
            for topic, n in (("ExpT", 5), ("%DLQ%idle-g", 1), ("%RETRY%idle-g", 2)):
                for i in range(n):
                    producer.send(Message(topic, f"{topic}-{i}".encode()))
            consumer.start()
            wait_for_sync(lambda: len(got) >= 5, 20, "five messages consumed")
            with AdminClient(ns) as admin:  # a group without consumers: two retry messages waiting
                admin.update_consumer_offset("idle-g", MessageQueue("%RETRY%idle-g", "broker-a", 0), 0)
            table = cluster.broker.producer_manager.get_group_channel_table
            wait_for_sync(lambda: "exp-p" in table(), 10, "the producer's heartbeat")
            fams = families(cluster.broker)
            with AdminClient(ns) as admin:  # one TPS window: clusterList agrees with rocketmq_broker_tps
                (row,) = admin.cluster_list()
            scraped_tps = fams["rocketmq_broker_tps"][0][1]
            assert abs(row.tps("putTps") - scraped_tps) <= 0.1 * scraped_tps, (
                row.runtime["putTps"],
                scraped_tps,
            )
        finally:
            consumer.shutdown()
            producer.shutdown()

    served = set(fams)
    assert set(EXPORTED) <= served
    missing = [n for n in RMQ_METRICS_COLLECTOR if n not in served and n not in NOT_EXPORTED]
    assert not missing, f"exporter series neither served nor listed with a reason: {missing}"
    assert not set(NOT_EXPORTED) & served

    def one(name: str, **labels: str) -> float:
        rows = [v for lbl, v in fams[name] if labels.items() <= lbl.items()]
        assert len(rows) == 1, (name, labels, fams[name])
        return rows[0]

    assert one("rocketmq_group_retrydiff", group="idle-g") == 2
    assert one("rocketmq_group_dlqdiff", group="idle-g") == 1
    assert one("rocketmq_topic_dlq_offset", group="idle-g") == 1
    assert one("rocketmq_topic_retry_offset", topic="%RETRY%idle-g") == 2
    assert one("rocketmq_brokeruntime_msg_put_total_today_now", cluster="DefaultCluster") == 8
    assert one("rocketmq_brokeruntime_commitlogdir_capacity_total") > 0
    assert one("rocketmq_producer_count", group="exp-p") == 1
    assert one("rocketmq_group_count", group="exp-g") == 1
    assert one("rocketmq_client_consume_ok_msg_tps", group="exp-g", topic="ExpT") > 0
    assert one("rocketmq_client_consume_fail_msg_count", group="exp-g", topic="ExpT") == 0
    assert one("rocketmq_client_consume_rt", group="exp-g", topic="ExpT") >= 0  # ms per listener call
    assert not fams[
        "rocketmq_client_consumer_pull_rt"
    ]  # tidemq's client does not measure it: no row, not a 0


def test_tps_is_the_minute_figure() -> None:
    from tidemq.admin.ops_broker import BrokerRow

    row = BrokerRow("c", "broker-a", 0, "a:1", {"putTps": "461.00 138.60 20.00"})
    assert row.tps("putTps") == 138.6 and row.tps("getTransferedTps") == 0.0


def test_grafana_dashboard_uses_only_served_series() -> None:
    """docs/grafana/tidemq-dashboard.json queries only series a tidemq broker serves."""
    import json
    import re

    dash = json.loads((Path(__file__).parents[2] / "docs" / "grafana" / "tidemq-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if isinstance(v.get("query"), dict)]
    used = {m for e in exprs for m in re.findall(r"\b(rocketmq_[a-z0-9_]+|tidemq_[a-z0-9_]+)", e)}
    served = (set(RMQ_METRICS_COLLECTOR) - set(NOT_EXPORTED)) | {"rocketmq_message_accumulation"}
    assert used and used <= served, used - served
