"""Streaming: checkpoint restart exactly once, AvailableNow with admission control, group offsets."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tests.helpers import wait_for_sync
from tests.spark.helpers import available_now_into_memory, create_topic, produce, tidemq_stream
from tidemq.admin import AdminClient
from tidemq.spark import attach_offset_committer


def test_stop_and_restart_from_checkpoint_is_exactly_once(spark: Any, cluster: Any, tmp_path: Path) -> None:
    topic = "SparkStreamRestart"
    create_topic(cluster.namesrv_addr, topic, 2)
    sent = produce(cluster.namesrv_addr, topic, 100)
    out = tmp_path / "out"
    out.mkdir()
    checkpoint = str(tmp_path / "checkpoint")

    def sink(batch_df: Any, batch_id: int) -> None:
        rows = [[r.queueId, r.queueOffset, r.body.decode()] for r in batch_df.collect()]
        tmp = out / f".batch-{batch_id}.tmp"
        tmp.write_text(json.dumps(rows))
        tmp.replace(out / f"batch-{batch_id}.json")  # idempotent by batch id

    def start() -> Any:
        df = tidemq_stream(
            spark, cluster.namesrv_addr, topic=topic, startingOffsets="earliest", maxOffsetsPerTrigger="40"
        )
        return (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="100 milliseconds")
            .start()
        )

    def rows_written() -> list[list[Any]]:
        return [row for f in sorted(out.glob("batch-*.json")) for row in json.loads(f.read_text())]

    query = start()
    more: list[dict[str, Any]] = []
    producer = threading.Thread(
        target=lambda: more.extend(produce(cluster.namesrv_addr, topic, 150, start=100))
    )
    producer.start()
    wait_for_sync(lambda: len(rows_written()) >= 120, 60, "the first run to write 120 rows")
    query.stop()
    producer.join(60)
    assert len(rows_written()) < 250, "stop came too late to test a restart mid-stream"
    query = start()
    try:
        wait_for_sync(
            lambda: len({tuple(r) for r in rows_written()}) >= 250, 60, "the restarted run to catch up"
        )
        query.processAllAvailable()
    finally:
        query.stop()
    rows = rows_written()
    expected = sorted([s["queueId"], s["queueOffset"], s["body"].decode()] for s in sent + more)  # type: ignore[attr-defined]
    assert sorted(rows) == expected  # every message exactly once


def test_available_now_with_rate_limit_and_group_commit(spark: Any, cluster: Any, tmp_path: Path) -> None:
    topic, group = "SparkStreamGroup", "spark-etl"
    mqs = create_topic(cluster.namesrv_addr, topic, 3)
    produce(cluster.namesrv_addr, topic, 90)
    committer = attach_offset_committer(spark, namesrv=cluster.namesrv_addr, group=group, topics=[topic])
    try:
        df = tidemq_stream(
            spark,
            cluster.namesrv_addr,
            topic=topic,
            startingOffsets="earliest",
            maxOffsetsPerTrigger="25",
            group=group,
        )
        query = available_now_into_memory(df, "group_run", tmp_path / "cp1")
        assert spark.table("group_run").count() == 90
        batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
        assert len(batches) >= 4  # 90 rows at about 25 per trigger
        assert all(p["numInputRows"] <= 25 + 3 for p in batches)
        assert committer.wait_for({mq: 30 for mq in mqs}, 30), committer.errors
        with AdminClient(cluster.namesrv_addr) as admin:
            stats = admin.examine_consume_stats(group, topic)
            assert stats.compute_total_diff() == 0
            assert {mq: w.consumer_offset for mq, w in stats.offset_table.items()} == {mq: 30 for mq in mqs}
        # resume from the group's offsets: only the new messages
        new = produce(cluster.namesrv_addr, topic, 12, start=90)
        batch = (
            spark.read.format("tidemq")
            .option("namesrv", cluster.namesrv_addr)
            .option("topic", topic)
            .option("group", group)
            .option("startingOffsets", "group")
            .load()
        )
        assert sorted(r.body for r in batch.collect()) == sorted(s["body"] for s in new)  # type: ignore[type-var]
        resumed = tidemq_stream(
            spark, cluster.namesrv_addr, topic=topic, startingOffsets="group", group=group
        )
        available_now_into_memory(resumed, "group_resume", tmp_path / "cp2")
        assert spark.table("group_resume").count() == 12
        assert committer.wait_for({mq: 34 for mq in mqs}, 30), committer.errors
    finally:
        spark.streams.removeListener(committer)
        committer.close()


def test_new_queues_are_picked_up(spark: Any, cluster: Any, tmp_path: Path) -> None:
    topic = "SparkStreamGrow"
    create_topic(cluster.namesrv_addr, topic, 1)
    produce(cluster.namesrv_addr, topic, 5)
    query = (
        tidemq_stream(spark, cluster.namesrv_addr, topic=topic, startingOffsets="earliest")
        .writeStream.format("memory")
        .queryName("grow")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        wait_for_sync(lambda: spark.table("grow").count() == 5, 60, "the first 5 rows")
        with AdminClient(cluster.namesrv_addr) as admin:
            admin.create_topic(topic, 3)
            wait_for_sync(
                lambda: len(admin.fetch_subscribe_message_queues(topic)) == 3, 30, "3 queues in the route"
            )
        produce(cluster.namesrv_addr, topic, 9, start=5)  # 3 land in each queue
        wait_for_sync(lambda: spark.table("grow").count() == 14, 60, "rows of the new queues")
        assert {r.queueId for r in spark.table("grow").collect()} == {0, 1, 2}
    finally:
        query.stop()
