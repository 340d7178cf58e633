"""Kafka-source parity on a real broker: subscribePattern, assign, timestamps, trigger limits,
includeHeaders, empty reads and the sink's save modes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMinRows

from tests.helpers import wait_for_sync as wait_until
from tests.spark.helpers import available_now_into_memory, create_topic, produce, tidemq_stream
from tidemq.spark.arrow import SOURCE_SCHEMA_DDL, SOURCE_SCHEMA_DDL_NO_PROPERTIES
from tidemq.spark.options import SourceOptions
from tidemq.spark.source import TideMQStreamReader


def _read(spark: Any, namesrv: str, **options: str) -> Any:
    reader = spark.read.format("tidemq").option("namesrv", namesrv)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _bodies(df: Any) -> set[bytes]:
    return {bytes(r.body) for r in df.select("body").collect()}


def _now_ms() -> int:
    return int(time.time() * 1000)


def test_misspelt_option_fails_in_spark(spark: Any, cluster: Any) -> None:
    with pytest.raises(Exception, match=r"unknown option\(s\) for the tidemq source: startingoffset"):
        _read(spark, cluster.namesrv_addr, subscribe="Whatever", startingOffset="earliest").collect()


def test_subscribe_pattern_and_assign(spark: Any, cluster: Any) -> None:
    ns = cluster.namesrv_addr
    for topic, n in (("PatOrders1", 4), ("PatOrders2", 6), ("PatOther", 5)):
        create_topic(ns, topic, 2)
        produce(ns, topic, n)
    df = _read(spark, ns, subscribePattern=r"PatOrders\d")
    counts = {r.topic: r.n for r in df.groupBy("topic").count().withColumnRenamed("count", "n").collect()}
    assert counts == {"PatOrders1": 4, "PatOrders2": 6}

    mqs = create_topic(ns, "AssignMe", 4)
    sent = produce(ns, "AssignMe", 12)
    broker = mqs[0].broker_name
    df = _read(spark, ns, assign=f'{{"AssignMe": [1, "{broker}:3"]}}')
    assert sorted((r.queueId, r.queueOffset) for r in df.collect()) == sorted(
        (s["queueId"], s["queueOffset"]) for s in sent if s["queueId"] in (1, 3)
    )
    with pytest.raises(Exception, match="has no queue 7"):
        _read(spark, ns, assign='{"AssignMe": [7]}').collect()


def test_subscribe_pattern_stream_picks_up_new_topics(cluster: Any) -> None:
    ns = cluster.namesrv_addr
    create_topic(ns, "GrowTopic1", 2)
    produce(ns, "GrowTopic1", 4)
    reader = TideMQStreamReader(
        SourceOptions.parse({"namesrv": ns, "subscribepattern": "GrowTopic.*", "startingoffsets": "earliest"})
    )
    try:
        start = reader.initialOffset()
        assert sum(start["GrowTopic1"].values()) == 0
        create_topic(ns, "GrowTopic2", 2)
        produce(ns, "GrowTopic2", 3)
        ends: dict[str, Any] = {}

        def sees_new_topic() -> bool:
            ends.update(reader.latestOffset(start, ReadAllAvailable()))
            return sum(ends.get("GrowTopic2", {}).values()) == 3

        wait_until(sees_new_topic, 30, "the stream to list GrowTopic2")
        assert sum(ends["GrowTopic1"].values()) == 4
        parts = reader.partitions(start, ends)
        assert (
            sum(r.size for p in parts for r in p.ranges) == 7
        )  # the new topic's queues start at their min offset
    finally:
        reader.stop()


def test_timestamps_first_message_at_or_after(spark: Any, cluster: Any) -> None:
    ns, topic = cluster.namesrv_addr, "SparkTimes"
    mqs = create_topic(ns, topic, 2)
    before = produce(ns, topic, 8)
    cut = _now_ms()
    wait_until(lambda: _now_ms() > cut + 1, 5, "the clock to pass the cut")
    after = produce(ns, topic, 6, start=8)
    old = {s["body"] for s in before}
    new = {s["body"] for s in after}

    assert _bodies(_read(spark, ns, subscribe=topic, startingTimestamp=str(cut + 1))) == new
    assert _bodies(_read(spark, ns, subscribe=topic, endingTimestamp=str(cut + 1))) == old
    future = _read(spark, ns, subscribe=topic, startingTimestamp=str(_now_ms() + 3_600_000))
    assert future.count() == 0  # RocketMQ's search answers the last message here; nothing is newer
    q0 = f"{mqs[0].broker_name}:{mqs[0].queue_id}"
    df = _read(spark, ns, subscribe=topic, startingOffsetsByTimestamp=f'{{"{topic}": {{"{q0}": {cut + 1}}}}}')
    want = {s["body"] for s in after if s["queueId"] == mqs[0].queue_id} | {
        s["body"] for s in before + after if s["queueId"] != mqs[0].queue_id
    }
    assert _bodies(df) == want


def test_min_offsets_per_trigger_and_max_trigger_delay(cluster: Any) -> None:
    ns, topic = cluster.namesrv_addr, "SparkMinRows"
    create_topic(ns, topic, 2)
    produce(ns, topic, 3)

    def reader(delay: str) -> TideMQStreamReader:
        return TideMQStreamReader(
            SourceOptions.parse(
                {
                    "namesrv": ns,
                    "subscribe": topic,
                    "startingoffsets": "earliest",
                    "minoffsetspertrigger": "5",
                    "maxtriggerdelay": delay,
                }
            )
        )

    patient = reader("1h")
    try:
        start = patient.initialOffset()
        assert patient.getDefaultReadLimit() == ReadMinRows(5)
        assert patient.latestOffset(start, ReadMinRows(5)) == start  # 3 < 5: no batch yet
        produce(ns, topic, 3, start=3)
        end = patient.latestOffset(start, ReadMinRows(5))
        assert sum(end[topic].values()) == 6
    finally:
        patient.stop()
    produce(ns, topic, 2, start=6)  # 2 new messages after offset 6, fewer than 5
    hasty = reader("300ms")
    try:
        begin = {topic: dict(end[topic])}
        hasty._last_batch_at = time.monotonic()
        assert hasty.latestOffset(begin, ReadMinRows(5)) == begin
        ends: list[Any] = []
        wait_until(
            lambda: ends.append(hasty.latestOffset(begin, ReadMinRows(5))) or ends[-1] != begin,
            10,
            "maxTriggerDelay to release the small batch",
        )
        assert sum(ends[-1][topic].values()) == 8
    finally:
        hasty.stop()


def test_include_headers_false_drops_properties(spark: Any, cluster: Any) -> None:
    ns, topic = cluster.namesrv_addr, "SparkNoHeaders"
    create_topic(ns, topic, 1)
    produce(ns, topic, 3)
    df = _read(spark, ns, subscribe=topic, includeHeaders="false")
    assert df.schema == spark.createDataFrame([], SOURCE_SCHEMA_DDL_NO_PROPERTIES).schema
    assert sorted(r.keys for r in df.collect()) == ["k0", "k1", "k2"]


def test_empty_reads_return_the_schema(spark: Any, cluster: Any, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    create_topic(ns, "SparkEmpty", 2)
    create_topic(ns, "SparkNotEmpty", 2)
    produce(ns, "SparkNotEmpty", 4)
    schema = spark.createDataFrame([], SOURCE_SCHEMA_DDL).schema
    for df in (
        _read(spark, ns, subscribe="SparkEmpty"),
        _read(spark, ns, subscribe="SparkNotEmpty", startingOffsets="latest"),
    ):
        assert df.schema == schema
        assert df.collect() == []
    df = tidemq_stream(spark, ns, subscribe="SparkEmpty", startingOffsets="earliest")
    query = available_now_into_memory(df, "tidemq_empty_stream", tmp_path / "chk")
    assert query.exception() is None
    out = spark.table("tidemq_empty_stream")
    assert out.schema == schema and out.count() == 0


def test_sink_refuses_every_save_mode_but_append(spark: Any, cluster: Any) -> None:
    ns = cluster.namesrv_addr
    create_topic(ns, "SparkModes", 1)
    df = spark.createDataFrame([("x",)], "body string")
    writer = df.write.format("tidemq").option("namesrv", ns).option("topic", "SparkModes")
    with pytest.raises(Exception, match="save mode overwrite is not allowed for the tidemq sink"):
        writer.mode("overwrite").save()
    for mode in ("errorifexists", "ignore"):
        with pytest.raises(Exception, match=r"(?i)append"):
            writer.mode(mode).save()
    writer.mode("append").save()
    assert _read(spark, ns, subscribe="SparkModes").count() == 1
