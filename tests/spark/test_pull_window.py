"""The executor's pull loop with several pulls in flight reads exactly its range, also when the broker
answers short (tag filter), whatever the window depth and pull size."""

from __future__ import annotations

from typing import Any

import pytest

from tests.spark.helpers import create_topic, produce
from tidemq.spark.conn import ReadSettings, read_queue_range
from tidemq.spark.offsets import QueueRange

TAGS = ["a", "b", "c"]


@pytest.mark.parametrize("depth", [1, 3])
def test_window_reads_exactly_the_range(cluster: Any, depth: int) -> None:
    topic = f"SparkPullWindow{depth}"
    (mq,) = create_topic(cluster.namesrv_addr, topic, 1)
    sent = produce(cluster.namesrv_addr, topic, 120, tags=TAGS)
    tag_at = {s["queueOffset"]: s["tags"] for s in sent}
    rng = QueueRange(mq, 5, 110, cluster.broker_addr)

    def offsets(expression: str) -> list[int]:
        settings = ReadSettings(
            namesrv=cluster.namesrv_addr,
            group="spark-window-test",
            sub_expression=expression,
            pull_batch_size=7,
            pulls_in_flight=depth,
            columns=("queueOffset", "tags"),
        )
        rows = [row for batch in read_queue_range(rng, settings) for row in batch.to_pylist()]
        assert all(tag_at[r["queueOffset"]] == r["tags"] for r in rows)
        return [r["queueOffset"] for r in rows]

    assert offsets("*") == list(range(5, 110))
    assert offsets("a") == [o for o in range(5, 110) if tag_at[o] == "a"]
    assert offsets("b || c") == [o for o in range(5, 110) if tag_at[o] in ("b", "c")]


def test_a_range_whose_broker_address_is_stale_is_read_from_the_address_resolved_again(cluster: Any) -> None:
    import socket

    topic = "SparkPullMoved"
    (mq,) = create_topic(cluster.namesrv_addr, topic, 1)
    produce(cluster.namesrv_addr, topic, 30)
    with socket.socket() as unused:  # an address nobody listens on
        unused.bind(("127.0.0.1", 0))
        stale = f"127.0.0.1:{unused.getsockname()[1]}"
    settings = ReadSettings(namesrv=cluster.namesrv_addr, group="spark-window-test", columns=("queueOffset",))
    rows = [
        r["queueOffset"]
        for b in read_queue_range(QueueRange(mq, 0, 30, stale), settings)
        for r in b.to_pylist()
    ]
    assert rows == list(range(30))


def test_pull_sockets_are_reused_when_idle_and_closed_when_left_mid_range(cluster: Any) -> None:
    from tidemq.spark.conn import connections

    topic = "SparkPullReuse"
    (mq,) = create_topic(cluster.namesrv_addr, topic, 1)
    produce(cluster.namesrv_addr, topic, 40)
    settings = ReadSettings(
        namesrv=cluster.namesrv_addr, group="spark-window-test", pull_batch_size=5, columns=("queueOffset",)
    )
    pool = connections().extras.setdefault("pull_sockets", {})
    pool.pop(cluster.broker_addr, None)
    rng = QueueRange(mq, 0, 40, cluster.broker_addr)
    assert sum(b.num_rows for b in read_queue_range(rng, settings)) == 40
    (first,) = pool[cluster.broker_addr]
    assert first.idle
    assert sum(b.num_rows for b in read_queue_range(rng, settings)) == 40
    assert pool[cluster.broker_addr] == [first]  # the same connection served the second read

    reader = read_queue_range(rng, settings)
    next(reader)  # pulls still in flight
    assert pool[cluster.broker_addr] == []
    reader.close()
    assert pool[cluster.broker_addr] == []
    assert not first.idle  # closed: its unread answers could never be taken for another request's


def test_a_connection_lost_mid_range_is_replaced_and_no_row_is_read_twice_or_skipped(
    cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tidemq.spark import conn as spark_conn

    topic = "SparkPullBroken"
    (mq,) = create_topic(cluster.namesrv_addr, topic, 1)
    produce(cluster.namesrv_addr, topic, 40)
    opened: list[Any] = []
    real = spark_conn._pull_socket

    def tracked(*args: Any) -> Any:
        opened.append(real(*args))
        return opened[-1]

    monkeypatch.setattr(spark_conn, "_pull_socket", tracked)
    settings = ReadSettings(
        namesrv=cluster.namesrv_addr,
        group="spark-window-test",
        pull_batch_size=5,
        pulls_in_flight=3,
        columns=("queueOffset",),
    )
    rows: list[int] = []
    for batch in read_queue_range(QueueRange(mq, 0, 40, cluster.broker_addr), settings):
        rows += [r["queueOffset"] for r in batch.to_pylist()]
        if len(opened) == 1 and len(rows) >= 10:
            opened[0].abort()  # the broker connection breaks with pulls in flight
    assert rows == list(range(40))
    assert len(opened) == 2 and opened[0].closed
