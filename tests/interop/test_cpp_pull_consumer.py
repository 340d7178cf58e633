"""The real C++ pull consumer reads one queue from offset 0, with and without a tag expression."""

from __future__ import annotations

import pytest

from tests.interop.conftest import Spawn
from tidemq.testing import ClusterThread

pytest.importorskip("rocketmq.client")
pytestmark = pytest.mark.interop


def test_pull_consumer_reads_a_queue_from_offset_zero(cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic = cluster.namesrv_addr, "CppPullTopic"
    # orderly by index: message i goes to queue i % 4; queue 1 gets 1, 5, 9, ...
    args = ["--namesrv", ns, "--topic", topic, "--mode", "orderly", "--shard", "index", "--count", "200"]
    producer = spawn("cpp_producer.py", *args, "--prefix", "p", "--tags", "TagA,TagB,TagC,TagA")
    assert producer.wait_event("done", 60) and producer.wait_exit(15) == 0, producer.describe()
    expected = [f"p-{i}" for i in range(200) if i % 4 == 1]

    common = ["--namesrv", ns, "--group", "CppPullGroup", "--topic", topic]
    puller = spawn("cpp_pull_consumer.py", *common, "--queue-id", "1", "--count", str(len(expected)))
    assert puller.wait_event("done", 40), puller.describe()
    assert puller.wait_exit(15) == 0, puller.describe()
    assert puller.of("queues")[0]["ids"] == [0, 1, 2, 3]
    msgs = puller.of("msg")
    assert [m["body"] for m in msgs] == expected
    assert [m["queue_offset"] for m in msgs] == list(range(len(expected)))
    assert {m["queue_id"] for m in msgs} == {1}
    assert {m["tags"] for m in msgs} == {"TagB"}
    assert puller.of("pull")[0]["min_offset"] == 0

    # a tag expression: queue 0 holds only TagA (i % 4 == 0), so TagB gets nothing from it
    none = spawn("cpp_pull_consumer.py", *common, "--queue-id", "0", "--expression", "TagB", "--until-empty")
    assert none.wait_event("done", 30), none.describe()
    assert none.of("msg") == []
    assert none.of("done")[0]["next_offset"] == 50  # skipped over the 50 TagA messages
