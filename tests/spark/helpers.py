"""Producing test data, reading it back outside Spark, and the tests' stream queries."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tidemq.admin import AdminClient
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageQueue


def create_topic(namesrv: str, topic: str, queues: int = 4) -> list[MessageQueue]:
    """Create ``topic`` and wait until the name server routes it; returns its queues."""
    with AdminClient(namesrv) as admin:
        admin.create_topic(topic, queues)
        admin.wait_for_route(topic)
        mqs = admin.fetch_subscribe_message_queues(topic)
        assert len(mqs) == queues, f"route of {topic} has {len(mqs)} queues, expected {queues}"
        return mqs


def produce(
    namesrv: str, topic: str, count: int, *, start: int = 0, tags: list[str] | None = None
) -> list[dict[str, Any]]:
    """Send ``count`` messages ``m<i>`` round-robin over the queues; returns what was sent, per message."""
    producer = Producer(namesrv_addr=namesrv, producer_group="spark-test-producer")
    producer.start()
    sent: list[dict[str, Any]] = []
    try:
        mqs = sorted(producer.fetch_publish_message_queues(topic))
        for i in range(start, start + count):
            tag = tags[i % len(tags)] if tags else "t"
            msg = Message(topic, f"m{i}".encode(), tags=tag, keys=f"k{i}", properties={"seq": str(i)})
            r = producer.send(msg, queue=mqs[i % len(mqs)])
            sent.append(
                {
                    "body": msg.body,
                    "queueId": r.message_queue.queue_id,
                    "queueOffset": r.queue_offset,
                    "msgId": r.msg_id,
                    "tags": tag,
                    "keys": f"k{i}",
                    "seq": str(i),
                }
            )
    finally:
        producer.shutdown()
    return sent


def path_without_java(bin_dir: Path) -> str:
    """A PATH of one directory that links every program of the current PATH except ``java``."""
    bin_dir.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            link = bin_dir / name
            if name != "java" and not link.exists():
                link.symlink_to(Path(d) / name)
    return str(bin_dir)


def tidemq_stream(spark: Any, namesrv: str, **options: str) -> Any:
    """``spark.readStream.format("tidemq")`` from ``namesrv`` with ``options``, loaded."""
    reader = spark.readStream.format("tidemq").option("namesrv", namesrv)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def available_now_into_memory(df: Any, name: str, checkpoint: Path) -> Any:
    """Run the streaming ``df`` into the memory table ``name`` with ``Trigger.AvailableNow`` until it
    ends (at most 120 s); returns the query."""
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    return query
