"""Lite PullConsumer: assign/subscribe, poll, commit, committed, seek."""

from __future__ import annotations

import time
from pathlib import Path

from tidemq.client.consumer.pull import PullConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ClusterThread


def poll_until(consumer: PullConsumer, n: int, timeout: float) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += consumer.poll(0.2)
    return got


def test_pull_consumer_poll_commit_seek(tmp_path: Path) -> None:
    """Poll returns every message once; commit stores the offset; seek_to_begin replays; seek_to_end skips."""
    with ClusterThread(tmp_path) as cluster:
        addr = cluster.namesrv_addr
        producer = Producer(namesrv_addr=addr, producer_group="ppg")
        producer.start()
        q = producer.send(Message("PullT", b"first")).message_queue
        for i in range(9):
            producer.send(Message("PullT", f"m{i}"), queue=q)
        consumer = PullConsumer(
            namesrv_addr=addr,
            consumer_group="pcg",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            auto_commit=False,
        )
        consumer.assign([q])
        consumer.start()
        try:
            got = poll_until(consumer, 10, 10)
            assert [m.queue_offset for m in got] == list(range(10))
            consumer.commit_sync()
            assert consumer.committed(q) == 10
            consumer.seek_to_begin(q)
            again = poll_until(consumer, 10, 10)
            assert [m.body for m in again] == [m.body for m in got]
            consumer.seek(q, 7)
            assert [m.queue_offset for m in poll_until(consumer, 3, 10)] == [7, 8, 9]
            consumer.seek_to_end(q)
            producer.send(Message("PullT", b"late"), queue=q)
            assert [m.body for m in poll_until(consumer, 1, 10)] == [b"late"]
            assert consumer.offset_for_timestamp(q, 0) == 0
        finally:
            consumer.shutdown()
            producer.shutdown()


def test_pull_consumer_subscribe_gets_all_queues(tmp_path: Path) -> None:
    """A single subscribed member owns every queue via rebalance and polls everything."""
    with ClusterThread(tmp_path) as cluster:
        addr = cluster.namesrv_addr
        producer = Producer(namesrv_addr=addr, producer_group="ppg2")
        producer.start()
        bodies = {f"s{i}".encode() for i in range(12)}
        for b in sorted(bodies):
            producer.send(Message("PullSub", b))
        consumer = PullConsumer(
            namesrv_addr=addr, consumer_group="pcg2", consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        consumer.subscribe("PullSub")
        consumer.start()
        try:
            assert {m.body for m in poll_until(consumer, 12, 10)} == bodies
            assert len(consumer.assignment()) == 4
        finally:
            consumer.shutdown()
            producer.shutdown()
