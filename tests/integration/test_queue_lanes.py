"""Push consumer queue lanes (``tidemq.client.consumer.queue_lane``) against an in-process broker:
a thread per owned queue pulls and runs a plain-function listener; anything unusual goes back to
the loop's pull path."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path

from tests.helpers import start_push_consumer, wait_for
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.consumer.queue_lane import INLINE_SLOW_S
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import run_cluster


class Recorder:
    """A plain-function listener that counts the bodies it got and names the threads it ran on."""

    def __init__(self) -> None:
        self.got: Counter[bytes] = Counter()
        self.threads: set[str] = set()

    def listener(self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
        self.threads.add(threading.current_thread().name)
        for m in msgs:
            self.got[m.body] += 1


def lane_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("tidemq-lane-") and t.is_alive()]


def lanes_of(consumer: AsyncPushConsumer, topic: str) -> set[int]:
    """Queue ids of ``topic`` that a lane of ``consumer`` pulls."""
    return {mq.queue_id for mq in consumer.kernel.lanes if mq.topic == topic}


async def send(producer: AsyncProducer, topic: str, bodies: list[bytes]) -> None:
    for body in bodies:
        await producer.send(Message(topic, body))


async def test_every_owned_queue_gets_a_lane_and_shutdown_ends_them_during_held_pulls(tmp_path: Path) -> None:
    """8 queues, a plain listener: every message arrives once, each queue is pulled by a lane
    whose thread runs the listener, and shutdown ends the lanes although their pulls are held on
    the broker for 15 s (longer than the shutdown's 10 s)."""
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(
            namesrv_addr=cluster.namesrv_addr, producer_group="pg", default_topic_queue_nums=8
        )
        await producer.start()
        await producer.send(Message("Lanes", b"warmup"))
        rec = Recorder()
        got, threads, listener = rec.got, rec.threads, rec.listener
        consumer = await start_push_consumer(
            cluster.namesrv_addr, "cg-lanes", "Lanes", listener, broker_suspend_max_time=15.0
        )
        try:
            await wait_for(lambda: got[b"warmup"] == 1, 10, "the first message")
            bodies = [f"m-{i}".encode() for i in range(200)]
            await send(producer, "Lanes", bodies)
            await wait_for(lambda: all(got[b] for b in bodies), 10, "every message")
            owned = {mq.queue_id for mq in consumer.assignment() if mq.topic == "Lanes"}
            assert owned == set(range(8))
            await wait_for(lambda: lanes_of(consumer, "Lanes") == owned, 10, "a lane per owned queue")
            assert any(name.startswith("tidemq-lane-Lanes-") for name in threads)
            store = cluster.broker.store
            more = [f"n-{i}".encode() for i in range(80)]  # consumed on the lanes, acknowledged there
            await send(producer, "Lanes", more)
            await wait_for(lambda: all(got[b] for b in more), 10, "the messages consumed on lanes")
            ends = {q: store.get_max_offset_in_queue("Lanes", q) for q in owned}
            table = consumer.offset_store.offset_table
            await wait_for(
                lambda: {mq.queue_id: off for mq, off in table.items() if mq.topic == "Lanes"} == ends,
                10,
                "every queue's offset at its end",
            )
        finally:
            await consumer.shutdown(timeout=10.0)
            await producer.shutdown()
        assert lane_threads() == []
        assert max(got.values()) == 1
        committed = cluster.broker.consumer_offset_manager.query_offset_table("cg-lanes", "Lanes")
        assert committed == ends  # shutdown persisted what the lanes acknowledged: nothing re-read


async def test_lanes_off_consume_through_the_loop(tmp_path: Path) -> None:
    """``queue_lanes=False``: the loop pulls and the pool consumes; nothing is missed."""
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(
            namesrv_addr=cluster.namesrv_addr, producer_group="pg", default_topic_queue_nums=4
        )
        await producer.start()
        bodies = [f"m-{i}".encode() for i in range(100)]
        await send(producer, "NoLanes", bodies)
        rec = Recorder()
        got, threads, listener = rec.got, rec.threads, rec.listener
        consumer = await start_push_consumer(
            cluster.namesrv_addr, "cg-nolanes", "NoLanes", listener, queue_lanes=False
        )
        try:
            await wait_for(lambda: all(got[b] for b in bodies), 10, "every message")
            assert consumer.kernel.lanes == {}
            assert not any(name.startswith("tidemq-lane-") for name in threads)
        finally:
            await consumer.shutdown()
            await producer.shutdown()


async def test_a_broken_lane_connection_hands_the_queue_back_and_nothing_is_lost(tmp_path: Path) -> None:
    """Cutting every lane's connection (as a broker restart would) while messages flow: the queues
    go back to the loop's pull path, lanes start again after the next good pull, and every message
    sent before and after is consumed."""
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(
            namesrv_addr=cluster.namesrv_addr, producer_group="pg", default_topic_queue_nums=4
        )
        await producer.start()
        await producer.send(Message("Broken", b"warmup"))
        got: Counter[bytes] = Counter()

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            for m in msgs:
                got[m.body] += 1

        consumer = await start_push_consumer(
            cluster.namesrv_addr, "cg-broken", "Broken", listener, pull_time_delay_when_exception=0.05
        )
        try:
            first_round = [f"first-{i}".encode() for i in range(8)]  # every queue: a lane starts
            await send(producer, "Broken", first_round)  # after the loop's first good pull
            await wait_for(lambda: lanes_of(consumer, "Broken") == set(range(4)), 10, "a lane per queue")
            before = [f"before-{i}".encode() for i in range(50)]
            await send(producer, "Broken", before)
            first = {mq: lane for mq, lane in consumer.kernel.lanes.items() if mq.topic == "Broken"}
            for lane in first.values():
                conn = lane._conn
                assert conn is not None
                conn.abort()
            await wait_for(
                lambda: not any(lane.thread.is_alive() for lane in first.values()), 10, "old lanes end"
            )
            after = [f"after-{i}".encode() for i in range(50)]
            await send(producer, "Broken", after)
            await wait_for(lambda: all(got[b] for b in first_round + before + after), 10, "every message")
            await wait_for(lambda: lanes_of(consumer, "Broken") == set(range(4)), 10, "lanes again")
            assert all(consumer.kernel.lanes[mq] is not lane for mq, lane in first.items())
        finally:
            await consumer.shutdown()
            await producer.shutdown()


async def test_a_backlog_is_pulled_by_the_loop_and_keeps_to_flow_control(tmp_path: Path) -> None:
    """A backlog and a blocked listener on a one-queue topic: no lane takes a queue with messages
    waiting on the broker; pulling stops once more than ``pull_threshold_for_queue`` messages are
    cached and goes on once they are consumed; a lane takes over when the queue is caught up."""
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(
            namesrv_addr=cluster.namesrv_addr, producer_group="pg", default_topic_queue_nums=1
        )
        await producer.start()
        bodies = [f"m-{i}".encode() for i in range(100)]
        await send(producer, "Slow", bodies)
        release = threading.Event()
        got: Counter[bytes] = Counter()

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            release.wait(30)
            for m in msgs:
                got[m.body] += 1

        consumer = await start_push_consumer(
            cluster.namesrv_addr,
            "cg-slow",
            "Slow",
            listener,
            pull_threshold_for_queue=10,
            pull_batch_size=4,
            consume_thread_max=2,
            consume_thread_min=1,
        )
        try:
            table = consumer.rebalancer.process_queue_table
            await wait_for(lambda: any(mq.topic == "Slow" for mq in table), 10, "the queue assigned")
            (pq,) = [pq for mq, pq in table.items() if mq.topic == "Slow"]
            await wait_for(lambda: pq.msg_count > 10, 10, "the cache past the threshold")
            # not a synchronisation: a window in which the consumer must NOT pull more
            await asyncio.sleep(0.3)
            assert 10 < pq.msg_count <= 10 + 4
            assert lanes_of(consumer, "Slow") == set()
            release.set()
            await wait_for(lambda: all(got[b] for b in bodies), 15, "every message")
            await producer.send(Message("Slow", b"caught-up"))
            await wait_for(lambda: got[b"caught-up"] == 1, 10, "a message after the backlog")
            await wait_for(lambda: lanes_of(consumer, "Slow") == {0}, 10, "a lane once caught up")
        finally:
            release.set()
            await consumer.shutdown()
            await producer.shutdown()


async def test_a_slow_listener_moves_the_lane_to_the_pool(tmp_path: Path) -> None:
    """A listener call on the lane's thread that takes longer than ``INLINE_SLOW_S``: the next
    messages of that queue are consumed by pool threads, so the lane keeps pulling."""
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(
            namesrv_addr=cluster.namesrv_addr, producer_group="pg", default_topic_queue_nums=1
        )
        await producer.start()
        await producer.send(Message("SlowOnce", b"first"))
        threads: dict[bytes, str] = {}
        slow_done = threading.Event()

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            for m in msgs:
                threads[m.body] = threading.current_thread().name
                if m.body == b"slow":
                    slow_done.wait(3 * INLINE_SLOW_S)  # longer than INLINE_SLOW_S, on purpose

        consumer = await start_push_consumer(cluster.namesrv_addr, "cg-slow-once", "SlowOnce", listener)
        try:
            await wait_for(
                lambda: b"first" in threads and lanes_of(consumer, "SlowOnce") == {0}, 10, "a lane"
            )
            await producer.send(Message("SlowOnce", b"slow"))
            await wait_for(lambda: b"slow" in threads, 10, "the slow message")
            assert threads[b"slow"].startswith("tidemq-lane-")
            (lane,) = [lane for mq, lane in consumer.kernel.lanes.items() if mq.topic == "SlowOnce"]
            await wait_for(lambda: lane.inline_after > 0, 10, "the lane to note the slow call")
            await producer.send(Message("SlowOnce", b"after"))
            await wait_for(lambda: b"after" in threads, 10, "the next message")
            assert not threads[b"after"].startswith("tidemq-lane-")
        finally:
            await consumer.shutdown()
            await producer.shutdown()
