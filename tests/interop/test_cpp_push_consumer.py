"""Real C++ push consumers against a tidemq broker: clustering, broadcasting, tag filtering.

Each consumer runs in its own process. Before the measured messages are sent, "warm-up" rounds
(one message per queue) are sent until the group has settled: that waits on an observable
condition instead of sleeping through the C++ client's rebalance timers.
"""

from __future__ import annotations

import functools
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers import poll
from tests.interop.conftest import Spawn
from tests.interop.harness import CppProcess, group_client_ids
from tidemq.testing import ClusterThread

pytest.importorskip("rocketmq.client")
pytestmark = pytest.mark.interop

QUEUES = 4  # default queue count of auto-created topics


class Driver:
    """A C++ producer kept running and fed JSON batches on stdin (``cpp_producer.py --stdin``)."""

    def __init__(self, spawn: Spawn, ns: str, topic: str) -> None:
        self.proc = spawn(
            "cpp_producer.py", "--namesrv", ns, "--topic", topic, "--stdin", name="driver", stdin=True
        )
        self.batches = 0

    def send(self, **batch: Any) -> list[dict[str, Any]]:
        """Send one batch (``mode``, ``count``, ``prefix``, ``tags``, ``shard``); returns its ``sent`` events."""
        before = len(self.proc.of("sent"))
        self.proc.send_line(json.dumps(batch))
        self.batches += 1
        assert self.proc.wait_event("done", 60, n=self.batches), self.proc.describe()
        assert self.proc.of("done")[-1]["failed"] == 0, self.proc.describe()
        return self.proc.of("sent")[before:]


def push_consumer(spawn: Spawn, ns: str, group: str, topic: str, *extra: str, name: str) -> CppProcess:
    """Start ``cpp_push_consumer.py`` for ``group`` on ``topic`` with ``extra`` options."""
    return spawn(
        "cpp_push_consumer.py", "--namesrv", ns, "--group", group, "--topic", topic, *extra, name=name
    )


def bodies(proc: CppProcess, prefix: str) -> list[str]:
    return [m["body"] for m in proc.of("msg") if m["body"].startswith(prefix + "-")]


def warm_up(driver: Driver, consumers: list[CppProcess], settled: Callable[[str], bool]) -> int:
    """Send rounds of one message per queue until ``settled(round_prefix)`` holds; returns the rounds.

    Each round gets up to 5 s; the whole warm-up up to 40 s.
    """
    deadline = time.monotonic() + 40.0
    rounds = 0
    while time.monotonic() < deadline:
        rounds += 1
        prefix = f"warm{rounds}"
        driver.send(mode="orderly", shard="index", count=QUEUES, prefix=prefix, tags="Warm")
        if poll(functools.partial(settled, prefix), 5.0):
            return rounds
    raise AssertionError("consumers did not settle in 40 s: " + " | ".join(c.describe() for c in consumers))


