"""Request-reply (SEND_REPLY_MESSAGE_V2 325 -> PUSH_REPLY_MESSAGE_TO_CLIENT 326) against an
in-process name server + broker: a round trip through a push consumer that answers, a request
nobody answers, and a reply whose requester is gone."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from tests.helpers import start_push_consumer
from tidemq.broker.processor.reply import ReplyMessageProcessor
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext
from tidemq.client.producer import request as request_module
from tidemq.client.producer.producer import AsyncProducer, Producer
from tidemq.client.producer.request import (
    RequestTimeoutError,
    create_reply_message,
    get_reply_to_client,
    pending_requests,
)
from tidemq.errors import BrokerError
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ClusterThread, run_cluster


def _reply_processor(broker: object) -> ReplyMessageProcessor:
    proc = broker.remoting_server._dispatcher.processors[325]  # type: ignore[attr-defined]
    assert isinstance(proc, ReplyMessageProcessor)
    return proc


async def test_request_reply_round_trip(tmp_path: Path) -> None:
    """A request comes back answered by a consumer; the reply carries the correlation properties."""
    async with run_cluster(tmp_path) as cluster:
        addr = cluster.namesrv_addr
        responder = AsyncProducer(namesrv_addr=addr, producer_group="rpc-responder")
        await responder.start()
        await responder.send(Message("RpcTopic", b"not a request"))  # the topic exists before the consumer
        seen: list[MessageExt] = []

        async def answer(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            for m in msgs:
                if get_reply_to_client(m) is None:
                    continue
                seen.append(m)
                await responder.send_reply(create_reply_message(m, b"pong:" + m.body))

        consumer = await start_push_consumer(addr, "rpc-server", "RpcTopic", answer)
        requester = AsyncProducer(namesrv_addr=addr, producer_group="rpc-client")
        await requester.start()
        try:
            for i in range(3):
                reply = await requester.request(Message("RpcTopic", f"ping{i}"), timeout_ms=8000)
                assert reply.body == f"pong:ping{i}".encode()
            request_msg = seen[-1]
            assert reply.topic == "DefaultCluster_REPLY_TOPIC"
            assert reply.get_property("MSG_TYPE") == "reply"
            assert reply.get_property("CORRELATION_ID") == request_msg.get_property("CORRELATION_ID")
            assert reply.get_property("REPLY_TO_CLIENT") == requester.client_id
            assert reply.get_property("TTL") == "8000"
            assert reply.get_property("ARRIVE_TIME") and reply.get_property("PUSH_REPLY_TIME")
            assert request_msg.get_property("CLUSTER") == "DefaultCluster"
            # concurrent requests each get their own answer
            tasks = [requester.request_async(Message("RpcTopic", f"c{i}"), 8000) for i in range(5)]
            assert sorted([(await t).body for t in tasks]) == [f"pong:c{i}".encode() for i in range(5)]
            assert pending_requests() == 0
            assert _reply_processor(cluster.broker).pushed == 8
        finally:
            await consumer.shutdown()
            await requester.shutdown()
            await responder.shutdown()


def test_request_times_out_when_nobody_answers(tmp_path: Path) -> None:
    """The blocking producer's request raises RequestTimeoutError after its timeout, nothing left pending;
    request_async reports the same error to its callback."""
    with ClusterThread(tmp_path) as cluster:
        producer = Producer(namesrv_addr=cluster.namesrv_addr, producer_group="lonely")
        producer.start()
        try:
            begin = time.monotonic()
            with pytest.raises(RequestTimeoutError, match="wait reply message timeout, 400 ms"):
                producer.request(Message("NobodyListens", b"hello?"), timeout_ms=400)
            assert 0.35 <= time.monotonic() - begin < 3.0
            errors: list[BaseException | None] = []
            fut = producer.request_async(
                Message("NobodyListens", b"again?"), lambda r, e: errors.append(e), timeout_ms=200
            )
            with pytest.raises(RequestTimeoutError):
                fut.result(5)
            assert len(errors) == 1 and isinstance(errors[0], RequestTimeoutError)
            assert pending_requests() == 0
            # after a timeout the next request to the topic heartbeats every broker first again
            assert "NobodyListens" not in request_module._ready.get(producer._core, set())
        finally:
            producer.shutdown()


async def test_reply_to_a_gone_requester_is_dropped_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A reply whose requester has shut down gets SYSTEM_ERROR at once, one broker log line, no retry."""
    async with run_cluster(tmp_path) as cluster:
        addr = cluster.namesrv_addr
        requester = AsyncProducer(namesrv_addr=addr, producer_group="gone-client")
        await requester.start()
        with pytest.raises(RequestTimeoutError):
            await requester.request(Message("GoneTopic", b"anyone?"), timeout_ms=200)
        gone_id = requester.client_id
        await requester.shutdown()
        request_msg = Message("GoneTopic", b"anyone?")
        request_msg.properties.update(
            {"CLUSTER": "DefaultCluster", "CORRELATION_ID": "c-1", "REPLY_TO_CLIENT": gone_id, "TTL": "200"}
        )
        responder = AsyncProducer(namesrv_addr=addr, producer_group="late-responder")
        await responder.start()
        try:
            caplog.set_level(logging.WARNING, logger="tidemq.broker.processor.reply")
            with pytest.raises(BrokerError, match=f"channel of <{gone_id}> not found") as info:
                await responder.send_reply(create_reply_message(request_msg, b"too late"))
            assert info.value.code == 1
            lines = [r for r in caplog.records if r.name == "tidemq.broker.processor.reply"]
            assert len(lines) == 1, [r.getMessage() for r in lines]
            assert _reply_processor(cluster.broker).dropped == 1
        finally:
            await responder.shutdown()


