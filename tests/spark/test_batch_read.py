"""Batch reads return exactly what was produced."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.spark.helpers import create_topic, produce
from tidemq.spark.arrow import ARROW_SCHEMA, SOURCE_SCHEMA_DDL


def _load(spark: Any, namesrv: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("tidemq").option("namesrv", namesrv).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_schema_matches_arrow(spark: Any) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = spark.createDataFrame([], SOURCE_SCHEMA_DDL).schema
    assert to_arrow_schema(schema, timezone="UTC") == ARROW_SCHEMA


def test_batch_read_earliest_to_latest_is_exact(spark: Any, cluster: Any) -> None:
    topic = "SparkBatchExact"
    create_topic(cluster.namesrv_addr, topic, 4)
    sent = produce(cluster.namesrv_addr, topic, 200)
    df = _load(spark, cluster.namesrv_addr, topic)
    assert df.rdd.getNumPartitions() == 1  # 4 small queue ranges (50 each) share one partition
    rows = df.collect()
    assert len(rows) == len(sent)
    got = {(r.queueId, r.queueOffset): r for r in rows}
    for s in sent:
        r = got[(s["queueId"], s["queueOffset"])]
        assert r.body == s["body"] and r.msgId == s["msgId"] and r.tags == s["tags"] and r.keys == s["keys"]
        assert r.topic == topic and r.brokerName == "broker-a" and r.properties["seq"] == s["seq"]
        assert r.storeTimestamp is not None and r.bornTimestamp <= r.storeTimestamp
    # a different partition count does not change the result
    split = _load(spark, cluster.namesrv_addr, topic, minPartitions="10")
    assert split.rdd.getNumPartitions() >= 8
    assert sorted(r.body for r in split.collect()) == sorted(s["body"] for s in sent)


def test_batch_read_json_offset_ranges(spark: Any, cluster: Any) -> None:
    topic = "SparkBatchRanges"
    create_topic(cluster.namesrv_addr, topic, 2)
    sent = produce(cluster.namesrv_addr, topic, 40)  # 20 per queue
    starting = {topic: {"broker-a:0": 5, "broker-a:1": -2}}
    ending = {topic: {"broker-a:0": 8, "broker-a:1": 3}}
    df = _load(
        spark,
        cluster.namesrv_addr,
        topic,
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    )
    got = sorted((r.queueId, r.queueOffset, r.body) for r in df.collect())
    want = sorted(
        (s["queueId"], s["queueOffset"], s["body"])
        for s in sent
        if (s["queueId"] == 0 and 5 <= s["queueOffset"] < 8) or (s["queueId"] == 1 and s["queueOffset"] < 3)  # type: ignore[operator]
    )
    assert got == want and len(got) == 6


def test_tag_filter_and_multiple_topics(spark: Any, cluster: Any) -> None:
    a, b = "SparkTagsA", "SparkTagsB"
    create_topic(cluster.namesrv_addr, a, 2)
    create_topic(cluster.namesrv_addr, b, 1)
    produce(cluster.namesrv_addr, a, 30, tags=["red", "green", "blue"])
    produce(cluster.namesrv_addr, b, 9, tags=["red", "blue", "blue"])
    df = _load(spark, cluster.namesrv_addr, f"{a},{b}", subExpression="red || green")
    rows = df.collect()
    assert {r.tags for r in rows} == {"red", "green"}
    assert sum(1 for r in rows if r.topic == a) == 20
    assert sum(1 for r in rows if r.topic == b) == 3


def test_bad_options_are_clear(spark: Any, cluster: Any) -> None:
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        spark.read.format("tidemq").option("namesrv", cluster.namesrv_addr).load().collect()
    with pytest.raises(Exception, match="startingOffsets must be"):
        _load(spark, cluster.namesrv_addr, "X", startingOffsets="yesterday").collect()
    with pytest.raises(Exception, match="NoSuchTopic"):
        _load(spark, cluster.namesrv_addr, "NoSuchTopic").collect()


def test_given_schema_selects_columns(spark: Any, cluster: Any) -> None:
    """``.schema(...)`` with a subset of the columns reads only those, in that order, batch and stream."""
    topic = "SparkProjection"
    create_topic(cluster.namesrv_addr, topic, 2)
    sent = produce(cluster.namesrv_addr, topic, 30)
    reader = spark.read.format("tidemq").schema("body binary, queueOffset bigint, msgId string")
    df = reader.option("namesrv", cluster.namesrv_addr).option("topic", topic).load()
    assert df.columns == ["body", "queueOffset", "msgId"]
    got = sorted((bytes(r.body), r.queueOffset, r.msgId) for r in df.collect())
    assert got == sorted((s["body"], s["queueOffset"], s["msgId"]) for s in sent)
    stream = (
        spark.readStream.format("tidemq")
        .schema("queueId int")
        .option("namesrv", cluster.namesrv_addr)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    assert stream.columns == ["queueId"]


def test_given_schema_must_be_a_subset_with_the_source_types(spark: Any, cluster: Any) -> None:
    topic = "SparkProjectionBad"
    create_topic(cluster.namesrv_addr, topic, 1)
    produce(cluster.namesrv_addr, topic, 3)

    def read(schema: str, **options: str) -> Any:
        reader = spark.read.format("tidemq").schema(schema).option("namesrv", cluster.namesrv_addr)
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.option("topic", topic).load().collect()

    with pytest.raises(Exception, match=r"value: no such column.*The source's schema is: topic string"):
        read("body binary, value binary")
    with pytest.raises(Exception, match="queueId: string is not the source's type"):
        read("queueId string")
    with pytest.raises(Exception, match="properties: no such column"):
        read("properties map<string,string>", includeHeaders="false")
