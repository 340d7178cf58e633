"""Every ``tidemq admin`` verb (by mqadmin's name) against a real ``tidemq serve``, once plain and once
with ACL on (the admin signs with an admin account's keys)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tidemq.admin.cli import MQADMIN_NAMES, admin_group
from tidemq.client.consumer.listener import ConsumeConcurrentlyStatus
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.testing import ServeProcess

from ..helpers import wait_for_sync

ACL_YML = """\
accounts:
  - accessKey: OpsAdminKey
    secretKey: OpsAdminSecret
    admin: true
  - accessKey: OpsAppKey
    secretKey: OpsAppSecret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
ADMIN_KEYS = {"access_key": "OpsAdminKey", "secret_key": "OpsAdminSecret"}


@pytest.fixture(params=["plain", "acl"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[ServeProcess, dict[str, Any]]]:
    extra: list[str] = []
    keys: dict[str, Any] = {}
    if request.param == "acl":
        acl = tmp_path / "plain_acl.yml"
        acl.write_text(ACL_YML)
        extra = ["--acl", str(acl)]
        keys = dict(ADMIN_KEYS)
    with ServeProcess(tmp_path / "store", extra_args=extra) as proc:
        yield proc, keys


class Admin:
    """Runs ``tidemq admin <verb> -n NS --json`` in-process and records which verbs ran."""

    def __init__(self, namesrv: str, keys: dict[str, Any]) -> None:
        self.base = ["-n", namesrv]
        if keys:
            self.base += ["--access-key", keys["access_key"], "--secret-key", keys["secret_key"]]
        self.runner = CliRunner()
        self.used: set[str] = set()

    def run(self, verb: str, *args: str) -> Result:
        self.used.add(verb)
        return self.runner.invoke(admin_group, [verb, *self.base, *args])

    def ok(self, verb: str, *args: str) -> Any:
        result = self.run(verb, *args, "--json")
        assert result.exit_code == 0, f"{verb} {args}: {result.output}"
        return json.loads(result.output)

    def fails(self, verb: str, *args: str) -> str:
        result = self.run(verb, *args)
        assert result.exit_code == 1, f"{verb} {args} should fail: {result.output}"
        return result.output


def test_every_admin_verb(served: tuple[ServeProcess, dict[str, Any]]) -> None:
    """Each mqadmin verb works against `tidemq serve` and a missing topic or group exits 1."""
    proc, keys = served
    ns = proc.namesrv_addr
    admin = Admin(ns, keys)
    if keys:  # on an ACL broker an unsigned admin request is refused with a hint
        out = CliRunner().invoke(admin_group, ["updateTopic", "-n", ns, "-t", "OpsT"]).output
        assert "--access-key" in out

    # topics
    assert admin.ok("updateTopic", "-t", "OpsT", "-q", "2")["brokers"] == [proc.broker_addr]
    wait_for_sync(lambda: admin.run("topicRoute", "-t", "OpsT").exit_code == 0, 15, "route of OpsT")
    assert "OpsT" in admin.ok("topicList")["topicList"]
    assert admin.ok("updateTopicList", "-t", "OpsL1", "-t", "OpsL2", "-q", "2")["topics"] == 2
    everything = admin.ok("topicList")["topicList"]
    assert {"OpsL1", "OpsL2"} <= set(everything)
    paged = admin.ok("topicList", "--page", "2", "--page-size", "2")
    assert paged["topicList"] == sorted(everything)[2:4] and paged["total"] == len(everything)
    text = admin.run("topicList", "--page-size", "2").output
    assert f"(topics 1-2 of {len(everything)}; --page 2 for the next)" in text
    assert "illegal characters" in admin.fails("updateTopicList", "-t", "bad topic!")
    assert [q["readQueueNums"] for q in admin.ok("topicRoute", "-t", "OpsT")["queueDatas"]] == [2]
    assert admin.ok("topicClusterList", "-t", "OpsT")["clusters"] == ["DefaultCluster"]

    # messages
    sent = admin.ok(
        "sendMessage", "-t", "OpsT", "-p", "hello ops", "-k", "k-1", "-c", "tagA", "-b", "broker-a", "-i", "0"
    )
    assert (sent["queueId"], sent["queueOffset"], sent["sendStatus"]) == (0, 0, "SEND_OK")
    producer = Producer(namesrv_addr=ns, producer_group="ops-producer", **keys)
    producer.start()
    try:
        for i in range(5):
            producer.send(
                Message("OpsT", f"m{i}".encode(), keys=f"key-{i}"),
                queue=MessageQueue("OpsT", "broker-a", i % 2),
            )
        assert sum(q["maxOffset"] for q in admin.ok("topicStatus", "-t", "OpsT")["offsetTable"]) == 6
        # a producer heartbeats every 30 s; heartbeat now so the broker lists it (RocketMQ does so after a route change)
        producer.send_heartbeat_to_all_brokers()
        conns = admin.ok("producerConnection", "-g", "ops-producer", "-t", "OpsT")["connectionSet"]
        assert len(conns) == 1
    finally:
        producer.shutdown()
    assert admin.ok("queryMsgById", "-i", sent["offsetMsgId"])[0]["body"] == "hello ops"
    assert admin.ok("queryMsgByUniqueKey", "-t", "OpsT", "-i", sent["msgId"])[0]["body"] == "hello ops"
    by_key = admin.ok("queryMsgByKey", "-t", "OpsT", "-k", "k-1")
    assert [(m["body"], m["tags"], m["brokerName"]) for m in by_key] == [("hello ops", "tagA", "broker-a")]
    assert (
        admin.ok("queryMsgByOffset", "-t", "OpsT", "-b", "broker-a", "-i", "0", "-o", "0")[0]["body"]
        == "hello ops"
    )
    assert sorted(m["body"] for m in admin.ok("printMsg", "-t", "OpsT")) == [
        "hello ops",
        "m0",
        "m1",
        "m2",
        "m3",
        "m4",
    ]
    assert [
        m["body"] for m in admin.ok("consumeMessage", "-t", "OpsT", "-b", "broker-a", "-i", "1", "-c", "2")
    ] == ["m1", "m3"]
    admin.fails("queryMsgByOffset", "-t", "OpsT", "-b", "broker-a", "-i", "0", "-o", "99")

    # consumer groups: a live consumer reads all six, then is reset to the start and reads them again
    got: list[MessageExt] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        namesrv_addr=ns,
        consumer_group="ops-group",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        persist_consumer_offset_interval=0.2,
        **keys,
    )
    consumer.subscribe("OpsT", "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        wait_for_sync(lambda: len(got) >= 6, 30, "six messages consumed")

        def committed_lag() -> int:
            result = admin.run("consumerProgress", "-g", "ops-group", "-t", "OpsT", "--json")
            return int(json.loads(result.output)["totalLag"]) if result.exit_code == 0 else -1

        wait_for_sync(lambda: committed_lag() == 0, 30, "ops-group's committed lag to reach 0")
        progress = admin.ok("consumerProgress", "-g", "ops-group", "-t", "OpsT")
        assert [(q["queueId"], q["brokerOffset"], q["consumerOffset"]) for q in progress["queues"]] == [
            (0, 4, 4),
            (1, 2, 2),
        ]
        assert len(admin.ok("consumerConnection", "-g", "ops-group")["connectionSet"]) == 1
        status = admin.ok("consumerStatus", "-g", "ops-group")
        (info,) = status.values()
        assert {"OpsT/broker-a/0", "OpsT/broker-a/1"} <= set(info["mqTable"])  # and the group's retry queue
        reset = admin.ok("resetOffsetByTime", "-g", "ops-group", "-t", "OpsT", "-s", "0")
        assert [o["offset"] for o in reset["offsets"]] == [0, 0]
        wait_for_sync(lambda: len(got) >= 12, 30, "the consumer, told of the reset, to read all six again")
        assert admin.ok("cloneGroupOffset", "-s", "ops-group", "-d", "ops-clone", "-t", "OpsT")[
            "brokers"
        ] == [proc.broker_addr]
        assert len(admin.ok("consumerProgress", "-g", "ops-clone", "-t", "OpsT")["queues"]) == 2
        stats = admin.ok("statsAll", "-t", "OpsT")
        row = next(r for r in stats if r["group"] == "ops-group")
        assert row["inMsg24Hour"] == 6 and row["outMsg24Hour"] >= 6
    finally:
        consumer.shutdown()
    assert admin.ok("allocateMQ", "-t", "OpsT", "-i", "a,b") == {
        "a": [{"brokerName": "broker-a", "queueId": 0, "topic": "OpsT"}],
        "b": [{"brokerName": "broker-a", "queueId": 1, "topic": "OpsT"}],
    }
    assert admin.ok("updateSubGroup", "-g", "ops-sub", "-r", "3")["group"]["retryMaxTimes"] == 3
    assert admin.ok("deleteSubGroup", "-g", "ops-sub")["deleted"] is True
    assert "does not exist" in admin.fails("deleteSubGroup", "-g", "ops-sub")
    assert "no offsets" in admin.fails("consumerProgress", "-g", "nobody-here")
    admin.ok("updateTopicPerm", "-t", "OpsT", "-p", "4")
    wait_for_sync(
        lambda: [q["perm"] for q in admin.ok("topicRoute", "-t", "OpsT")["queueDatas"]] == [4],
        15,
        "perm 4 in the route",
    )

    # broker and name server
    (row,) = admin.ok("clusterList")
    assert (row["brokerName"], row["addr"]) == ("broker-a", proc.broker_addr)
    assert int(row["runtime"]["msgPutTotalTodayNow"]) >= 6
    status = admin.ok("brokerStatus")[proc.broker_addr]
    assert {"putTps", "getTransferedTps", "msgGetTotalTodayNow", "commitLogDiskRatio"} <= set(status)
    assert admin.ok("getBrokerConfig")[proc.broker_addr]["brokerName"] == "broker-a"
    admin.ok("updateBrokerConfig", "-k", "defaultTopicQueueNums", "-v", "4")
    assert admin.ok("getBrokerConfig", "-b", "broker-a")[proc.broker_addr]["defaultTopicQueueNums"] == "4"
    admin.fails("updateBrokerConfig", "-k", "noSuchOption", "-v", "1")
    assert admin.ok("cleanExpiredCQ")["ok"] is True
    assert admin.ok("deleteExpiredCommitLog")["ok"] is True
    assert "orderMessageEnable" in admin.ok("getNamesrvConfig")[ns]
    admin.ok("updateKvConfig", "-s", "OPS_NS", "-k", "a", "-v", "b")
    assert admin.ok("deleteKvConfig", "-s", "OPS_NS", "-k", "a")["deleted"] is True
    admin.fails("deleteKvConfig", "-s", "OPS_NS", "-k", "a")

    # and away
    admin.ok("deleteTopic", "-t", "OpsT")
    assert "topicList" in admin.fails("topicRoute", "-t", "OpsT")
    admin.fails("topicStatus", "-t", "NoSuchTopic")
    assert "no trace of message" in admin.fails("queryMsgTraceById", "-i", "7F0000010000000000000000000000AA")
    assert admin.used == set(MQADMIN_NAMES), f"verbs not driven: {set(MQADMIN_NAMES) - admin.used}"
