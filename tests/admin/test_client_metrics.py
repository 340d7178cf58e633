"""The client-side metrics helper records sends, consume calls and the process-queue size."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

from tidemq.client.consumer.listener import ConsumeConcurrentlyStatus
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.metrics import ClientMetrics
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ClusterThread

from ..helpers import wait_for_sync


def sample(metrics: ClientMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_client_metrics_follow_sends_and_consumption(tmp_path: Path) -> None:
    """Send latency and counts, consume latency and counts, and cached messages appear in /metrics."""
    metrics = ClientMetrics()
    with ClusterThread(tmp_path) as cluster:
        producer = Producer(namesrv_addr=cluster.namesrv_addr, producer_group="cm-p")
        producer.start()
        release = threading.Event()
        seen: list[MessageExt] = []

        def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
            seen.extend(msgs)
            release.wait(30)  # hold the first batch so messages stay cached
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            namesrv_addr=cluster.namesrv_addr,
            consumer_group="cm-g",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            consume_thread_min=1,
            consume_thread_max=1,
        )
        try:
            for i in range(10):
                metrics.timed_send(producer, Message("ClientMetricsT", f"m{i}".encode()))
            assert sample(metrics, "tidemq_client_send_total", topic="ClientMetricsT", result="ok") == 10
            assert sample(metrics, "tidemq_client_send_latency_seconds_count", topic="ClientMetricsT") == 10
            consumer.subscribe("ClientMetricsT", "*")
            consumer.register_message_listener(metrics.wrap_listener("cm-g", listener))
            consumer.start()
            metrics.watch_consumer("cm-g", consumer)
            wait_for_sync(
                lambda: sample(metrics, "tidemq_client_process_queue_messages", group="cm-g") >= 2,
                30,
                "cached messages",
            )
            release.set()
            wait_for_sync(
                lambda: (
                    sample(
                        metrics, "tidemq_client_consume_messages_total", group="cm-g", topic="ClientMetricsT"
                    )
                    == 10
                ),
                30,
                "ten messages consumed",
            )
            assert (
                sample(
                    metrics,
                    "tidemq_client_consume_latency_seconds_count",
                    group="cm-g",
                    topic="ClientMetricsT",
                )
                >= 1
            )
            assert b"tidemq_client_process_queue_messages" in generate_latest(metrics.registry)
        finally:
            release.set()
            consumer.shutdown()
            producer.shutdown()
