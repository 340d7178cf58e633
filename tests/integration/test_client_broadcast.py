"""BROADCASTING: every member gets everything; a restart resumes from the local offsets file.
Also the blocking facades (Producer / PushConsumer) on their background loops."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.helpers import wait_for_sync as wait_until
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ClusterThread


class Sink:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: list[bytes] = []

    def __call__(self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
        with self.lock:
            self.bodies.extend(m.body for m in msgs)

    def distinct(self) -> set[bytes]:
        with self.lock:
            return set(self.bodies)


def caught_up(consumer: PushConsumer, cluster: ClusterThread) -> bool:
    """Every queue of BcT is owned, nothing is in flight and its consumed offset is the broker's max."""
    store = cluster.broker.store
    queues = {mq: pq for mq, pq in consumer.core.owned_process_queues().items() if mq.topic == "BcT"}
    table = consumer.core.offset_store.clone_offset_table("BcT")
    return len(queues) == len(store.consume_queues.topics_and_queues().get("BcT", [])) and all(
        pq.msg_count == 0 and table.get(mq, -1) == store.get_max_offset_in_queue("BcT", mq.queue_id)
        for mq, pq in queues.items()
    )


def broadcaster(addr: str, store: Path, name: str, sink: Sink) -> PushConsumer:
    c = PushConsumer(
        namesrv_addr=addr,
        consumer_group="bc",
        message_model="BROADCASTING",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        offset_store_dir=store,
        instance_name=name,
    )
    c.subscribe("BcT", "*")
    c.register_message_listener(sink)
    c.start()
    return c


def test_broadcasting_members_each_get_everything_and_resume(tmp_path: Path) -> None:
    """Two BROADCASTING members each see every message; a restarted member resumes from its file."""
    with ClusterThread(tmp_path / "cluster") as cluster:
        addr = cluster.namesrv_addr
        offsets = tmp_path / "offsets"
        producer = Producer(namesrv_addr=addr, producer_group="pbc")
        producer.start()
        first = {f"a{i}".encode() for i in range(20)}
        for body in sorted(first):
            producer.send(Message("BcT", body))
        s1, s2 = Sink(), Sink()
        c1 = broadcaster(addr, offsets, "one", s1)
        c2 = broadcaster(addr, offsets, "two", s2)
        wait_until(lambda: s1.distinct() >= first and s2.distinct() >= first, 10, "both members got all")
        c1.shutdown()
        assert any((offsets).rglob("offsets.json"))
        second = {f"b{i}".encode() for i in range(10)}
        for body in sorted(second):
            producer.send(Message("BcT", body))
        wait_until(lambda: s2.distinct() >= second, 10, "running member got the second wave")
        r1 = Sink()
        c1 = broadcaster(addr, offsets, "one", r1)
        wait_until(lambda: r1.distinct() >= second, 10, "restarted member got the second wave")
        # nothing of the first wave is on its way: every queue consumed up to the broker's max offset
        wait_until(lambda: caught_up(c1, cluster), 10, "restarted member caught up on every queue")
        assert not (r1.distinct() & first), "restart must resume from the local offsets, not from the start"
        c1.shutdown()
        c2.shutdown()
        producer.shutdown()
