"""The real RocketMQ C++ client (``rocketmq==0.4.4``) against a 2-group cluster with 2 name servers.

The C++ producer spreads its sends over the queues of both groups; the C++ push consumer reads
every message back, from both groups.
"""

from __future__ import annotations

import pytest

from tests.ha.conftest import Spawn, StartCluster, create_topic
from tidemq.admin.client import AdminClient
from tidemq.protocol.message import MessageQueue

pytest.importorskip("rocketmq.client")
pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPIC = "HaCppClusterT"
COUNT = 64


def test_cpp_client_sends_to_and_consumes_from_two_groups(start_cluster: StartCluster, spawn: Spawn) -> None:
    cluster = start_cluster(groups=2, replicas=0, namesrv=2)
    ns = cluster.namesrv_addr
    assert ns.count(";") == 1
    create_topic(cluster, TOPIC, 4)
    producer = spawn(
        "cpp_producer.py", "--namesrv", ns, "--topic", TOPIC, "--count", str(COUNT), name="cpp-p"
    )
    assert producer.wait_exit(60) == 0, producer.describe()
    sent = {e["body"] for e in producer.of("sent")}
    assert len(sent) == COUNT

    with AdminClient(ns) as admin:
        mqs = [MessageQueue(TOPIC, b, q) for b in ("broker-a", "broker-b") for q in range(4)]
        per_queue = admin.call("fetch_max_offsets", mqs)
    per_group = {
        b: sum(n for mq, n in per_queue.items() if mq.broker_name == b) for b in ("broker-a", "broker-b")
    }
    assert sum(per_group.values()) == COUNT
    assert min(per_group.values()) >= COUNT // 4, per_group  # round robin over 8 queues: 32 each
    assert sum(1 for n in per_queue.values() if n) == 8, per_queue

    consumer = spawn(
        "cpp_push_consumer.py",
        "--namesrv",
        ns,
        "--group",
        "ha-cpp-c",
        "--topic",
        TOPIC,
        "--count",
        str(COUNT),
        "--duration",
        "90",
        name="cpp-c",
    )
    assert consumer.wait_until(lambda p: sent <= {e["body"] for e in p.of("msg")}, 90), consumer.describe()
