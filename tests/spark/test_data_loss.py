"""failOnDataLoss both ways, after the broker's retention deleted the head of a queue."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import SPARK_BROKER
from tests.spark.helpers import create_topic, produce
from tidemq.admin import AdminClient
from tidemq.protocol.message import MessageQueue
from tidemq.testing import ClusterThread


@pytest.fixture
def small_segments(tmp_path: Path) -> Iterator[ClusterThread]:
    """A broker with 4 KiB commit-log segments and no retention period: retention deletes at once."""
    with ClusterThread(tmp_path, mapped_file_size_commit_log=4096, file_reserved_time=0, **SPARK_BROKER) as c:
        yield c


def _read(spark: Any, namesrv: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("tidemq").option("namesrv", namesrv).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_fail_on_data_loss_both_ways(spark: Any, small_segments: ClusterThread, tmp_path: Path) -> None:
    namesrv, topic = small_segments.namesrv_addr, "SparkDataLoss"
    create_topic(namesrv, topic, 1)
    mq = MessageQueue(topic, "broker-a", 0)
    produce(namesrv, topic, 10)
    seen: list[int] = []

    def collect(batch_df: Any, batch_id: int) -> None:
        seen.extend(r.queueOffset for r in batch_df.collect())

    # a stream consumes the first 10 and checkpoints; more arrive; retention removes the queue's head
    checkpoint = str(tmp_path / "cp")
    q = (
        spark.readStream.format("tidemq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None and sorted(seen) == list(range(10))
    produce(namesrv, topic, 140, start=10)
    with AdminClient(namesrv) as admin:
        admin.delete_expired_commitlog()
        low, high = admin.min_offset(mq), admin.max_offset(mq)
    assert 10 < low < high == 150, (low, high)

    start_at_zero = json.dumps({topic: {"broker-a:0": 0}})
    with pytest.raises(Exception) as failure:
        _read(spark, namesrv, topic, startingOffsets=start_at_zero).collect()
    text = str(failure.value)
    assert f"data loss in queue {topic}/broker-a:0" in text and f"offsets [0, {low})" in text
    assert "failOnDataLoss=false" in text

    rows = _read(spark, namesrv, topic, startingOffsets=start_at_zero, failOnDataLoss="false").collect()
    assert sorted(r.queueOffset for r in rows) == list(range(low, high))
    assert all(r.body == f"m{r.queueOffset}".encode() for r in rows)

    # the restarted stream resumes at offset 10, which is gone: both ways again
    def restart(fail: str) -> Any:
        return (
            spark.readStream.format("tidemq")
            .option("namesrv", namesrv)
            .option("topic", topic)
            .option("failOnDataLoss", fail)
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )

    failing = restart("true")
    with pytest.raises(Exception, match="data loss in queue"):
        failing.awaitTermination(120)
    del seen[:]
    skipping = restart("false")
    skipping.awaitTermination(120)
    assert skipping.exception() is None
    assert sorted(seen) == list(range(low, high))
