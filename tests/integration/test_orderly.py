"""Orderly push consumers against an in-process broker: per-key order through rebalances, queue
locks on the broker, SUSPEND re-delivery and the orderly max-reconsume -> DLQ rule."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.helpers import start_push_consumer, wait_for
from tidemq.client.consumer.listener import (
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageListenerOrderly,
)
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer.producer import AsyncProducer
from tidemq.client.producer.selector import SelectMessageQueueByHash
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.protocol.topic import dlq_topic
from tidemq.testing import Cluster, run_cluster

KEYS = 20
PER_KEY = 200
QUEUES = 8


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def order_violations(seqs: list[int]) -> list[str]:
    """Per-key receipt order: each message is the next one, or a rewind (re-delivered tail); never a skip."""
    problems = []
    prev, high = -1, -1
    for i, s in enumerate(seqs):
        if s != prev + 1 and not s <= prev:
            problems.append(f"at #{i}: {s} after {prev}")
        if s > high + 1:
            problems.append(f"at #{i}: {s} skips ahead of {high}")
        prev, high = s, max(high, s)
    return problems


class Recorder:
    """Listener side of the test: who consumed what, and whether the broker agreed it held the queue."""

    def __init__(self, cluster: Cluster, group: str) -> None:
        self.cluster = cluster
        self.group = group
        self.lock = threading.Lock()
        self.by_key: dict[str, list[int]] = defaultdict(list)
        self.active: dict[MessageQueue, str] = {}
        self.violations: list[str] = []
        self.count = 0
        self.by_client: dict[str, int] = defaultdict(int)

    def listener(self, client_id: str) -> MessageListenerOrderly:
        def on_messages(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
            mq = ctx.message_queue
            locks = self.cluster.broker.rebalance_lock_manager
            with self.lock:
                other = self.active.get(mq)
                if other is not None:
                    self.violations.append(f"{mq} consumed by {client_id} while {other} consumes it")
                self.active[mq] = client_id
            if not locks.is_locked(self.group, mq, client_id, now_ms()):
                self.violations.append(f"{client_id} consumes {mq} without holding the broker's lock")
            time.sleep(0.0005)  # a little work, so overlaps would show
            with self.lock:
                for m in msgs:
                    key, seq = m.body.decode().split(":")
                    if key != "warm":
                        self.by_key[key].append(int(seq))
                        self.count += 1
                        self.by_client[client_id] += 1
                self.active.pop(mq, None)
            return ConsumeOrderlyStatus.SUCCESS

        return MessageListenerOrderly(on_messages)

    def distinct(self) -> int:
        with self.lock:
            return sum(len(set(v)) for v in self.by_key.values())


async def test_three_orderly_members_keep_per_key_order_through_leave_and_join(tmp_path: Path) -> None:
    topic, group = "OrderTopic", "cg-orderly"
    async with run_cluster(tmp_path) as cluster:
        ns = cluster.namesrv_addr
        producer = AsyncProducer(
            namesrv_addr=ns, producer_group="pg-orderly", default_topic_queue_nums=QUEUES
        )
        await producer.start()
        await producer.send(Message(topic, b"warm:0"))
        assert len(await producer.fetch_publish_message_queues(topic)) == QUEUES
        rec = Recorder(cluster, group)
        table_problems: list[str] = []

        def member() -> AsyncPushConsumer:
            c = AsyncPushConsumer(
                namesrv_addr=ns,
                consumer_group=group,
                consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                rebalance_interval=1.0,
                pull_batch_size=8,
            )
            c.subscribe(topic, "*")
            c.register_message_listener(rec.listener(c.client_id))
            return c

        async def watch_lock_table(stop: asyncio.Event) -> None:
            while not stop.is_set():
                table = cluster.broker.rebalance_lock_manager.lock_table().get(group, {})
                members_now = {c.client_id for c in members}
                for mq, entry in table.items():
                    if entry.client_id not in members_now and entry.client_id not in gone:
                        table_problems.append(f"{mq} locked by unknown {entry.client_id}")
                # every queue a live member is consuming must be locked by that member
                with rec.lock:
                    for mq, cid in rec.active.items():
                        holder = table.get(mq)
                        if holder is None or holder.client_id != cid:
                            table_problems.append(f"{cid} consumes {mq} but the lock table says {holder}")
                await asyncio.sleep(0.005)

        members = [member(), member(), member()]
        gone: set[str] = set()
        for m in members:
            await m.start()
        stop = asyncio.Event()
        watcher = asyncio.ensure_future(watch_lock_table(stop))
        selector = SelectMessageQueueByHash()

        async def produce(seqs: range) -> None:
            async def one_key(key: int) -> None:
                for seq in seqs:
                    msg = Message(topic, f"k{key}:{seq}".encode())
                    await producer.send(msg, selector=selector, arg=f"k{key}")

            await asyncio.gather(*(one_key(k) for k in range(KEYS)))

        half = PER_KEY // 2
        total = KEYS * PER_KEY
        producing = asyncio.ensure_future(produce(range(half)))
        try:
            await wait_for(lambda: rec.distinct() >= total // 4, 60, "a quarter consumed")
            leaver = members.pop(0)
            gone.add(leaver.client_id)
            await leaver.shutdown()
            await producing
            joiner = member()
            await joiner.start()
            members.append(joiner)
            await wait_for(
                lambda: any(q.topic == topic for q in joiner.assignment()), 30, "the joiner owning queues"
            )
            await produce(range(half, PER_KEY))
            await wait_for(lambda: rec.distinct() >= total, 90, "every message consumed")
        finally:
            stop.set()
            await watcher
            for m in members:
                await m.shutdown()
            await producer.shutdown()
        assert rec.by_client[leaver.client_id] > 0 and rec.by_client[joiner.client_id] > 0
        assert not rec.violations, rec.violations[:5]
        assert not table_problems, table_problems[:5]
        for key in range(KEYS):
            seqs = rec.by_key[f"k{key}"]
            assert set(seqs) == set(range(PER_KEY)), f"k{key} missing {set(range(PER_KEY)) - set(seqs)}"
            assert not order_violations(seqs), (f"k{key}", order_violations(seqs)[:3])
        # after shutdown every lock of the group is released
        assert not cluster.broker.rebalance_lock_manager.lock_table().get(group)


async def test_suspend_redelivers_same_message_then_dlq_after_max_and_queue_goes_on(tmp_path: Path) -> None:
    topic, group = "OrderRetry", "cg-orderly-retry"
    async with run_cluster(tmp_path) as cluster:
        ns = cluster.namesrv_addr
        producer = AsyncProducer(namesrv_addr=ns, producer_group="pg-or", default_topic_queue_nums=1)
        await producer.start()
        for body in (b"poison", b"after-1", b"after-2"):
            await producer.send(Message(topic, body))
        seen: list[tuple[bytes, int, float]] = []

        async def on_messages(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> Any:
            for m in msgs:
                seen.append((m.body, m.reconsume_times, time.monotonic()))
                if m.body == b"poison":
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            return ConsumeOrderlyStatus.SUCCESS

        consumer = await start_push_consumer(
            ns,
            group,
            topic,
            on_messages,
            orderly=True,
            suspend_current_queue_time_millis=200,
            max_reconsume_times=2,
        )
        try:
            await wait_for(lambda: [b for b, *_ in seen].count(b"after-2") == 1, 20, "the queue to go on")
        finally:
            await consumer.shutdown()
            await producer.shutdown()
        bodies = [b for b, *_ in seen]
        assert bodies == [b"poison", b"poison", b"poison", b"after-1", b"after-2"]
        assert [r for _, r, _ in seen[:3]] == [0, 1, 2]
        gaps = [seen[i + 1][2] - seen[i][2] for i in range(2)]
        assert all(g >= 0.18 for g in gaps), gaps  # suspend_current_queue_time_millis honoured
        dlq = dlq_topic(group)
        store = cluster.broker.store
        assert store.get_max_offset_in_queue(dlq, 0) == 1
        from tidemq.protocol.message_codec import decode_messages

        (dead,) = decode_messages(store.get_message("t", dlq, 0, 0, 1, None).message_buffers[0])
        assert dead.body == b"poison"
        assert dead.properties["RETRY_TOPIC"] == topic
