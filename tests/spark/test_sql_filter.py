"""The Spark source's ``sql`` option: the broker filters by message properties (SQL92)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.spark.helpers import create_topic, produce
from tidemq.spark.options import OptionError, SourceOptions


def _read(spark: Any, namesrv: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("tidemq").option("namesrv", namesrv).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.option("startingOffsets", "earliest").load()


def test_sql_option_reads_only_matching_messages(spark: Any, cluster: Any) -> None:
    topic = "SparkSql"
    create_topic(cluster.namesrv_addr, topic, 2)
    produce(cluster.namesrv_addr, topic, 30)  # property seq = 0..29
    rows = _read(spark, cluster.namesrv_addr, topic, sql="seq >= 25 OR seq IN ('3', '7')").collect()
    assert sorted(int(r.properties["seq"]) for r in rows) == [3, 7, 25, 26, 27, 28, 29]


def test_sql_option_is_checked_before_the_query_runs() -> None:
    base = {"namesrv": "127.0.0.1:9876", "subscribe": "T"}
    assert SourceOptions.parse(base | {"sql": "a > 5"}).sql == "a > 5"
    with pytest.raises(OptionError, match=r"option sql: Invalid MessageSelector\..*column 4"):
        SourceOptions.parse(base | {"sql": "a > "})
    with pytest.raises(OptionError, match="cannot be combined"):
        SourceOptions.parse(base | {"sql": "a > 5", "subExpression": "tagA"})
