"""Retries with delay levels and dead letters, end to end: push consumer -> CONSUMER_SEND_MSG_BACK ->
SCHEDULE_TOPIC_XXXX -> %RETRY%<group> -> consumer again, and %DLQ%<group> after max reconsume times."""

from __future__ import annotations

import time
from pathlib import Path

from tests.helpers import start_push_consumer, wait_for
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.message import Message, MessageExt
from tidemq.protocol.topic import dlq_topic
from tidemq.testing import Cluster, run_cluster

# levels 1..6; retries use 3 + reconsumeTimes: level 3 = 1 s, level 4 = 2 s, level 5 = 1 s
DELAYS = "1s 1s 1s 2s 1s 1s"


def nothing_pending(cluster: Cluster, group: str, delivered: int) -> bool:
    """No delayed message still waits in SCHEDULE_TOPIC_XXXX and the consumer has seen the original
    plus every copy in ``%RETRY%<group>``: no further delivery can come."""
    broker = cluster.broker
    store = broker.store
    schedule = broker.schedule_message_service
    assert schedule is not None
    for level in schedule.delay_table:
        if schedule.offset_table.get(level, 0) < store.get_max_offset_in_queue(
            "SCHEDULE_TOPIC_XXXX", level - 1
        ):
            return False
    retry = f"%RETRY%{group}"
    copies = sum(
        store.get_max_offset_in_queue(retry, q)
        for q in store.consume_queues.topics_and_queues().get(retry, [])
    )
    return delivered == 1 + copies


async def test_message_failed_twice_comes_back_after_level_3_and_4_delays(tmp_path: Path) -> None:
    topic, group = "RetryTopic", "cg-retry"
    async with run_cluster(tmp_path, message_delay_level=DELAYS) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg-retry")
        await producer.start()
        sent = await producer.send(Message(topic, b"flaky", tags="T1", keys=["k-flaky"]))
        seen: list[tuple[MessageExt, float]] = []

        async def listener(
            msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
        ) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                seen.append((m, time.monotonic()))
            return (
                ConsumeConcurrentlyStatus.RECONSUME_LATER
                if len(seen) <= 2
                else ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            )

        consumer = await start_push_consumer(cluster.namesrv_addr, group, topic, listener)
        try:
            await wait_for(lambda: len(seen) >= 3, 20, "the third delivery")
            # nothing more may arrive after a success: no delayed copy is left in the schedule
            # topic and every copy in the retry topic has been delivered (checked below)
            await wait_for(lambda: nothing_pending(cluster, group, len(seen)), 10, "the retry path to drain")
        finally:
            await consumer.shutdown()
            await producer.shutdown()
        assert len(seen) == 3
        msgs = [m for m, _ in seen]
        assert [m.reconsume_times for m in msgs] == [0, 1, 2]
        for m in msgs:
            assert m.body == b"flaky" and m.tags == "T1" and m.keys == "k-flaky"
            assert m.topic == topic  # restored from RETRY_TOPIC
            assert m.msg_id == sent.msg_id  # UNIQ_KEY travels with the retries
        assert msgs[1].properties["ORIGIN_MESSAGE_ID"] == sent.offset_msg_id
        assert msgs[2].properties["ORIGIN_MESSAGE_ID"] == sent.offset_msg_id
        first_gap = seen[1][1] - seen[0][1]
        second_gap = seen[2][1] - seen[1][1]
        assert 0.9 <= first_gap < 1.9, first_gap  # level 3 = 1 s
        assert 1.9 <= second_gap < 2.9, second_gap  # level 4 = 2 s
        # broker-side evidence: the retries went through the schedule topic's level-3 and level-4 queues
        store = cluster.broker.store
        assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1
        assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 3) == 1


async def test_always_failing_message_lands_in_dlq_and_can_be_consumed_there(tmp_path: Path) -> None:
    topic, group = "PoisonTopic", "cg-poison"
    async with run_cluster(tmp_path, message_delay_level=DELAYS) as cluster:
        ns = cluster.namesrv_addr
        producer = AsyncProducer(namesrv_addr=ns, producer_group="pg-poison")
        await producer.start()
        sent = await producer.send(Message(topic, b"poison", tags="P"))
        await producer.send(Message(topic, b"fine", tags="P"))
        attempts: list[int] = []
        fine: list[bytes] = []

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                if m.body == b"poison":
                    attempts.append(m.reconsume_times)
                    raise RuntimeError("cannot handle this one")  # an exception counts as RECONSUME_LATER
                fine.append(m.body)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = await start_push_consumer(ns, group, topic, listener, max_reconsume_times=3)
        dlq = dlq_topic(group)
        store = cluster.broker.store
        try:
            await wait_for(lambda: store.get_max_offset_in_queue(dlq, 0) == 1, 30, "the dead letter")
        finally:
            await consumer.shutdown()
        assert attempts == [0, 1, 2, 3]
        assert fine == [b"fine"]

        dead: list[MessageExt] = []

        async def dlq_listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            dead.extend(msgs)

        reader = await start_push_consumer(ns, "cg-dlq-reader", dlq, dlq_listener)
        try:
            await wait_for(lambda: len(dead) == 1, 20, "the DLQ consumer")
        finally:
            await reader.shutdown()
            await producer.shutdown()
        (m,) = dead
        assert m.body == b"poison" and m.tags == "P"
        assert m.reconsume_times == 4
        assert m.properties["RETRY_TOPIC"] == topic
        assert m.properties["ORIGIN_MESSAGE_ID"] == sent.offset_msg_id
        assert m.msg_id == sent.msg_id
        assert "DELAY" not in m.properties
