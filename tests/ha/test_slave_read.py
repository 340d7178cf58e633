"""suggestWhichBrokerId between real processes: a consumer far behind is sent to the slave and back.

Both brokers run with ``accessMessageInMemoryMaxRatio=0`` (any backlog counts as "far behind", as
if it were no longer in RAM) and ``slaveReadEnable=true``. A consumer starting on a backlog reads
one batch from the master, is told to pull from brokerId 1 and reads the rest from the slave; once
it has read everything the slave holds, the slave sends it back to the master, where new messages
are read again. Who served is what each broker reports (GET_BROKER_RUNTIME_INFO,
``msgGetTotalTodayNow``), as ``mqadmin brokerStatus`` shows it.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.ha.conftest import StartCluster, create_topic, slave_has_topic
from tests.helpers import wait_for_sync
from tidemq.admin.client import AdminClient
from tidemq.client import ConsumeConcurrentlyStatus, Producer, PushConsumer
from tidemq.protocol.message import Message

pytestmark = pytest.mark.slow

TOPIC = "HaSlaveReadT"
BACKLOG = 200


def test_far_behind_consumer_reads_from_slave_and_comes_back(start_cluster: StartCluster) -> None:
    cluster = start_cluster(
        groups=1, replicas=1, sync=True, extra_conf={"accessMessageInMemoryMaxRatio": "0"}
    )
    ns = cluster.namesrv_addr
    master, slave = cluster.node("broker-a-0").addr, cluster.node("broker-a-1").addr
    create_topic(cluster, TOPIC, 1)
    wait_for_sync(lambda: slave_has_topic(cluster, "broker-a-1", TOPIC), 30, "the slave to copy the topic")
    producer = Producer(namesrv_addr=ns, producer_group="ha-read-p")
    producer.start()
    admin = AdminClient(ns)
    got: list[str] = []
    lock = threading.Lock()

    def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            got.extend(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def gets(addr: str) -> int:
        return int(admin.call("fetch_broker_runtime_stats", addr)["msgGetTotalTodayNow"])

    consumer = PushConsumer(
        namesrv_addr=ns, consumer_group="ha-read", consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    try:
        for i in range(BACKLOG):  # SYNC_MASTER: each SEND_OK means the slave has it too
            assert producer.send(Message(TOPIC, f"old-{i}".encode())).send_status == "SEND_OK"
        consumer.start()
        wait_for_sync(lambda: len(set(got)) >= BACKLOG, 60, "the backlog to be consumed")
        from_master, from_slave = gets(master), gets(slave)
        assert from_slave >= BACKLOG - 32, (from_master, from_slave)  # redirected after one batch
        assert from_master < BACKLOG // 2, (from_master, from_slave)

        # caught up: the slave has nothing more and suggests the master (brokerId 0) again; new
        # messages are then pulled from the master first
        for i in range(10):
            producer.send(Message(TOPIC, f"new-{i}".encode()))
        wait_for_sync(lambda: len(set(got)) >= BACKLOG + 10, 60, "the new messages to be consumed")
        assert gets(master) > from_master, "the consumer never came back to the master"
    finally:
        consumer.shutdown()
        producer.shutdown()
        admin.close()
