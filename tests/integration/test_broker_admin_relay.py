"""Admin requests the broker relays to its consumers: INVOKE_BROKER_TO_RESET_OFFSET (-> 220),
GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY; and GET_PRODUCER_CONNECTION_LIST."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest

from tests.helpers import start_push_consumer, wait_for
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.body import ResetOffsetBody, fastjson_loads
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.protocol.message_codec import decode_messages
from tidemq.remoting import Channel, RemotingClient
from tidemq.testing import Cluster, run_cluster

TOPIC, GROUP = "RelayT", "relay-g"
HOUR = 3_600_000


async def admin(addr: str, code: int, ext: dict[str, str], *, language: str = "JAVA") -> RemotingCommand:
    client = RemotingClient()
    try:
        request = RemotingCommand.create_request(code, ext)
        request.language = language
        return await client.invoke(addr, request, 15)
    finally:
        await client.close()


def reset_request(group: str, timestamp: int, *, force: bool = False, topic: str = TOPIC) -> dict[str, str]:
    return {"topic": topic, "group": group, "timestamp": str(timestamp), "isForce": str(force).lower()}


class RawConsumer:
    """A bare connection heartbeating as one consumer of a group, in a given client language;
    records the broker-initiated requests it gets and answers them with ``answer``."""

    def __init__(self, cluster: Cluster, client_id: str, language: str) -> None:
        self.cluster, self.client_id, self.language = cluster, client_id, language
        self.client = RemotingClient()
        self.received: list[RemotingCommand] = []
        self.answer: Callable[[RemotingCommand], RemotingCommand | None] = lambda r: None
        for code in (
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            RequestCode.CONSUME_MESSAGE_DIRECTLY,
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        ):
            self.client.register_processor(code, self)

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        if request.code != RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            self.received.append(request)
        return None if request.is_oneway else self.answer(request)

    async def heartbeat(self, group: str) -> None:
        body = orjson.dumps(
            {
                "clientID": self.client_id,
                "consumerDataSet": [
                    {
                        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "consumeType": "CONSUME_PASSIVELY",
                        "groupName": group,
                        "messageModel": "CLUSTERING",
                        "subscriptionDataSet": [
                            {"subString": "*", "subVersion": 1, "tagsSet": [], "codeSet": [], "topic": TOPIC}
                        ],
                        "unitMode": False,
                    }
                ],
                "producerDataSet": [],
            }
        )
        request = RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, body)
        request.language = self.language
        response = await self.client.invoke(self.cluster.broker_addr, request, 5)
        assert response.code == ResponseCode.SUCCESS

    async def close(self) -> None:
        await self.client.close()


@pytest.fixture
async def cluster(tmp_path: Any) -> AsyncIterator[Cluster]:
    async with run_cluster(tmp_path) as c:
        yield c


async def commit_offsets(cluster: Cluster, group: str, offsets: dict[int, int]) -> None:
    for qid, off in offsets.items():
        cluster.broker.consumer_offset_manager.commit_offset("test", group, TOPIC, qid, off)


async def test_reset_offset_to_a_timestamp_makes_a_live_consumer_reconsume(cluster: Cluster) -> None:
    store = cluster.broker.store
    base = int(time.time() * 1000)
    phase = [0]
    store.clock_ms = lambda: base + phase[0] * HOUR  # store times: "old" batch, then one hour later
    async with AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="relay-pg") as producer:
        old = [f"old-{i}" for i in range(8)]
        for body in old:
            await producer.send(Message(TOPIC, body.encode()))
        queues = await producer.fetch_publish_message_queues(TOPIC)
        phase[0] = 1
        new = [f"new-{mq.queue_id}" for mq in queues]
        for mq in queues:  # one "new" message in every queue
            await producer.send(Message(TOPIC, f"new-{mq.queue_id}".encode()), queue=mq)

    seen: Counter[str] = Counter()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
        seen.update(m.body.decode() for m in msgs)

    consumer = await start_push_consumer(cluster.namesrv_addr, GROUP, TOPIC, listener)
    try:
        consumer.instance.reset_offset_wait = 0.1
        everything = old + new
        await wait_for(lambda: all(seen[b] == 1 for b in everything), 15, "first delivery")
        offsets = cluster.broker.consumer_offset_manager

        def committed_to_end() -> bool:
            return all(
                offsets.query_offset(GROUP, TOPIC, mq.queue_id)
                == store.get_max_offset_in_queue(TOPIC, mq.queue_id)
                for mq in queues
            )

        async def commit_all() -> None:  # persist now rather than at the 10 s first tick
            deadline = time.monotonic() + 15
            while not committed_to_end():
                assert time.monotonic() < deadline, "offsets not committed"
                await consumer.instance.persist_all_consumer_offsets()
                await asyncio.sleep(0.05)

        await commit_all()

        resp = await admin(
            cluster.broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_request(GROUP, base + HOUR)
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        table = ResetOffsetBody.decode(resp.body).offset_table  # Java form in the answer
        assert {mq.queue_id: off for mq, off in table.items()} == {
            mq.queue_id: store.get_max_offset_in_queue(TOPIC, mq.queue_id) - 1 for mq in queues
        }
        await wait_for(lambda: all(seen[b] == 2 for b in new), 15, "re-delivery from the timestamp")
        assert all(seen[b] == 1 for b in old), "messages before the timestamp came again"
        await commit_all()

        # isForce=false and a target above the committed offsets: nothing moves
        resp = await admin(
            cluster.broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_request(GROUP, -1)
        )
        assert resp.code == ResponseCode.SUCCESS
        table = ResetOffsetBody.decode(resp.body).offset_table
        assert all(off == store.get_max_offset_in_queue(TOPIC, mq.queue_id) for mq, off in table.items())
    finally:
        await consumer.shutdown()


async def test_reset_offset_body_form_follows_each_consumer_language(cluster: Cluster) -> None:
    async with AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="relay-pg") as producer:
        for i in range(4):
            await producer.send(Message(TOPIC, f"m{i}".encode()))
    queues = cluster.broker.topic_config_manager.select_topic_config(TOPIC)
    assert queues is not None
    await commit_offsets(cluster, GROUP, {q: 0 for q in range(queues.write_queue_nums)})
    cpp, java = RawConsumer(cluster, "10.0.0.1@cpp", "CPP"), RawConsumer(cluster, "10.0.0.2@java", "JAVA")
    try:
        await cpp.heartbeat(GROUP)
        await java.heartbeat(GROUP)
        resp = await admin(
            cluster.broker_addr,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
            reset_request(GROUP, -1, force=True),
            language="CPP",  # the requester's language does not decide the form any more
        )
        assert resp.code == ResponseCode.SUCCESS
        await wait_for(lambda: bool(cpp.received and java.received), 5, "RESET_CONSUMER_CLIENT_OFFSET")
        for raw in (cpp, java):
            (req,) = raw.received
            assert req.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET and req.is_oneway
            assert (req.ext_fields["topic"], req.ext_fields["group"], req.ext_fields["timestamp"]) == (
                TOPIC,
                GROUP,
                "-1",
            )
        c_body = orjson.loads(cpp.received[0].body)  # ResetOffsetBodyForC: plain JSON list
        assert isinstance(c_body["offsetTable"], list)
        expect = {
            q: cluster.broker.store.get_max_offset_in_queue(TOPIC, q) for q in range(queues.write_queue_nums)
        }
        assert {e["queueId"]: e["offset"] for e in c_body["offsetTable"]} == expect
        assert all(e["topic"] == TOPIC and e["brokerName"] == "broker-a" for e in c_body["offsetTable"])
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(java.received[0].body)  # fastjson's object keys: not standard JSON
        java_table = ResetOffsetBody.decode(java.received[0].body).offset_table
        assert {mq.queue_id: off for mq, off in java_table.items()} == expect
    finally:
        await cpp.close()
        await java.close()


async def test_reset_offset_errors(cluster: Cluster) -> None:
    async with AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="relay-pg") as producer:
        await producer.send(Message(TOPIC, b"x"))
    addr, code = cluster.broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET
    no_group = await admin(addr, code, reset_request("nobody", 0))
    assert (no_group.code, no_group.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "THe consumer group <nobody> not exist",
    )
    no_topic = await admin(addr, code, reset_request(GROUP, 0, topic="NoSuchTopic"))
    assert no_topic.code == ResponseCode.SYSTEM_ERROR and "no topic in this broker" in (no_topic.remark or "")
    tc = cluster.broker.topic_config_manager.select_topic_config(TOPIC)
    assert tc is not None
    await commit_offsets(cluster, "offline-g", {q: 0 for q in range(tc.write_queue_nums)})
    offline = await admin(addr, code, reset_request("offline-g", 0))
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert "Consumer not online" in (offline.remark or "")
    bad = await admin(addr, code, {"topic": TOPIC, "group": GROUP, "timestamp": "soon", "isForce": "true"})
    assert bad.code == ResponseCode.SYSTEM_ERROR and "timestamp" in (bad.remark or "")


async def test_running_info_is_relayed_from_a_live_consumer(cluster: Cluster) -> None:
    consumer = AsyncPushConsumer(namesrv_addr=cluster.namesrv_addr, consumer_group=GROUP)
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(lambda msgs, ctx: None)
    async with AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="relay-pg") as producer:
        await producer.send(Message(TOPIC, b"x"))
    await consumer.start()
    try:
        await wait_for(
            lambda: cluster.broker.consumer_manager.find_channel(GROUP, consumer.client_id) is not None,
            10,
            "consumer registered",
        )
        ext = {"consumerGroup": GROUP, "clientId": consumer.client_id, "jstackEnable": "false"}
        resp = await admin(cluster.broker_addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        info = fastjson_loads(resp.body)
        assert info["properties"]["PROP_NAMESERVER_ADDR"] == cluster.namesrv_addr
        assert TOPIC in {s["topic"] for s in info["subscriptionSet"]}
        assert TOPIC in info["statusTable"]

        gone = await admin(
            cluster.broker_addr,
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            {"consumerGroup": GROUP, "clientId": "nobody"},
        )
        assert (gone.code, gone.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"The Consumer <{GROUP}> <nobody> not online",
        )
    finally:
        await consumer.shutdown()


async def test_relay_timeout_and_consume_message_directly(cluster: Cluster) -> None:
    async with AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="relay-pg") as producer:
        sent = await producer.send(Message(TOPIC, b"direct"))
    raw = RawConsumer(cluster, "10.0.0.3@raw", "CPP")
    try:
        await raw.heartbeat(GROUP)
        cluster.broker.admin_relay_processor.call_client_timeout = 0.3
        silent = await admin(
            cluster.broker_addr,
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            {"consumerGroup": GROUP, "clientId": raw.client_id},
        )
        assert silent.code == ResponseCode.CONSUME_MSG_TIMEOUT

        def answer(request: RemotingCommand) -> RemotingCommand:
            body = orjson.dumps(
                {"consumeResult": "CR_SUCCESS", "order": False, "autoCommit": True, "spentTimeMills": 1}
            )
            return RemotingCommand.create_response(ResponseCode.SUCCESS, None, None, body)

        raw.answer = answer
        ext = {"consumerGroup": GROUP, "clientId": raw.client_id, "msgId": sent.offset_msg_id}
        resp = await admin(cluster.broker_addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
        assert resp.code == ResponseCode.SUCCESS
        assert orjson.loads(resp.body)["consumeResult"] == "CR_SUCCESS"
        forwarded = raw.received[-1]
        assert forwarded.code == RequestCode.CONSUME_MESSAGE_DIRECTLY
        assert forwarded.ext_fields["brokerName"] == "broker-a"
        assert forwarded.ext_fields["msgId"] == sent.offset_msg_id
        (msg,) = decode_messages(forwarded.body)  # the stored message rides along
        assert msg.body == b"direct" and msg.msg_id == sent.msg_id
    finally:
        await raw.close()


async def test_producer_connection_list(cluster: Cluster) -> None:
    async with AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="conn-pg") as producer:
        await producer.send(Message(TOPIC, b"x"))  # the heartbeat after the first send registers it
        await producer.instance.send_heartbeat_to_all_brokers()
        resp = await admin(
            cluster.broker_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "conn-pg"}
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        conns = orjson.loads(resp.body)["connectionSet"]
        assert [c["clientId"] for c in conns] == [producer.client_id]
        assert conns[0]["clientAddr"].startswith("127.0.0.1:") and conns[0]["language"]
    missing = await admin(
        cluster.broker_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "none"}
    )
    assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, "the producer group[none] not exist")


def test_reset_body_forms_round_trip() -> None:
    table = {MessageQueue(TOPIC, "broker-a", q): q * 10 for q in range(3)}
    assert ResetOffsetBody.decode(ResetOffsetBody(table).encode()).offset_table == table
