"""The real C++ push consumer against tidemq: orderly consumption with local re-consumption keeps
per-key order, RECONSUME_LATER goes through CONSUMER_SEND_MSG_BACK -> delay level -> %RETRY%, and a
mixed orderly group (C++ + tidemq) never has two members on one queue."""

from __future__ import annotations

import functools
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import poll
from tests.interop.conftest import Spawn
from tests.interop.harness import group_client_ids, stored_count
from tests.interop.test_cpp_push_consumer import Driver
from tidemq.client.consumer.listener import (
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageListenerOrderly,
)
from tidemq.client.consumer.push import PushConsumer
from tidemq.protocol.message import MessageExt
from tidemq.testing import ClusterThread

pytest.importorskip("rocketmq.client")
pytestmark = pytest.mark.interop

DELAYS = "1s 1s 1s 2s 1s 1s"  # retry levels 3.. = 1 s, 2 s, 1 s


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    """A cluster with a shortened delay-level table (overrides the folder's fixture)."""
    with ClusterThread(tmp_path, message_delay_level=DELAYS) as c:
        yield c


def per_key(events: list[dict[str, Any]], key_of: dict[str, str], prefix: str) -> dict[str, list[int]]:
    seq: dict[str, list[int]] = defaultdict(list)
    for e in events:
        if e["body"].startswith(prefix + "-") and e.get("status", "CONSUME_SUCCESS") == "CONSUME_SUCCESS":
            seq[key_of[e["body"]]].append(int(e["body"].split("-")[1]))
    return seq


