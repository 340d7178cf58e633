"""Two broker groups as real processes: SIGKILL broker-a's master in the middle of a send loop.

A producer with retries and latency fault tolerance keeps getting SEND_OK (on broker-b) after at
most one failed attempt per message; a PushConsumer keeps consuming broker-b; once broker-a is back
its queues are consumed again, starting from the offsets broker-a had committed (not from 0).
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.ha.conftest import StartCluster, create_topic
from tests.helpers import wait_for_sync
from tidemq.admin.client import AdminClient
from tidemq.broker.offset_manager import load_offset_table
from tidemq.client import ConsumeConcurrentlyStatus, Producer, PushConsumer
from tidemq.client.producer.producer import SendAttempts
from tidemq.errors import StoreError
from tidemq.protocol.message import Message, MessageQueue, SendResult

pytestmark = pytest.mark.slow

TOPIC = "HaTwoGroupsT"
GROUP = "ha-two"
QUEUES = 4


@pytest.fixture
def failed_attempts(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """Failed attempts per send (keyed by the send's SendAttempts object)."""
    counts: Counter[int] = Counter()
    real = SendAttempts.failed

    def spy(self: SendAttempts, exc: Exception, mq: Any) -> bool:
        counts[id(self)] += 1
        return real(self, exc, mq)

    monkeypatch.setattr(SendAttempts, "failed", spy)
    return counts


class Consumed:
    """(broker, queue id, queue offset, body) of every delivery, in order (thread-safe)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, int, str]] = []
        self._lock = threading.Lock()

    def __call__(self, msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        with self._lock:
            self.rows.extend((m.broker_name, m.queue_id, m.queue_offset, m.body.decode()) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def bodies(self, since: int = 0) -> set[str]:
        with self._lock:
            return {r[3] for r in self.rows[since:]}

    def mark(self) -> int:
        with self._lock:
            return len(self.rows)

    def since(self, index: int) -> list[tuple[str, int, int, str]]:
        with self._lock:
            return self.rows[index:]


def persisted_offsets(cluster: Any) -> dict[int, int]:
    """broker-a's consumerOffset.json entries of the test group (what it loads after a restart: the
    file and its journal)."""
    path = Path(cluster.node("broker-a-0").dir) / "store" / "config" / "consumerOffset.json"
    try:
        table = load_offset_table(path)
    except StoreError:  # being written
        table = {}
    return {int(q): int(o) for q, o in table.get(f"{TOPIC}@{GROUP}", {}).items()}


def test_producer_and_consumer_route_around_a_killed_group(
    start_cluster: StartCluster, failed_attempts: Counter[int]
) -> None:
    cluster = start_cluster(groups=2, replicas=0)
    create_topic(cluster, TOPIC, QUEUES)
    ns = cluster.namesrv_addr
    got = Consumed()
    consumer = PushConsumer(
        namesrv_addr=ns,
        consumer_group=GROUP,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        poll_name_server_interval=1.0,
        persist_consumer_offset_interval=1.0,
        rebalance_interval=2.0,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(got)
    producer = Producer(
        namesrv_addr=ns,
        producer_group="ha-two-p",
        send_latency_fault_enable=True,
        retry_times_when_send_failed=2,
        poll_name_server_interval=1.0,
    )
    results: list[SendResult] = []
    errors: list[Exception] = []
    stop = threading.Event()

    def send_loop() -> None:
        i = 0
        while not stop.is_set():  # no fixed count: a fast producer would finish before the kill
            try:
                results.append(producer.send(Message(TOPIC, f"m-{i}".encode())))
            except Exception as exc:
                errors.append(exc)
            i += 1

    sender = threading.Thread(target=send_loop, daemon=True)
    producer.start()
    consumer.start()
    try:
        wait_for_sync(
            lambda: len(producer.fetch_publish_message_queues(TOPIC)) == 2 * QUEUES, 30, "both groups routed"
        )
        sender.start()
        wait_for_sync(lambda: len(results) >= 100, 60, "100 sends before the kill")
        # broker-a has persisted committed offsets of the group (so a restart does not start from 0)
        wait_for_sync(lambda: sum(persisted_offsets(cluster).values()) > 0, 30, "broker-a to persist offsets")
        committed_before_kill = persisted_offsets(cluster)
        cluster.kill("broker-a-0")
        killed_at = len(results)
        wait_for_sync(lambda: len(results) >= killed_at + 150, 60, "150 sends after the kill")
        stop.set()
        sender.join(30)
        assert not errors, errors[:3]
        assert {r.send_status for r in results} == {"SEND_OK"}
        assert max(failed_attempts.values(), default=0) <= 1
        assert {r.message_queue.broker_name for r in results[killed_at + 5 :]} == {"broker-b"}

        to_b = {f"m-{i}" for i, r in enumerate(results) if r.message_queue.broker_name == "broker-b"}
        wait_for_sync(lambda: to_b <= got.bodies(), 60, "the consumer to read all of broker-b")

        # broker-a comes back: its queues are consumed again, from its committed offsets
        restart_mark = got.mark()
        cluster.start_node("broker-a-0")
        with AdminClient(ns) as admin:
            wait_for_sync(
                lambda: len(admin.call("fetch_subscribe_message_queues", TOPIC)) == 2 * QUEUES,
                30,
                "broker-a back in the route",
            )
        new_a = []
        for q in range(QUEUES):
            body = f"a-again-{q}"
            producer.send(Message(TOPIC, body.encode()), queue=MessageQueue(TOPIC, "broker-a", q))
            new_a.append(body)
        to_a = {f"m-{i}" for i, r in enumerate(results) if r.message_queue.broker_name == "broker-a"}
        wait_for_sync(lambda: set(new_a) <= got.bodies(), 60, "the consumer to read broker-a again")
        wait_for_sync(lambda: to_a <= got.bodies(), 30, "every broker-a message consumed")
        first_after: dict[int, int] = {}
        for broker, qid, offset, _ in got.since(restart_mark):
            if broker == "broker-a":
                first_after[qid] = min(offset, first_after.get(qid, offset))
        for qid, offset in first_after.items():
            assert offset >= committed_before_kill.get(qid, 0), (qid, offset, committed_before_kill)
        assert any(committed_before_kill.get(q, 0) > 0 for q in first_after), "restarted from offset 0"
    finally:
        stop.set()
        consumer.shutdown()
        producer.shutdown()