async def test_send_reply_message_v1_pushes_reply_header_to_the_requesters_connection(tmp_path: Path) -> None:
    """Wire level, as a Java requester sees it: SEND_REPLY_MESSAGE (324, long header names) is pushed
    with PUSH_REPLY_MESSAGE_TO_CLIENT (326) and ReplyMessageRequestHeader's fields to the connection
    that heartbeated the REPLY_TO_CLIENT client id; the 324 answer carries MSG_REGION / TRACE_ON."""
    from tidemq.protocol.body import HeartbeatData, ProducerData
    from tidemq.protocol.codes import RequestCode
    from tidemq.protocol.command import RemotingCommand
    from tidemq.protocol.headers import SendMessageRequestHeader
    from tidemq.protocol.message import properties_to_string, string_to_properties
    from tidemq.remoting import RemotingClient

    pushed: list[RemotingCommand] = []

    class Requester:
        async def process_request(self, channel: object, request: RemotingCommand) -> RemotingCommand:
            pushed.append(request)
            return RemotingCommand.create_response(0)

    async with run_cluster(tmp_path) as cluster:
        client = RemotingClient()
        client.register_processor(326, Requester())
        try:
            hb = HeartbeatData(
                client_id="10.9.8.7@wire", producer_data_set=[ProducerData(group_name="wire-pg")]
            )
            beat = RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, hb.encode())
            assert (await client.invoke(cluster.broker_addr, beat, 5)).code == 0
            props = {
                "MSG_TYPE": "reply",
                "CORRELATION_ID": "c-9",
                "REPLY_TO_CLIENT": "10.9.8.7@wire",
                "TTL": "3000",
            }
            header = SendMessageRequestHeader(
                producer_group="responder-pg",
                topic="DefaultCluster_REPLY_TOPIC",
                default_topic="TBW102",
                default_topic_queue_nums=4,
                queue_id=-1,
                sys_flag=0,
                born_timestamp=1700000000000,
                flag=3,
                properties=properties_to_string(props),
                reconsume_times=0,
            )
            request = RemotingCommand.create_request(324, header.to_ext_fields(), b"the answer")
            answer = await client.invoke(cluster.broker_addr, request, 5)
        finally:
            await client.close()
        assert answer.code == 0, answer.remark
        assert answer.ext_fields["MSG_REGION"] == "DefaultRegion" and answer.ext_fields["TRACE_ON"] == "true"
        assert answer.ext_fields["queueId"] == "0"
        (push,) = pushed
        f = push.ext_fields
        assert push.body == b"the answer"
        assert (f["producerGroup"], f["topic"], f["flag"], f["bornTimestamp"]) == (
            "responder-pg", "DefaultCluster_REPLY_TOPIC", "3", "1700000000000",
        )  # fmt: skip
        assert f["storeHost"] == cluster.broker_addr and f["bornHost"].startswith("127.0.0.1:")
        assert int(f["storeTimestamp"]) > 1700000000000
        pushed_props = string_to_properties(f["properties"])
        assert pushed_props["CORRELATION_ID"] == "c-9" and int(pushed_props["PUSH_REPLY_TIME"]) > 0


async def test_requests_recover_after_a_broker_restart(tmp_path: Path) -> None:
    """The restarted broker forgets the requester's connection (and the responder's pulls fail for a
    moment): requests time out for a while, then get their replies again."""
    async with run_cluster(tmp_path) as cluster:
        addr = cluster.namesrv_addr
        responder = AsyncProducer(namesrv_addr=addr, producer_group="rs-responder")
        await responder.start()
        await responder.send(Message("RestartRpc", b"not a request"))

        async def answer(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            for m in msgs:
                if get_reply_to_client(m) is not None:
                    await responder.send_reply(create_reply_message(m, b"ok"))

        consumer = await start_push_consumer(addr, "rs-server", "RestartRpc", answer)
        requester = AsyncProducer(namesrv_addr=addr, producer_group="rs-client")
        await requester.start()
        try:
            assert (await requester.request(Message("RestartRpc", b"before"), timeout_ms=8000)).body == b"ok"
            await cluster.restart_broker()
            deadline = time.monotonic() + 15
            while True:
                try:
                    reply = await requester.request(Message("RestartRpc", b"after"), timeout_ms=1500)
                    break
                except RequestTimeoutError:
                    assert time.monotonic() < deadline, "no reply after the restart"
            assert reply.body == b"ok"
        finally:
            await consumer.shutdown()
            await requester.shutdown()
            await responder.shutdown()