def test_cpp_orderly_consumer_keeps_key_order_while_reconsuming(cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic, group = cluster.namesrv_addr, "CppOrderRetryTopic", "CppOrderRetryGroup"
    driver = Driver(spawn, ns, topic)
    sent = driver.send(mode="orderly", shard="key", count=200, prefix="o")
    key_of = {e["body"]: e["key"] for e in sent}
    consumer = spawn(
        "cpp_retry_consumer.py",
        *("--namesrv", ns, "--group", group, "--topic", topic, "--orderly"),
        *("--fail-prefix", "o-1", "--fail-times", "2", "--duration", "90"),
        name="cpp-orderly-retry",
    )
    ok = consumer.wait_until(
        lambda p: len({e["body"] for e in p.of("msg") if e["status"] == "CONSUME_SUCCESS"}) >= 200, 60
    )
    assert ok, consumer.describe()
    seqs = per_key(consumer.of("msg"), key_of, "o")
    assert sum(len(set(s)) for s in seqs.values()) == 200
    for key, s in seqs.items():
        assert s == sorted(s), (key, s)
    # "o-1", "o-10".."o-19", "o-100".. each failed twice and were re-delivered before their successors
    failed = [e for e in consumer.of("msg") if e["status"] == "RECONSUME_LATER"]
    assert {e["body"] for e in failed} == {b for b in key_of if b.startswith("o-1")}
    locks = cluster.broker.rebalance_lock_manager.lock_table().get(group, {})
    assert locks and set(group_client_ids(cluster.broker, group)) == {e.client_id for e in locks.values()}


def test_cpp_reconsume_later_is_sent_back_and_redelivered_after_the_delay(
    cluster: ClusterThread, spawn: Spawn
) -> None:
    ns, topic, group = cluster.namesrv_addr, "CppRetryTopic", "CppRetryGroup"
    driver = Driver(spawn, ns, topic)
    driver.send(mode="sync", count=4, prefix="plain")
    consumer = spawn(
        "cpp_retry_consumer.py",
        *("--namesrv", ns, "--group", group, "--topic", topic),
        *("--fail-prefix", "retry-", "--fail-times", "1", "--duration", "90"),
        name="cpp-retry",
    )

    def successes(prefix: str) -> list[dict[str, Any]]:
        return [
            e for e in consumer.of("msg") if e["status"] == "CONSUME_SUCCESS" and e["body"].startswith(prefix)
        ]

    assert consumer.wait_until(lambda p: len(successes("plain-")) >= 4, 60), consumer.describe()
    # The C binding fails a whole pulled batch at its first failing message, so each failing
    # message is sent on its own (one per round) to keep the per-message results exact.
    rounds = 3
    for i in range(rounds):
        body = f"retry-{i}-0"
        driver.send(mode="sync", count=1, prefix=f"retry-{i}")
        done = functools.partial(lambda b, p: any(e["body"] == b for e in successes("retry-")), body)
        assert consumer.wait_until(done, 30), consumer.describe()
    firsts = {e["body"]: e for e in consumer.of("msg") if e["status"] == "RECONSUME_LATER"}
    assert set(firsts) == {f"retry-{i}-0" for i in range(rounds)}
    assert len(successes("retry-")) == rounds
    for e in successes("retry-"):
        first = firsts[e["body"]]
        assert first["reconsume_times"] == 0 and e["reconsume_times"] == 1
        assert e["topic"] == topic  # the C++ client restores RETRY_TOPIC
        assert e["msg_id"] == first["msg_id"]
        assert e["t"] - first["t"] >= 0.9  # level 3 = 1 s
    assert sorted(e["body"] for e in successes("plain-")) == [f"plain-{i}" for i in range(4)]
    broker = cluster.broker
    assert stored_count(broker, f"%RETRY%{group}") == rounds  # the send-backs landed in the retry topic
    assert broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == rounds  # via delay level 3


def test_mixed_orderly_group_shares_queues_without_overlap(cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic, group = cluster.namesrv_addr, "MixedOrderTopic", "MixedOrderGroup"
    driver = Driver(spawn, ns, topic)
    driver.send(mode="sync", count=4, prefix="create")
    cpp = spawn(
        "cpp_retry_consumer.py",
        *("--namesrv", ns, "--group", group, "--topic", topic, "--orderly"),
        *("--fail-prefix", "none", "--duration", "90"),
        name="cpp-mixed",
    )
    lock = threading.Lock()
    py_seen: list[dict[str, Any]] = []
    violations: list[str] = []

    def on_messages(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        locks = cluster.broker.rebalance_lock_manager
        if not locks.is_locked(group, ctx.message_queue, py.client_id, time.time_ns() // 1_000_000):
            violations.append(f"tidemq consumes {ctx.message_queue} without the lock")
        with lock:
            py_seen.extend({"body": m.body.decode(), "queue_id": m.queue_id} for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    py = PushConsumer(namesrv_addr=ns, consumer_group=group, rebalance_interval=1.0)
    py.subscribe(topic, "*")
    py.register_message_listener(MessageListenerOrderly(on_messages))
    py.start()
    try:
        assert poll(lambda: len(group_client_ids(cluster.broker, group)) == 2, 30)

        def split() -> bool:
            table = cluster.broker.rebalance_lock_manager.lock_table().get(group, {})
            holders = {e.client_id for mq, e in table.items() if mq.topic == topic}
            return len([mq for mq in table if mq.topic == topic]) == 4 and len(holders) == 2

        assert poll(split, 60), cluster.broker.rebalance_lock_manager.lock_table()
        sent = driver.send(mode="orderly", shard="key", count=400, prefix="m")
        key_of = {e["body"]: e["key"] for e in sent}

        def total() -> int:
            with lock:
                n = len({e["body"] for e in py_seen if e["body"].startswith("m-")})
            return n + len({e["body"] for e in cpp.of("msg") if e["body"].startswith("m-")})

        assert poll(lambda: total() >= 400, 60), (total(), cpp.describe())
    finally:
        py.shutdown()
    assert not violations, violations[:3]
    with lock:
        py_events = list(py_seen)
    cpp_events = cpp.of("msg")
    py_queues = {e["queue_id"] for e in py_events if e["body"].startswith("m-")}
    cpp_queues = {e["queue_id"] for e in cpp_events if e["body"].startswith("m-")}
    assert py_queues and cpp_queues and not py_queues & cpp_queues, (py_queues, cpp_queues)
    for events in (py_events, cpp_events):
        for key, s in per_key(events, key_of, "m").items():
            assert s == sorted(s), (key, s)
