"""The real C++ producer (librocketmq via ``rocketmq==0.4.4``) against a tidemq broker.

1,000 send_sync + 100 send_oneway + 300 send_orderly (by sharding key), each mode in its own
process; every message must be stored exactly once, orderly keys must stick to one queue in send
order, and a C++ pull consumer must read them back.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers import poll
from tests.interop.conftest import Spawn
from tests.interop.harness import CppProcess, stored_count, stored_messages
from tidemq.testing import ClusterThread, ServeProcess

pytest.importorskip("rocketmq.client")
pytestmark = pytest.mark.interop

TOPIC = "CppSendTopic"


def producer(spawn: Spawn, ns: str, topic: str, mode: str, count: int, *extra: str) -> CppProcess:
    """Start ``cpp_producer.py`` sending ``count`` messages ``<mode>-<i>`` in ``mode``."""
    args = ["--namesrv", ns, "--topic", topic, "--mode", mode, "--count", str(count), "--prefix", mode]
    return spawn("cpp_producer.py", *args, "--group", f"PG_{mode}", *extra, name=f"producer-{mode}")


def test_sync_oneway_orderly_sends_are_all_stored(cluster: ClusterThread, spawn: Spawn) -> None:
    ns = cluster.namesrv_addr
    sync = producer(spawn, ns, TOPIC, "sync", 1000)
    oneway = producer(spawn, ns, TOPIC, "oneway", 100)
    orderly = producer(spawn, ns, TOPIC, "orderly", 300, "--keys", "8")
    for proc in (sync, oneway, orderly):
        assert proc.wait_event("done", 60), proc.describe()
        assert proc.wait_exit(15) == 0, proc.describe()
        assert proc.of("error") == [], proc.describe()

    sync_sent = sync.of("sent")
    assert len(sync_sent) == 1000
    assert all(e["status"] == 0 and e["msg_id"] for e in sync_sent)  # SEND_OK with a message id
    assert len(oneway.of("sent")) == 100
    assert len(orderly.of("sent")) == 300

    # oneway frames may still be in flight when the producer exits: wait for the store
    assert poll(lambda: stored_count(cluster.broker, TOPIC) >= 1400, 15), stored_count(cluster.broker, TOPIC)
    by_queue = stored_messages(cluster.broker, TOPIC)
    bodies = [m.body.decode() for msgs in by_queue.values() for m in msgs]
    assert len(bodies) == 1400
    expected = {f"sync-{i}" for i in range(1000)} | {f"oneway-{i}" for i in range(100)}
    expected |= {f"orderly-{i}" for i in range(300)}
    assert set(bodies) == expected

    # the queue offset each sync send reported is where the message is
    where = {m.body.decode(): (q, m.queue_offset) for q, msgs in by_queue.items() for m in msgs}
    for e in sync_sent[:50]:
        assert where[e["body"]][1] == e["offset"]

    # orderly: one queue per sharding key, in send order
    key_of = {e["body"]: e["key"] for e in orderly.of("sent")}
    queues_of_key: dict[str, set[int]] = defaultdict(set)
    order: dict[str, list[int]] = defaultdict(list)
    for q, msgs in by_queue.items():
        for m in msgs:
            body = m.body.decode()
            if body in key_of:
                queues_of_key[key_of[body]].add(q)
                order[key_of[body]].append(int(body.split("-")[1]))
    assert all(len(qs) == 1 for qs in queues_of_key.values()), queues_of_key
    assert all(seq == sorted(seq) for seq in order.values())


def test_against_tidemq_serve_everything_sent_is_consumed(tmp_path: Path, spawn: Spawn) -> None:
    """The same three send modes against a real ``tidemq serve`` process, checked by consuming."""
    topic, group = "CppServeTopic", "CppServeGroup"
    with ServeProcess(tmp_path / "store") as serve:
        ns = serve.namesrv_addr
        producers = [
            producer(spawn, ns, topic, mode, n)
            for mode, n in (("sync", 1000), ("oneway", 100), ("orderly", 300))
        ]
        for proc in producers:
            assert proc.wait_event("done", 60) and proc.wait_exit(15) == 0, proc.describe()
        consumer = spawn(
            "cpp_push_consumer.py", "--namesrv", ns, "--group", group, "--topic", topic, name="serve-consumer"
        )
        expected = {f"sync-{i}" for i in range(1000)} | {f"oneway-{i}" for i in range(100)}
        expected |= {f"orderly-{i}" for i in range(300)}
        assert consumer.wait_until(lambda p: {m["body"] for m in p.of("msg")} >= expected, 45), (
            consumer.describe() + "\n" + serve.log_tail()
        )
        got = [m["body"] for m in consumer.of("msg")]
        assert set(got) == expected
