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
