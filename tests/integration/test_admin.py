"""AdminClient and ``tidemq admin`` against a real name server + broker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tidemq.admin import AdminClient
from tidemq.admin.cli import admin_group, format_table
from tidemq.client.consumer.listener import ConsumeConcurrentlyStatus
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.errors import ClientError, ConsumerNotOnlineError, NoRouteError
from tidemq.protocol.message import Message, MessageQueue
from tidemq.testing import ClusterThread


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(tmp_path, mapped_file_size_commit_log=4096, file_reserved_time=0) as c:
        yield c


@pytest.fixture
def admin(cluster: ClusterThread) -> Iterator[AdminClient]:
    with AdminClient(cluster.namesrv_addr) as a:
        yield a


def _produce(namesrv: str, topic: str, per_queue: int, queues: int) -> None:
    producer = Producer(namesrv_addr=namesrv, producer_group="admin-test")
    producer.start()
    try:
        mqs = sorted(producer.fetch_publish_message_queues(topic))
        assert len(mqs) == queues
        for i in range(per_queue * queues):
            producer.send(Message(topic, b"x" * 100 + str(i).encode()), queue=mqs[i % queues])
    finally:
        producer.shutdown()


def test_create_topic_route_and_offsets(admin: AdminClient, cluster: ClusterThread) -> None:
    addrs = admin.create_topic("AdminT", 3)
    assert addrs == [cluster.broker_addr]
    route = admin.wait_for_route("AdminT")
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [
        ("broker-a", 3, 3)
    ]
    mqs = admin.fetch_subscribe_message_queues("AdminT")
    assert mqs == [MessageQueue("AdminT", "broker-a", i) for i in range(3)]
    _produce(cluster.namesrv_addr, "AdminT", 5, 3)
    assert admin.fetch_max_offsets(mqs) == {mq: 5 for mq in mqs}
    assert admin.fetch_min_offsets(mqs) == {mq: 0 for mq in mqs}
    assert admin.search_offset(mqs[0], 0) == 0
    stats = admin.examine_topic_stats("AdminT")
    assert {mq: (t.min_offset, t.max_offset) for mq, t in stats.offset_table.items()} == {
        mq: (0, 5) for mq in mqs
    }


def test_consumer_offsets_and_consume_stats(admin: AdminClient, cluster: ClusterThread) -> None:
    admin.create_topic("AdminLag", 2)
    admin.wait_for_route("AdminLag")
    _produce(cluster.namesrv_addr, "AdminLag", 4, 2)
    mq0, mq1 = admin.fetch_subscribe_message_queues("AdminLag")
    assert admin.query_consumer_offset("g1", mq0) in (-1, 0)  # RocketMQ answers 0 while the queue starts at 0
    admin.update_consumer_offset("g1", mq0, 3)
    admin.update_consumer_offsets("g1", {mq1: 4})
    assert admin.query_consumer_offsets("g1", [mq0, mq1]) == {mq0: 3, mq1: 4}
    stats = admin.examine_consume_stats("g1", "AdminLag")
    assert stats.compute_total_diff() == 1
    rows = admin.consumer_progress("g1", "AdminLag")
    assert [(r.mq.queue_id, r.broker_offset, r.consumer_offset, r.lag) for r in rows] == [
        (0, 4, 3, 1),
        (1, 4, 4, 0),
    ]
    with pytest.raises(ClientError, match=">= 0"):
        admin.update_consumer_offset("g1", mq0, -5)


def test_retention_triggers_move_min_offset(admin: AdminClient, cluster: ClusterThread) -> None:
    admin.create_topic("AdminRetention", 1)
    admin.wait_for_route("AdminRetention")
    _produce(cluster.namesrv_addr, "AdminRetention", 120, 1)
    (mq,) = admin.fetch_subscribe_message_queues("AdminRetention")
    assert admin.min_offset(mq) == 0
    assert admin.delete_expired_commitlog() == [cluster.broker_addr]
    admin.clean_expired_consume_queue()
    assert 0 < admin.min_offset(mq) < admin.max_offset(mq) == 120


def test_errors_are_typed(admin: AdminClient) -> None:
    with pytest.raises(NoRouteError):
        admin.examine_topic_route_info("NoSuchTopicHere")
    with pytest.raises(ClientError, match="illegal characters"):
        admin.create_topic("bad topic", 4)
    with pytest.raises(ClientError, match="queue_nums"):
        admin.create_topic("T", 0)
    with pytest.raises(ConsumerNotOnlineError):
        admin.examine_consumer_connection_info("nobody-here")


def test_consumer_connection_lists_live_consumers(admin: AdminClient, cluster: ClusterThread) -> None:
    admin.create_topic("AdminConn", 2)
    admin.wait_for_route("AdminConn")
    consumer = PushConsumer(namesrv_addr=cluster.namesrv_addr, consumer_group="conn-group")
    consumer.subscribe("AdminConn", "a || b")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    consumer.start()
    try:
        cc = admin.examine_consumer_connection_info("conn-group")
        assert len(cc.connection_set) == 1
        assert cc.subscription_table["AdminConn"].sub_string == "a || b"
        result = CliRunner().invoke(
            admin_group, ["consumer-connection", "--namesrv", cluster.namesrv_addr, "-g", "conn-group"]
        )
        assert result.exit_code == 0, result.output
        assert cc.connection_set[0].client_id in result.output and "a || b" in result.output
    finally:
        consumer.shutdown()


def test_cli_commands(cluster: ClusterThread) -> None:
    ns = cluster.namesrv_addr
    runner = CliRunner()
    result = runner.invoke(admin_group, ["update-topic", "--namesrv", ns, "--topic", "CliT", "--queues", "2"])
    assert result.exit_code == 0, result.output
    assert "CliT: 2 queues" in result.output
    with AdminClient(ns) as admin:
        admin.wait_for_route("CliT")
        mq0 = MessageQueue("CliT", "broker-a", 0)
        _produce(ns, "CliT", 3, 2)
        admin.update_consumer_offset("cli-g", mq0, 1)
    result = runner.invoke(
        admin_group, ["consumer-progress", "--namesrv", ns, "--group", "cli-g", "--topic", "CliT", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["totalLag"] == 5
    assert [(q["queueId"], q["brokerOffset"], q["consumerOffset"], q["lag"]) for q in data["queues"]] == [
        (0, 3, 1, 2),
        (1, 3, 0, 3),
    ]
    result = runner.invoke(
        admin_group, ["consumer-progress", "--namesrv", ns, "--group", "cli-g", "--topic", "CliT"]
    )
    assert result.exit_code == 0 and "total lag: 5" in result.output
    result = runner.invoke(admin_group, ["topic-route", "--namesrv", ns, "-t", "CliT"])
    assert result.exit_code == 0 and "broker-a" in result.output and cluster.broker_addr in result.output
    result = runner.invoke(admin_group, ["topic-status", "--namesrv", ns, "-t", "CliT", "--json"])
    assert result.exit_code == 0
    assert {e["queueId"]: e["maxOffset"] for e in json.loads(result.output)["offsetTable"]} == {0: 3, 1: 3}
    result = runner.invoke(admin_group, ["topic-route", "--namesrv", ns, "-t", "Nope"])
    assert result.exit_code == 1 and "Nope" in result.output


def test_format_table_aligns_numbers() -> None:
    text = format_table(["name", "n"], [("a", 1), ("bbb", 100)])
    assert text.splitlines() == ["name  n", "----  ---", "a       1", "bbb   100"]
