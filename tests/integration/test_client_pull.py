"""Lite PullConsumer: assign/subscribe, poll, commit, committed, seek."""

from __future__ import annotations

import time
from pathlib import Path

from tidemq.client.consumer.pull import PullConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.testing import ClusterThread


def poll_until(consumer: PullConsumer, n: int, timeout: float) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += consumer.poll(0.2)
    return got


def one_filled_queue(
    cluster: ClusterThread, topic: str, n: int, suffix: str, **consumer_options: object
) -> tuple[Producer, PullConsumer, MessageQueue]:
    """A started producer that put ``m0`` .. ``m<n-1>`` on one queue of ``topic``, and a started
    PullConsumer (group ``pcg<suffix>``, from the first offset, no auto-commit) assigned that queue."""
    producer = Producer(namesrv_addr=cluster.namesrv_addr, producer_group=f"ppg{suffix}")
    producer.start()
    q = producer.send(Message(topic, b"m0")).message_queue
    producer.send_batch([Message(topic, f"m{i}") for i in range(1, n)], queue=q)
    consumer = PullConsumer(
        namesrv_addr=cluster.namesrv_addr,
        consumer_group=f"pcg{suffix}",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        auto_commit=False,
        **consumer_options,
    )
    consumer.assign([q])
    consumer.start()
    return producer, consumer, q


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


def test_commit_sync_sends_only_changed_queues(tmp_path: Path) -> None:
    """commit_sync sends one UPDATE_CONSUMER_OFFSET per queue consumed from since the last commit;
    with nothing new consumed it sends none, and the broker holds what was committed."""
    with ClusterThread(tmp_path) as cluster:
        addr = cluster.namesrv_addr
        producer = Producer(namesrv_addr=addr, producer_group="ppg3")
        producer.start()
        q0 = producer.send(Message("PullC", b"first")).message_queue
        queues = producer.fetch_publish_message_queues("PullC")
        q1 = next(q for q in queues if q != q0)
        for i in range(4):
            producer.send(Message("PullC", f"a{i}"), queue=q0)
        consumer = PullConsumer(
            namesrv_addr=addr,
            consumer_group="pcg3",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            auto_commit=False,
        )
        consumer.assign(queues)
        consumer.start()
        api = consumer.core.instance.api
        sent: list[tuple[str, int]] = []
        real_build = api.build_update_consumer_offset_request

        def spy(group: str, mq: MessageQueue, offset: int, **kw: bool) -> RemotingCommand:
            # every UPDATE_CONSUMER_OFFSET is built here (on the loop or on the committing thread)
            sent.append((str(mq), offset))
            return real_build(group, mq, offset, **kw)

        api.build_update_consumer_offset_request = spy  # type: ignore[method-assign]
        try:
            assert len(poll_until(consumer, 5, 10)) == 5
            consumer.commit_sync()
            assert [off for _, off in sent] == [5]
            assert consumer.committed(q0) == 5
            consumer.commit_sync()  # nothing new consumed
            assert len(sent) == 1
            producer.send(Message("PullC", b"b"), queue=q1)
            assert len(poll_until(consumer, 1, 10)) == 1
            consumer.commit_sync()
            assert [off for _, off in sent] == [5, 1]
            assert consumer.committed(q1) == 1
        finally:
            consumer.shutdown()
            producer.shutdown()


