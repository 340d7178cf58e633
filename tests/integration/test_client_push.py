"""Producer -> PushConsumer end to end against an in-process name server + broker."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import push_consumer, start_push_consumer, wait_for
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.testing import run_cluster


async def test_producer_to_push_consumer_delivers_everything(tmp_path: Path) -> None:
    """Every sent message (plain, tagged, compressed, batch) reaches the consumer intact."""
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg")
        await producer.start()
        sent: dict[str, Message] = {}
        for i in range(30):
            msg = Message("PushAll", f"body-{i}", tags="A", keys=[f"k{i}"], properties={"n": str(i)})
            sent[(await producer.send(msg)).msg_id] = msg
        big = Message("PushAll", b"z" * 10_000, tags="A")
        sent[(await producer.send(big)).msg_id] = big
        batch = [Message("PushAll", f"batch-{i}", tags="A") for i in range(5)]
        result = await producer.send_batch(batch)
        for mid, m in zip(result.msg_id.split(","), batch, strict=True):
            sent[mid] = m

        got: dict[str, MessageExt] = {}

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            for m in msgs:
                got[m.msg_id] = m

        consumer = await start_push_consumer(cluster.namesrv_addr, "cg-all", "PushAll", listener, "A || B")
        try:
            await wait_for(lambda: set(got) >= set(sent), 10, "all messages")
        finally:
            await consumer.shutdown()
            await producer.shutdown()
        for mid, m in sent.items():
            assert got[mid].body == m.body
            assert got[mid].tags == m.tags
            assert got[mid].properties.get("n") == m.properties.get("n")
            assert got[mid].keys == m.keys


async def test_three_consumers_share_eight_queues_and_reassign_fast(tmp_path: Path) -> None:
    """3 members on 8 queues: disjoint, complete assignment; reassignment < 1 s on join/leave; nothing lost."""
    async with run_cluster(tmp_path) as cluster:
        addr = cluster.namesrv_addr
        producer = AsyncProducer(namesrv_addr=addr, producer_group="pg3", default_topic_queue_nums=8)
        await producer.start()
        await producer.send(Message("Group8", b"warmup"))
        queues = await producer.fetch_publish_message_queues("Group8")
        assert len(queues) == 8
        received: Counter[bytes] = Counter()

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            for m in msgs:
                received[m.body] += 1

        def member() -> AsyncPushConsumer:
            return push_consumer(addr, "cg8", "Group8", listener)

        def balanced(members: list[AsyncPushConsumer]) -> bool:
            owned = [[q for q in m.assignment() if q.topic == "Group8"] for m in members]
            flat: list[MessageQueue] = [q for o in owned for q in o]
            return len(flat) == 8 and len(set(flat)) == 8 and all(owned)

        sent: list[bytes] = [b"warmup"]
        stop = asyncio.Event()

        async def produce() -> None:
            i = 0
            while not stop.is_set():
                body = f"m-{i}".encode()
                await producer.send(Message("Group8", body))
                sent.append(body)
                i += 1
                await asyncio.sleep(0.002)

        members = [member(), member()]
        for m in members:
            await m.start()
        producing = asyncio.ensure_future(produce())
        try:
            await wait_for(lambda: balanced(members), 5, "two members balanced")
            joiner = member()
            await joiner.start()
            members.append(joiner)
            join_time = await wait_for(lambda: balanced(members), 5, "three members balanced")
            leaver = members.pop(0)
            await leaver.shutdown()
            leave_time = await wait_for(lambda: balanced(members), 5, "two members balanced again")
            produced = len(sent)  # keep producing a while after the leave
            await wait_for(lambda: len(sent) >= produced + 50, 10, "50 more messages after the leave")
            stop.set()
            await producing
            await wait_for(lambda: set(sent) <= set(received), 15, "every message consumed")
        finally:
            stop.set()
            await asyncio.gather(producing, return_exceptions=True)
            for m in members:
                await m.shutdown()
            await producer.shutdown()
        duplicates = sum(n - 1 for n in received.values())
        print(
            f"join reassigned in {join_time:.3f}s, leave in {leave_time:.3f}s; {len(sent)} sent, {duplicates} duplicates"
        )
        assert join_time < 1.0
        assert leave_time < 1.0


@pytest.mark.parametrize("fail_first", [True])
async def test_rejected_message_is_handed_back_and_offsets_advance(tmp_path: Path, fail_first: bool) -> None:
    """RECONSUME_LATER hands the message back (send-back or retry-topic copy); queue offsets still advance."""
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pgr")
        await producer.start()
        for i in range(5):
            await producer.send(Message("RetryT", f"r{i}"))
        seen: Counter[bytes] = Counter()

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                seen[m.body] += 1
            if fail_first and msgs[0].body == b"r2":
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = await start_push_consumer(cluster.namesrv_addr, "cg-r", "RetryT", listener)
        try:
            await wait_for(lambda: len(seen) == 5, 10, "first delivery")
            store = consumer.offset_store
            await wait_for(
                lambda: sum(store.clone_offset_table("RetryT").values()) >= 5, 5, "offsets committed"
            )
        finally:
            await consumer.shutdown()
            await producer.shutdown()
