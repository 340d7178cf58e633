"""SYNC_MASTER + SLAVE as real processes: the master dies one second after a topic's creation.

The slave copies topic configs every 10 s, so it has not copied the topic yet; it holds every
acknowledged message though (SYNC_MASTER), and serves them: a new consumer gets all 100 from it.
``consumerProgress`` then reads the slave's offsets (the master is gone) and ``tidemq cluster
kill NODE`` is what a user runs to practise the failover.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner

from tests.ha.conftest import StartCluster, create_topic
from tests.helpers import wait_for_sync
from tidemq.admin.cli import admin_group
from tidemq.client import ConsumeConcurrentlyStatus, Producer, PushConsumer
from tidemq.cluster import cluster_group
from tidemq.protocol.message import Message

pytestmark = pytest.mark.slow

TOPIC = "HaFresh"


def test_slave_serves_a_topic_it_has_not_synced(start_cluster: StartCluster) -> None:
    cluster = start_cluster(groups=1, replicas=1, sync=True)
    ns = cluster.namesrv_addr
    create_topic(cluster, TOPIC, 4)
    created = time.monotonic()
    producer = Producer(namesrv_addr=ns, producer_group="fresh-p", send_msg_timeout=3.0)
    producer.start()
    try:
        sent = {f"m-{i}" for i in range(100)}
        for body in sorted(sent):
            assert producer.send(Message(TOPIC, body.encode())).send_status == "SEND_OK"
    finally:
        producer.shutdown()
    time.sleep(max(0.0, created + 1.0 - time.monotonic()))  # the scenario: a kill 1 s after creation
    killed = CliRunner().invoke(cluster_group, ["kill", "--dir", str(cluster.dir), "broker-a-0"])
    assert killed.exit_code == 0 and "broker-a-0 killed" in killed.output, killed.output
    assert not cluster.node("broker-a-0").alive
    unknown = CliRunner().invoke(cluster_group, ["start", "--dir", str(cluster.dir), "broker-z-0"])
    assert unknown.exit_code != 0 and "no node 'broker-z-0'" in unknown.output

    got: set[str] = set()
    lock = threading.Lock()

    def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            got.update(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        namesrv_addr=ns,
        consumer_group="fresh-c",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        persist_consumer_offset_interval=0.5,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        wait_for_sync(lambda: len(got) >= 100, 20, "the consumer to get all 100 messages from the slave")
        assert got == sent

        # consumerProgress without -t: the group's lag is read from the slave, not left out
        def progress() -> dict[str, Any]:
            res = CliRunner().invoke(admin_group, ["consumerProgress", "-n", ns, "--json", "-g", "fresh-c"])
            return json.loads(res.output) if res.exit_code == 0 else {"queues": [], "out": res.output}

        def caught_up() -> bool:
            p = progress()
            return len(p["queues"]) == 4 and p["totalLag"] == 0

        wait_for_sync(caught_up, 10, "consumerProgress to show broker-a's queues read from its slave", 0.2)
        report = progress()
        assert {q["brokerName"] for q in report["queues"]} == {"broker-a"}
        assert sum(q["brokerOffset"] for q in report["queues"]) == 100
    finally:
        consumer.shutdown()
