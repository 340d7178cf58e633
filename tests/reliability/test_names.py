"""Bad names never create state; an undeliverable delayed message never stalls its delay level."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest

from tests.helpers import wait_for
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import Message, MessageConst
from tidemq.remoting import RemotingClient
from tidemq.store.results import MessageExtBrokerInner
from tidemq.testing import Cluster, run_cluster


def heartbeat(
    group: object, topic: object = "T", producer_group: object = "pg", client_id: object = "127.0.0.1@fuzz"
) -> RemotingCommand:
    body = {
        "clientID": client_id,
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [], "codeSet": []}],
                "unitMode": False,
            }
        ],
        "producerDataSet": [{"groupName": producer_group}],
    }
    return RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, orjson.dumps(body))


def state(cluster: Cluster) -> tuple[set[str], set[str], int]:
    b = cluster.broker
    return (
        set(b.topic_config_manager.topics()),
        set(b.subscription_group_manager.subscription_group_table),
        len(b.consumer_manager.consumer_table),
    )


@pytest.mark.parametrize(
    ("group", "topic", "pgroup", "needle"),
    [
        ("g" * 300, "T", "pg", "longer than group max length 255"),
        ({"not": "a string"}, "T", "pg", "illegal characters"),
        ("bad group!", "T", "pg", "illegal characters"),
        ("ok", "t" * 200, "pg", "longer than topic max length 127"),
        ("ok", "T", "p g", "producer group"),
    ],
)
async def test_heartbeat_with_a_bad_name_creates_nothing(
    tmp_path: Path, group: object, topic: object, pgroup: object, needle: str
) -> None:
    async with run_cluster(tmp_path) as cluster:
        client = RemotingClient()
        try:
            before = state(cluster)
            resp = await client.invoke(cluster.broker_addr, heartbeat(group, topic, pgroup), 5.0)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert needle in (resp.remark or ""), resp.remark
            assert state(cluster) == before
            good = await client.invoke(cluster.broker_addr, heartbeat("good-group"), 5.0)
            assert good.code == ResponseCode.SUCCESS  # the broker keeps serving
            assert "%RETRY%good-group" in cluster.broker.topic_config_manager.topics()
        finally:
            await client.close()


@pytest.mark.parametrize(
    ("client_id", "needle"),
    [
        ("x" * 70_000, "longer than 255 characters (70000)"),
        ("", "blank"),
        ("10.0.0.1@a\nforged log line", "control characters"),
    ],
)
async def test_heartbeat_with_a_bad_client_id_creates_nothing(
    tmp_path: Path, client_id: str, needle: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The client id goes into the consumer tables and log lines: a 70 KB one (the fuzzer's) or one
    with a newline is refused with a remark, nothing is registered and nothing of it is logged."""
    caplog.set_level(logging.INFO)
    async with run_cluster(tmp_path) as cluster:
        client = RemotingClient()
        try:
            before = state(cluster)
            resp = await client.invoke(cluster.broker_addr, heartbeat("g1", client_id=client_id), 5.0)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert needle in (resp.remark or ""), resp.remark
            assert state(cluster) == before
            assert all(len(r.getMessage()) < 1000 for r in caplog.records)
            good = await client.invoke(cluster.broker_addr, heartbeat("g1", client_id="127.0.0.1@ok"), 5.0)
            assert good.code == ResponseCode.SUCCESS
            assert cluster.broker.consumer_manager.find_channel("g1", "127.0.0.1@ok") is not None
        finally:
            await client.close()


async def test_long_group_gets_no_retry_topic_and_send_back_is_refused(tmp_path: Path) -> None:
    """A 125-character group is a valid group but its retry topic would be 132 characters: the
    heartbeat is accepted without a retry topic, and a send-back is refused up front (before this,
    it was parked in the schedule topic and stalled its delay level forever)."""
    group = "g" * 125
    async with run_cluster(tmp_path) as cluster:
        client = RemotingClient()
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg")
        await producer.start()
        try:
            resp = await client.invoke(cluster.broker_addr, heartbeat(group), 5.0)
            assert resp.code == ResponseCode.SUCCESS
            assert not any(t.startswith("%RETRY%g") for t in cluster.broker.topic_config_manager.topics())
            await producer.send(Message("T", b"x"))
            back = RemotingCommand.create_request(
                RequestCode.CONSUMER_SEND_MSG_BACK,
                {"offset": "0", "group": group, "delayLevel": "1"},
            )
            resp = await client.invoke(cluster.broker_addr, back, 5.0)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert "retry topic" in (resp.remark or "")
            assert cluster.broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 0
        finally:
            await producer.shutdown()
            await client.close()


async def test_undeliverable_delayed_message_is_moved_aside_and_the_level_goes_on(tmp_path: Path) -> None:
    """A due message whose real topic the store refuses (over 127 bytes) is moved to
    rmq_sys_SCHEDULE_UNDELIVERABLE with a warning; the next message of the level is delivered."""
    async with run_cluster(tmp_path, message_delay_level="1s 1s") as cluster:
        store = cluster.broker.store
        parked = MessageExtBrokerInner(  # parked with a destination the store will refuse when due
            "SCHEDULE_TOPIC_XXXX",
            b"stuck",
            properties={
                MessageConst.PROPERTY_DELAY_TIME_LEVEL: "2",
                MessageConst.PROPERTY_REAL_TOPIC: "x" * 140,
                MessageConst.PROPERTY_REAL_QUEUE_ID: "0",
            },
            queue_id=1,
        )
        assert store.put_message(parked).is_ok
        later = MessageExtBrokerInner(
            "Fine", b"after", properties={MessageConst.PROPERTY_DELAY_TIME_LEVEL: "2"}
        )
        assert store.put_message(later).is_ok  # parked behind it in the same level
        await wait_for(lambda: store.get_max_offset_in_queue("Fine", 0) == 1, 15, "the message behind it")
        schedule = cluster.broker.schedule_message_service
        assert schedule is not None and schedule.moved_aside == 1
        assert store.get_max_offset_in_queue("rmq_sys_SCHEDULE_UNDELIVERABLE", 0) == 1


async def test_message_that_keeps_failing_is_moved_aside_after_bounded_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transient failure (here: the store always busy for one destination) is retried, but only
    MAX_DELIVERY_ATTEMPTS times; then the message is moved aside and the level goes on."""
    from tidemq.broker import schedule
    from tidemq.store.results import PutMessageResult, PutMessageStatus

    monkeypatch.setattr(schedule, "MAX_DELIVERY_ATTEMPTS", 3)
    async with run_cluster(tmp_path, message_delay_level="1s") as cluster:
        store = cluster.broker.store
        real_put = store.put_message

        def put(inner: MessageExtBrokerInner) -> PutMessageResult:
            if inner.topic == "Busy":
                return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY, remark="busy")
            return real_put(inner)

        monkeypatch.setattr(store, "put_message", put)
        for topic in ("Busy", "Fine"):
            props = {MessageConst.PROPERTY_DELAY_TIME_LEVEL: "1"}
            assert real_put(MessageExtBrokerInner(topic, b"x", properties=props)).is_ok
        await wait_for(lambda: store.get_max_offset_in_queue("Fine", 0) == 1, 15, "the message behind it")
        assert store.get_max_offset_in_queue("rmq_sys_SCHEDULE_UNDELIVERABLE", 0) == 1
