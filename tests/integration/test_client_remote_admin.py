"""Broker-initiated requests to a push consumer: RESET_CONSUMER_CLIENT_OFFSET and GET_CONSUMER_RUNNING_INFO.

The requests are sent on the broker's own connection to the consumer (as the broker does for
INVOKE_BROKER_TO_RESET_OFFSET and for a relayed GET_CONSUMER_RUNNING_INFO).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tests.helpers import start_push_consumer, wait_for
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.body import ResetOffsetBody, ResetOffsetBodyForC, fastjson_loads
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.testing import Cluster, run_cluster

TOPIC, GROUP = "ResetT", "reset-g"


def broker_channel(cluster: Cluster, client_id: str) -> Any:
    info = cluster.broker.consumer_manager.find_channel(GROUP, client_id)
    assert info is not None, "consumer not registered"
    return info.channel


async def start_consumer(cluster: Cluster, seen: Counter[str]) -> AsyncPushConsumer:
    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
        seen.update(m.body.decode() for m in msgs)

    return await start_push_consumer(cluster.namesrv_addr, GROUP, TOPIC, listener)


async def test_reset_consumer_client_offset_rewinds_the_group(tmp_path: Path) -> None:
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="reset-pg")
        await producer.start()
        bodies = [f"r-{i}" for i in range(12)]
        for b in bodies:
            await producer.send(Message(TOPIC, b.encode()))
        queues = await producer.fetch_publish_message_queues(TOPIC)
        seen: Counter[str] = Counter()
        consumer = await start_consumer(cluster, seen)
        try:
            await wait_for(lambda: all(seen[b] == 1 for b in bodies), 10, "first delivery")
            consumer.instance.reset_offset_wait = 0.2
            channel = broker_channel(cluster, consumer.client_id)
            for form in (ResetOffsetBody, ResetOffsetBodyForC):  # Java's fastjson form, then the list form
                before = sum(seen.values())
                table: dict[MessageQueue, int] = {mq: 0 for mq in queues}
                request = RemotingCommand.create_request(
                    RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                    {"topic": TOPIC, "group": GROUP, "timestamp": "0", "isForce": "true"},
                    form(table).encode(),
                    oneway=True,
                )
                await channel.invoke_oneway(request)
                await wait_for(lambda b=before: sum(seen.values()) >= b + len(bodies), 10, "redelivery")  # type: ignore[misc]
            assert all(seen[b] == 3 for b in bodies), seen
        finally:
            await consumer.shutdown()
            await producer.shutdown()
        # shutdown persisted the offsets: the group is back at the end of every queue
        offsets = cluster.broker.consumer_offset_manager.query_offset_table(GROUP, TOPIC)
        assert sum(offsets.values()) == len(bodies), offsets


async def test_get_consumer_running_info_describes_the_consumer(tmp_path: Path) -> None:
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="info-pg")
        await producer.start()
        await producer.send(Message(TOPIC, b"x"))
        seen: Counter[str] = Counter()
        consumer = await start_consumer(cluster, seen)
        try:
            await wait_for(lambda: seen["x"] == 1, 10, "the message")
            channel = broker_channel(cluster, consumer.client_id)
            request = RemotingCommand.create_request(
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": GROUP, "clientId": consumer.client_id},
            )
            response = await channel.invoke(request, 5.0)
            assert response.code == ResponseCode.SUCCESS, response.remark
            info = fastjson_loads(response.body)
            assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
            assert info["properties"]["consumerGroup"] == GROUP
            assert {s["topic"] for s in info["subscriptionSet"]} == {TOPIC, f"%RETRY%{GROUP}"}
            owned = {dict(k)["queueId"] for k in info["mqTable"] if dict(k)["topic"] == TOPIC}
            assert owned == {0, 1, 2, 3}
            assert set(info["statusTable"]) == {TOPIC, f"%RETRY%{GROUP}"}

            unknown = RemotingCommand.create_request(
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": "nope", "clientId": consumer.client_id},
            )
            response = await channel.invoke(unknown, 5.0)
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert "nope" in (response.remark or "")
        finally:
            await consumer.shutdown()
            await producer.shutdown()
