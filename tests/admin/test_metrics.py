"""``tidemq serve --metrics-port``: Prometheus metrics that move while messages flow."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tidemq.client.consumer.listener import ConsumeConcurrentlyStatus
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ServeProcess

from ..helpers import wait_for_sync


def scrape(addr: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of one scrape."""
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The sample ``name`` whose labels include ``labels`` (0.0 when absent)."""
    for (n, lbls), v in samples.items():
        if n == name and set(labels.items()) <= set(lbls):
            return v
    return 0.0


def test_metrics_move_while_messages_flow(tmp_path: Path) -> None:
    """Counters and rocketmq-exporter gauges rise with sends and pulls; lag shows then drains."""
    with ServeProcess(tmp_path / "store", extra_args=["--metrics-port", "0"]) as proc:
        addr = proc.fields["metrics"]
        before = scrape(addr)
        assert value(before, "process_resident_memory_bytes") > 0  # process metrics are there
        producer = Producer(namesrv_addr=proc.namesrv_addr, producer_group="metrics-p")
        producer.start()
        try:
            for i in range(20):
                producer.send(Message("MetricsT", f"m{i}".encode()))
            first = scrape(addr)
            assert value(first, "tidemq_messages_put_total", topic="MetricsT") == 20
            assert value(first, "rocketmq_producer_offset", topic="MetricsT") == 20
            assert value(first, "rocketmq_producer_tps", topic="MetricsT") > 0
            assert value(first, "rocketmq_broker_tps", broker="broker-a") > 0
            assert value(first, "rocketmq_brokeruntime_msg_put_total_today_now") == 20

            got: list[MessageExt] = []
            lock = threading.Lock()

            def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
                with lock:
                    got.extend(msgs)
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            consumer = PushConsumer(
                namesrv_addr=proc.namesrv_addr,
                consumer_group="metrics-g",
                consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                persist_consumer_offset_interval=0.2,
            )
            consumer.subscribe("MetricsT", "*")
            consumer.register_message_listener(listener)
            consumer.start()
            try:
                wait_for_sync(lambda: len(got) >= 20, 30, "twenty messages consumed")
                wait_for_sync(
                    lambda: (
                        value(scrape(addr), "tidemq_messages_get_total", topic="MetricsT", group="metrics-g")
                        >= 20
                    ),
                    15,
                    "the get counter to count the pulls",
                )
                wait_for_sync(
                    lambda: (
                        value(scrape(addr), "rocketmq_consumer_offset", topic="MetricsT", group="metrics-g")
                        == 20
                    ),
                    30,
                    "the committed offsets to reach 20",
                )
                for i in range(5):
                    producer.send(Message("MetricsT", f"more{i}".encode()))
                after = scrape(addr)
                assert value(after, "tidemq_messages_put_total", topic="MetricsT") == 25
                assert value(after, "rocketmq_consumer_tps", topic="MetricsT", group="metrics-g") > 0
                wait_for_sync(
                    lambda: (
                        value(scrape(addr), "rocketmq_group_diff", topic="MetricsT", group="metrics-g") == 0
                        and len(got) >= 25
                    ),
                    30,
                    "the group's lag to drain again",
                )
            finally:
                consumer.shutdown()
        finally:
            producer.shutdown()