def test_pull_consumer_tag_filter_and_pulled_fields(tmp_path: Path) -> None:
    """A tag subscription polls only its tag; polled messages carry the broker name and the
    queue's MIN_OFFSET / MAX_OFFSET as pulled, and commit stores the offset after the last one."""
    with ClusterThread(tmp_path) as cluster:
        addr = cluster.namesrv_addr
        producer = Producer(namesrv_addr=addr, producer_group="ppg4")
        producer.start()
        q = producer.send(Message("PullTag", b"a0", tags="TagA")).message_queue
        for i in range(1, 8):
            producer.send(
                Message("PullTag", f"{'a' if i % 2 == 0 else 'b'}{i}", tags="TagA" if i % 2 == 0 else "TagB"),
                queue=q,
            )
        consumer = PullConsumer(
            namesrv_addr=addr, consumer_group="pcg4", consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        consumer.subscribe("PullTag", "TagA")
        consumer.start()
        try:
            got = poll_until(consumer, 4, 10)
            mine = [m for m in got if m.queue_id == q.queue_id]
            assert [m.body for m in mine] == [b"a0", b"a2", b"a4", b"a6"]
            assert {m.tags for m in got} == {"TagA"}
            assert {m.broker_name for m in mine} == {q.broker_name}
            assert {(m.properties["MIN_OFFSET"], m.properties["MAX_OFFSET"]) for m in mine} == {("0", "8")}
            consumer.commit_sync()
            assert consumer.committed(q) == 7
        finally:
            consumer.shutdown()
            producer.shutdown()


def test_poll_after_commit_keeps_order_and_seek_drops_the_batch_decoded_meanwhile(tmp_path: Path) -> None:
    """commit_sync decodes the next batch while the broker answers: polls still return every
    offset once and in order, the committed offset is exactly after what was polled, and a seek
    right after a commit discards the batch decoded for the old position."""
    with ClusterThread(tmp_path) as cluster:
        producer, consumer, q = one_filled_queue(cluster, "PullPre", 60, "5", pull_batch_size=8)
        try:
            got: list[int] = []
            deadline = time.monotonic() + 10
            while len(got) < 40 and time.monotonic() < deadline:
                got += [m.queue_offset for m in consumer.poll(0.2)]
                consumer.commit_sync()
                assert consumer.committed(q) == (got[-1] + 1 if got else -1)
            assert got == list(range(len(got))) and len(got) >= 40
            consumer.seek(q, 3)
            again = poll_until(consumer, 5, 10)
            assert [m.queue_offset for m in again][:5] == [3, 4, 5, 6, 7]
        finally:
            consumer.shutdown()
            producer.shutdown()


def test_poll_commit_loop_over_queues_refilled_along_commits(tmp_path: Path) -> None:
    """With a small prefetch per queue, commit_sync sends the next pulls with the offsets: every
    message of every queue still comes once and in queue order, commits land on the broker, and a
    seek in the middle replays from the new position."""
    with ClusterThread(tmp_path) as cluster:
        addr = cluster.namesrv_addr
        producer = Producer(namesrv_addr=addr, producer_group="ppg6", default_topic_queue_nums=4)
        producer.start()
        producer.send(Message("PullAlong", b"warm"))
        queues = sorted(producer.fetch_publish_message_queues("PullAlong"))
        for q in queues:
            producer.send_batch([Message("PullAlong", f"{q.queue_id}-{i}") for i in range(60)], queue=q)
        consumer = PullConsumer(
            namesrv_addr=addr,
            consumer_group="pcg6",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            auto_commit=False,
            pull_batch_size=8,
            pull_threshold_for_queue=8,
        )
        consumer.subscribe("PullAlong")
        consumer.start()
        try:
            seen: dict[int, list[int]] = {q.queue_id: [] for q in queues}
            deadline = time.monotonic() + 20
            while sum(map(len, seen.values())) < 4 * 60 + 1 and time.monotonic() < deadline:
                for m in consumer.poll(0.2):
                    seen[m.queue_id].append(m.queue_offset)
                consumer.commit_sync()
            for q in queues:
                count = len(seen[q.queue_id])
                assert seen[q.queue_id] == list(range(count)), q
                assert consumer.committed(q) == count
            assert sum(map(len, seen.values())) == 4 * 60 + 1
            q = queues[0]
            consumer.seek(q, 5)
            again: list[int] = []
            deadline = time.monotonic() + 10
            while len(again) < 10 and time.monotonic() < deadline:
                again += [m.queue_offset for m in consumer.poll(0.2) if m.queue_id == q.queue_id]
                consumer.commit_sync()
            assert again[:10] == list(range(5, 15))
        finally:
            consumer.shutdown()
            producer.shutdown()


def test_polls_without_commits_after_a_commit_still_get_everything(tmp_path: Path) -> None:
    """A pull sent along a commit is answered even when no commit follows: polls alone still
    receive every message in order."""
    with ClusterThread(tmp_path) as cluster:
        producer, consumer, _q = one_filled_queue(
            cluster, "PullOnce", 100, "7", pull_batch_size=4, pull_threshold_for_queue=4
        )
        try:
            got = [m.queue_offset for m in poll_until(consumer, 1, 10)]
            consumer.commit_sync()
            got += [m.queue_offset for m in poll_until(consumer, 100 - len(got), 20)]
            assert got == list(range(100))
        finally:
            consumer.shutdown()
            producer.shutdown()
