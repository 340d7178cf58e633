"""One consumer group mixing tidemq PushConsumers and real C++ push consumers (``rocketmq==0.4.4``).

Two in-process tidemq members and two C++ members (subprocesses) share a topic of 8 queues. Both
clients run AllocateMessageQueueAveragely over the same sorted client ids, so the queues must be
split with no queue owned twice and none orphaned: checked against the allocation computed here
from the broker's member list, against each tidemq member's ``assignment()``, and against which
member each queue's messages actually reached. Then every one of 400 messages is consumed once.

The C++ client's ownership is only visible through deliveries, so "warm-up" rounds (one message
per queue) are sent until a round is delivered exactly according to the expected allocation.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter, defaultdict

import pytest

from tests.helpers import poll
from tests.interop.conftest import Spawn
from tests.interop.harness import CppProcess, group_client_ids
from tidemq.client.consumer.allocate import AllocateMessageQueueAveragely
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ClusterThread

pytest.importorskip("rocketmq.client")
pytestmark = pytest.mark.interop

TOPIC, GROUP, QUEUES = "MixedTopic", "MixedGroup", 8


class TidemqMember:
    """An in-process tidemq PushConsumer recording (body, queue id) of every message."""

    def __init__(self, ns: str, name: str) -> None:
        self.name = name
        self.got: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self.consumer = PushConsumer(
            namesrv_addr=ns, consumer_group=GROUP, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        self.consumer.subscribe(TOPIC, "*")
        self.consumer.register_message_listener(self._on_messages)

    def _on_messages(self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
        with self._lock:
            self.got.extend((m.body.decode(), m.queue_id) for m in msgs)

    def received(self, prefix: str) -> list[tuple[str, int]]:
        with self._lock:
            return [(b, q) for b, q in self.got if b.startswith(prefix + "-")]

    def owned(self) -> set[int]:
        return {q.queue_id for q in self.consumer.assignment() if q.topic == TOPIC}


def cpp_received(proc: CppProcess, prefix: str) -> list[tuple[str, int]]:
    return [(m["body"], m["queue_id"]) for m in proc.of("msg") if m["body"].startswith(prefix + "-")]


def test_mixed_group_splits_queues_and_consumes_everything(cluster: ClusterThread, spawn: Spawn) -> None:
    ns = cluster.namesrv_addr
    producer = Producer(namesrv_addr=ns, producer_group="mixed-pg", default_topic_queue_nums=QUEUES)
    producer.start()
    members: list[TidemqMember] = []
    try:
        producer.send(Message(TOPIC, b"create"))
        queues = sorted(producer.fetch_publish_message_queues(TOPIC))
        assert len(queues) == QUEUES
        members = [TidemqMember(ns, f"py{i}") for i in range(2)]
        for m in members:
            m.consumer.start()
        cpps = [
            spawn(
                "cpp_push_consumer.py",
                "--namesrv",
                ns,
                "--group",
                GROUP,
                "--topic",
                TOPIC,
                "--duration",
                "90",
                name=f"cpp{i}",
            )
            for i in range(2)
        ]
        assert poll(lambda: len(group_client_ids(cluster.broker, GROUP)) == 4, 30), group_client_ids(
            cluster.broker, GROUP
        )
        cids = group_client_ids(cluster.broker, GROUP)
        py_cids = {m.consumer.client_id: m for m in members}
        assert set(py_cids) <= set(cids)
        strategy = AllocateMessageQueueAveragely()
        expected: dict[str, set[int]] = {
            cid: {q.queue_id for q in strategy.allocate(GROUP, cid, set(queues), cids)} for cid in cids
        }
        cpp_expected = sorted(sorted(qs) for cid, qs in expected.items() if cid not in py_cids)

        def delivered_as_expected(prefix: str) -> bool:
            py = {m.name: {q for _, q in m.received(prefix)} for m in members}
            cpp = [sorted({q for _, q in cpp_received(p, prefix)}) for p in cpps]
            bodies = [b for m in members for b, _ in m.received(prefix)]
            bodies += [b for p in cpps for b, _ in cpp_received(p, prefix)]
            return (
                sorted(bodies) == sorted(f"{prefix}-{q.queue_id}" for q in queues)
                and all(py[m.name] == expected[m.consumer.client_id] for m in members)
                and all(m.owned() == expected[m.consumer.client_id] for m in members)
                and sorted(cpp) == cpp_expected
            )

        # warm up until one round lands exactly as the allocation says (C++ rebalance is timer/notify driven)
        deadline = time.monotonic() + 45
        rounds = 0
        while True:
            rounds += 1
            prefix = f"warm{rounds}"
            for q in queues:
                producer.send(Message(TOPIC, f"{prefix}-{q.queue_id}".encode()), queue=q)
            if poll(functools.partial(delivered_as_expected, prefix), 5):
                break
            assert time.monotonic() < deadline, (
                f"group did not settle: expected {expected}, tidemq owns "
                f"{[m.owned() for m in members]}; " + " | ".join(p.describe() for p in cpps)
            )

        bodies = [f"main-{i}" for i in range(400)]
        for body in bodies:
            producer.send(Message(TOPIC, body.encode()))

        def everything() -> bool:
            got = {b for m in members for b, _ in m.received("main")}
            got |= {b for p in cpps for b, _ in cpp_received(p, "main")}
            return got >= set(bodies)

        assert poll(everything, 30), " | ".join(p.describe() for p in cpps)
        # each queue was consumed by exactly one member, and every member took part
        owners: dict[int, set[str]] = defaultdict(set)
        counts: Counter[str] = Counter()
        for m in members:
            for b, qid in m.received("main"):
                owners[qid].add(m.name)
                counts[b] += 1
        for p in cpps:
            for b, qid in cpp_received(p, "main"):
                owners[qid].add(p.name)
                counts[b] += 1
        duplicates = sum(n - 1 for n in counts.values())
        print(f"mixed group settled after {rounds} warm-up round(s); 400 sent, {duplicates} duplicates")
        assert sorted(owners) == list(range(QUEUES)), owners
        assert all(len(o) == 1 for o in owners.values()), owners
        assert {n for o in owners.values() for n in o} == {"py0", "py1", "cpp0", "cpp1"}
        assert duplicates == 0, [b for b, n in counts.items() if n > 1][:10]
    finally:
        for m in members:
            m.consumer.shutdown()
        producer.shutdown()