def test_clustering_group_of_two_gets_each_message_once(cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic, group = cluster.namesrv_addr, "CppClusterTopic", "CppClusterGroup"
    driver = Driver(spawn, ns, topic)
    driver.send(mode="sync", count=QUEUES, prefix="create")  # auto-creates the topic (4 queues)
    members = [
        push_consumer(spawn, ns, group, topic, "--model", "clustering", "--duration", "90", name=f"member{i}")
        for i in range(2)
    ]
    assert poll(lambda: len(group_client_ids(cluster.broker, group)) == 2, 30), group_client_ids(
        cluster.broker, group
    )

    def settled(prefix: str) -> bool:
        # every queue of the round delivered exactly once, and both members own queues
        got = [bodies(m, prefix) for m in members]
        all_bodies = [b for g in got for b in g]
        return sorted(all_bodies) == sorted(f"{prefix}-{i}" for i in range(QUEUES)) and all(got)

    warm_up(driver, members, settled)

    sent = driver.send(mode="sync", count=400, prefix="main")
    assert len(sent) == 400
    assert poll(lambda: sum(len(bodies(m, "main")) for m in members) >= 400, 30), [
        m.describe() for m in members
    ]
    received = Counter(b for m in members for b in bodies(m, "main"))
    assert set(received) == {f"main-{i}" for i in range(400)}
    assert max(received.values()) == 1, [b for b, n in received.items() if n > 1][:10]
    # each queue consumed by exactly one member, and both members took part
    owners: dict[int, set[str]] = defaultdict(set)
    for m in members:
        for msg in m.of("msg"):
            if msg["body"].startswith("main-"):
                owners[msg["queue_id"]].add(m.name)
    assert sorted(owners) == list(range(QUEUES))
    assert all(len(o) == 1 for o in owners.values()), owners
    assert {n for o in owners.values() for n in o} == {"member0", "member1"}


def test_broadcasting_consumers_each_get_every_message(cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic, group = cluster.namesrv_addr, "CppBroadcastTopic", "CppBroadcastGroup"
    driver = Driver(spawn, ns, topic)
    driver.send(mode="sync", count=QUEUES, prefix="create")
    members = [
        push_consumer(
            spawn, ns, group, topic, "--model", "broadcasting", "--duration", "90", name=f"bcast{i}"
        )
        for i in range(2)
    ]
    assert poll(lambda: len(group_client_ids(cluster.broker, group)) == 2, 30)

    def settled(prefix: str) -> bool:
        want = sorted(f"{prefix}-{i}" for i in range(QUEUES))
        return all(sorted(bodies(m, prefix)) == want for m in members)

    warm_up(driver, members, settled)
    driver.send(mode="sync", count=300, prefix="main")
    want = {f"main-{i}" for i in range(300)}
    for m in members:
        assert m.wait_until(lambda p: len(bodies(p, "main")) >= 300, 30), m.describe()
        got = Counter(bodies(m, "main"))
        assert set(got) == want
        assert max(got.values()) == 1


def test_tag_expression_gets_only_those_tags(cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic, group = cluster.namesrv_addr, "CppTagTopic", "CppTagGroup"
    driver = Driver(spawn, ns, topic)
    # produced before the group exists: a new group on a young topic starts at offset 0
    sent = driver.send(mode="sync", count=200, prefix="t", tags="TagA,TagB,TagC,-")
    consumer = push_consumer(
        spawn, ns, group, topic, "--expression", "TagA || TagB", "--duration", "60", name="tagged"
    )
    wanted = {e["body"] for e in sent if e["tag"] in ("TagA", "TagB")}
    assert len(wanted) == 100
    assert consumer.wait_until(lambda p: set(bodies(p, "t")) >= wanted, 30), consumer.describe()
    # a TagA end marker on every queue: anything unwanted would have arrived before it
    driver.send(mode="orderly", shard="index", count=QUEUES, prefix="end", tags="TagA")
    assert consumer.wait_until(lambda p: len(bodies(p, "end")) == QUEUES, 30), consumer.describe()
    got = [m for m in consumer.of("msg") if m["body"].startswith("t-")]
    assert {m["tags"] for m in got} == {"TagA", "TagB"}
    assert sorted(m["body"] for m in got) == sorted(wanted)


def test_orderly_consumer_locks_queues_and_keeps_key_order(cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic, group = cluster.namesrv_addr, "CppOrderTopic", "CppOrderGroup"
    driver = Driver(spawn, ns, topic)
    sent = driver.send(mode="orderly", shard="key", count=200, prefix="o")
    consumer = push_consumer(spawn, ns, group, topic, "--orderly", "--duration", "60", name="orderly")
    assert consumer.wait_until(lambda p: len(bodies(p, "o")) >= 200, 30), consumer.describe()
    key_of = {e["body"]: e["key"] for e in sent}
    seq: dict[str, list[int]] = defaultdict(list)
    for m in consumer.of("msg"):
        if m["body"].startswith("o-"):
            seq[key_of[m["body"]]].append(int(m["body"].split("-")[1]))
    assert all(s == sorted(s) for s in seq.values()), seq
    assert sum(len(s) for s in seq.values()) == 200
    # the consumer holds broker-side locks on the queues it consumes
    client_ids = group_client_ids(cluster.broker, group)
    assert len(client_ids) == 1
    locks = cluster.broker.rebalance_lock_manager.lock_table().get(group, {})
    assert {mq.queue_id for mq in locks} == set(range(QUEUES))
    assert {e.client_id for e in locks.values()} == set(client_ids)


def test_survivor_takes_over_when_a_member_exits(cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic, group = cluster.namesrv_addr, "CppFailoverTopic", "CppFailoverGroup"
    driver = Driver(spawn, ns, topic)
    driver.send(mode="sync", count=QUEUES, prefix="create")
    members = [push_consumer(spawn, ns, group, topic, "--duration", "90", name=f"fo{i}") for i in range(2)]
    assert poll(lambda: len(group_client_ids(cluster.broker, group)) == 2, 30)

    def settled(prefix: str) -> bool:
        got = [bodies(m, prefix) for m in members]
        return sorted(b for g in got for b in g) == sorted(f"{prefix}-{i}" for i in range(QUEUES)) and all(
            got
        )

    warm_up(driver, members, settled)
    members[1].stop()  # SIGTERM: the C++ client shuts down (unregisters) or its connection drops
    assert poll(lambda: len(group_client_ids(cluster.broker, group)) == 1, 30)
    # the survivor is notified, rebalances and gets all queues
    driver.send(mode="orderly", shard="index", count=QUEUES * 5, prefix="after")
    survivor = members[0]
    assert survivor.wait_until(lambda p: len(set(bodies(p, "after"))) == QUEUES * 5, 30), survivor.describe()
