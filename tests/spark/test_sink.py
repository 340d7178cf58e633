"""The sink writes DataFrames that a tidemq PullConsumer reads back intact."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import create_topic, produce
from tidemq.client.consumer.pull import PullConsumer
from tidemq.protocol.message import MessageExt, MessageQueue
from tidemq.spark.sink import ROW_KEY_PROPERTY, message_id_for


def _read_back(namesrv: str, mqs: list[MessageQueue], count: int, group: str) -> list[MessageExt]:
    consumer = PullConsumer(
        namesrv_addr=namesrv, consumer_group=group, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.assign(mqs)
    consumer.start()
    got: list[MessageExt] = []
    try:
        for mq in mqs:
            consumer.seek_to_begin(mq)
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            got.extend(consumer.poll(1.0))
    finally:
        consumer.shutdown()
    return got


def test_batch_sink_round_trip(spark: Any, cluster: Any) -> None:
    topic = "SparkSinkOut"
    mqs = create_topic(cluster.namesrv_addr, topic, 2)
    data = [
        (f"row-{i}".encode(), f"tag{i % 3}", f"key{i}", {"n": str(i)}, 1 if i % 5 == 0 else None)
        for i in range(60)
    ]
    df = spark.createDataFrame(
        data, "body binary, tags string, keys string, properties map<string,string>, queueId int"
    ).repartition(3)
    df.write.format("tidemq").option("namesrv", cluster.namesrv_addr).option("topic", topic).mode(
        "append"
    ).save()

    msgs = _read_back(cluster.namesrv_addr, mqs, 60, "sink-check")
    assert len(msgs) == 60
    by_body = {m.body: m for m in msgs}
    for body, tag, key, props, qid in data:
        m = by_body[body]
        assert m.topic == topic and m.tags == tag and m.keys == key and m.properties["n"] == props["n"]
        if qid is not None:
            assert m.queue_id == qid
        row_key = m.properties[ROW_KEY_PROPERTY]
        assert m.msg_id == message_id_for(row_key)
    assert len({m.properties[ROW_KEY_PROPERTY] for m in msgs}) == 60


def test_streaming_sink_from_tidemq_to_tidemq(spark: Any, cluster: Any, tmp_path: Path) -> None:
    src, dst = "SparkPipeIn", "SparkPipeOut"
    create_topic(cluster.namesrv_addr, src, 2)
    create_topic(cluster.namesrv_addr, dst, 2)
    produce(cluster.namesrv_addr, src, 40)
    q = (
        spark.readStream.format("tidemq")
        .option("namesrv", cluster.namesrv_addr)
        .option("topic", src)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("upper(cast(body as string)) as body", "tags")
        .writeStream.format("tidemq")
        .option("namesrv", cluster.namesrv_addr)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    rows = (
        spark.read.format("tidemq")
        .option("namesrv", cluster.namesrv_addr)
        .option("topic", dst)
        .load()
        .collect()
    )
    assert sorted(r.body for r in rows) == sorted(f"M{i}".encode() for i in range(40))
    keys = {r.properties[ROW_KEY_PROPERTY] for r in rows}
    assert len(keys) == 40 and all(k.split(":")[1] == "0" for k in keys)  # one batch, id 0


def test_sink_errors_are_clear(spark: Any, cluster: Any) -> None:
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match="needs a column body"):
        df.write.format("tidemq").option("namesrv", cluster.namesrv_addr).option("topic", "T").mode(
            "append"
        ).save()
    df = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match="topic column or the option topic"):
        df.write.format("tidemq").option("namesrv", cluster.namesrv_addr).mode("append").save()


def test_sink_refusals_are_one_line_in_the_driver(spark: Any, cluster: Any) -> None:
    """Issue 31: an invalid topic name is refused in the driver with one line (not ~220 lines of task
    stderr); a write without a mode and mode overwrite both say to use append."""
    from tidemq.spark import OptionError

    df = spark.createDataFrame([("x",)], "body string")
    writer = df.write.format("tidemq").option("namesrv", cluster.namesrv_addr)
    with pytest.raises(OptionError) as bad:
        writer.option("topic", "bad topic!").mode("append").save()
    assert "not a valid topic name" in str(bad.value) and "\n" not in str(bad.value)
    with pytest.raises(OptionError, match=r'mode\("append"\)') as default:
        df.write.format("tidemq").option("namesrv", cluster.namesrv_addr).option("topic", "T").save()
    assert "Overwrite" in str(default.value) and "\n" not in str(default.value)
    with pytest.raises(OptionError, match=r'Use append: df.write.format\("tidemq"\).mode\("append"\)'):
        df.write.format("tidemq").option("namesrv", cluster.namesrv_addr).option("topic", "T").mode(
            "overwrite"
        ).save()


def test_register_is_silent_when_spark_has_the_format(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second tidemq.spark.register (or one after discovery) does not re-register: no "replaced a
    statically registered data source" line."""
    from pyspark.sql.datasource import DataSourceRegistration

    import tidemq.spark

    calls: list[Any] = []
    monkeypatch.setattr(DataSourceRegistration, "register", lambda self, ds: calls.append(ds))
    tidemq.spark.register(spark)
    assert calls == []
