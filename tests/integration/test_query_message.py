"""Message lookups against a real broker: QUERY_MESSAGE by key and by unique key, VIEW_MESSAGE_BY_ID,
through the client API and as raw requests, after a clean restart and after a SIGKILL."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tidemq.client.producer.producer import AsyncProducer
from tidemq.errors import ClientError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import QueryMessageRequestHeader
from tidemq.protocol.message import Message, SendResult
from tidemq.protocol.message_codec import decode_messages
from tidemq.remoting import RemotingClient
from tidemq.testing import ServeProcess, run_cluster

TOPIC = "QueryT"
FOREVER = 2**63 - 1


def order(i: int) -> Message:
    msg = Message(TOPIC, f"order {i}".encode())
    msg.keys = f"order-{i} customer-{i % 3}"
    return msg


async def send_orders(producer: AsyncProducer, n: int) -> list[SendResult]:
    return [await producer.send(order(i)) for i in range(n)]


async def raw_query(
    addr: str, key: str, *, unique: bool = False, max_num: int = 32, begin: int = 0, end: int = FOREVER
) -> RemotingCommand:
    header = QueryMessageRequestHeader(
        topic=TOPIC, key=key, max_num=max_num, begin_timestamp=begin, end_timestamp=end
    )
    ext = header.to_ext_fields()
    ext["_UNIQUE_KEY_QUERY"] = "true" if unique else "false"
    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.create_request(RequestCode.QUERY_MESSAGE, ext), 5)
    finally:
        await client.close()


def bodies(response: RemotingCommand) -> list[bytes]:
    return sorted(m.body for m in decode_messages(response.body))


async def test_query_by_key_and_unique_key_with_the_client_api(tmp_path: Path) -> None:
    async with (
        run_cluster(tmp_path) as cluster,
        AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="query-pg") as producer,
    ):
        sent = await send_orders(producer, 9)
        result = await producer.query_message(TOPIC, "customer-1", 32, 0, FOREVER)
        assert sorted(m.body for m in result.message_list) == [b"order 1", b"order 4", b"order 7"]
        assert result.index_last_update_timestamp > 0
        only = await producer.query_message(TOPIC, "order-5", 32, 0, FOREVER)
        assert [m.body for m in only.message_list] == [b"order 5"]
        assert only.message_list[0].keys == "order-5 customer-2"
        with pytest.raises(ClientError, match="no message"):
            await producer.query_message(TOPIC, "order-99", 32, 0, FOREVER)
        later = int(time.time() * 1000) + 60_000
        with pytest.raises(ClientError):
            await producer.query_message(TOPIC, "order-5", 32, later, FOREVER)

        by_uniq = await producer.view_message(sent[4].msg_id, TOPIC)  # client id (UNIQ_KEY)
        assert by_uniq.body == b"order 4" and by_uniq.msg_id == sent[4].msg_id
        by_offset = await producer.view_message(sent[6].offset_msg_id)  # broker's offset msg id
        assert by_offset.body == b"order 6" and by_offset.offset_msg_id == sent[6].offset_msg_id
        with pytest.raises(ClientError, match="not found"):
            await producer.view_message("0A0B0C0D00002A9F0000000000ABCDEF", TOPIC)


async def test_raw_query_message_request(tmp_path: Path) -> None:
    async with run_cluster(tmp_path) as cluster:
        async with AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="query-pg") as producer:
            sent = await send_orders(producer, 6)
        resp = await raw_query(cluster.broker_addr, "customer-0")
        assert resp.code == ResponseCode.SUCCESS
        assert bodies(resp) == [b"order 0", b"order 3"]
        assert int(resp.ext_fields["indexLastUpdateTimestamp"]) > 0
        assert int(resp.ext_fields["indexLastUpdatePhyoffset"]) > 0
        newest = await raw_query(cluster.broker_addr, "customer-0", max_num=1)
        assert bodies(newest) == [b"order 3"]

        uniq = await raw_query(
            cluster.broker_addr, sent[2].msg_id, unique=True, max_num=0
        )  # maxNum forced to 32
        assert uniq.code == ResponseCode.SUCCESS and bodies(uniq) == [b"order 2"]

        missing = await raw_query(cluster.broker_addr, "nobody")
        assert missing.code == ResponseCode.QUERY_NOT_FOUND
        assert missing.remark == "can not find message, maybe time range not correct"
        assert "indexLastUpdateTimestamp" in missing.ext_fields

        bad = RemotingCommand.create_request(RequestCode.QUERY_MESSAGE, {"topic": TOPIC, "key": "k"})
        client = RemotingClient()
        try:
            answer = await client.invoke(cluster.broker_addr, bad, 5)
        finally:
            await client.close()
        assert answer.code == ResponseCode.SYSTEM_ERROR and "maxNum" in (answer.remark or "")


async def test_query_after_a_clean_restart(tmp_path: Path) -> None:
    async with run_cluster(tmp_path) as cluster:
        async with AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="query-pg") as producer:
            sent = await send_orders(producer, 6)
        await cluster.restart_broker()
        resp = await raw_query(cluster.broker_addr, "customer-2")
        assert bodies(resp) == [b"order 2", b"order 5"]
        async with AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="query-pg2") as producer:
            assert (await producer.view_message(sent[1].msg_id, TOPIC)).body == b"order 1"
            await producer.send(order(7))
            result = await producer.query_message(TOPIC, "customer-1", 32, 0, FOREVER)
            assert sorted(m.body for m in result.message_list) == [b"order 1", b"order 4", b"order 7"]


def test_query_after_sigkill(tmp_path: Path) -> None:
    """Keys sent before a SIGKILL are found after restart (the index is rebuilt from the commit log)."""
    import asyncio

    store = tmp_path / "store"
    proc = ServeProcess(store, flush="async").start()
    try:

        async def produce() -> list[SendResult]:
            async with AsyncProducer(namesrv_addr=proc.namesrv_addr, producer_group="crash-pg") as producer:
                return await send_orders(producer, 12)

        sent = asyncio.run(produce())
    finally:
        proc.kill()
    proc2 = ServeProcess(store, flush="async").start()
    try:

        async def verify() -> None:
            resp = await raw_query(proc2.broker_addr, "customer-1")
            assert bodies(resp) == sorted(f"order {i}".encode() for i in (1, 4, 7, 10))
            async with AsyncProducer(namesrv_addr=proc2.namesrv_addr, producer_group="crash-pg") as producer:
                msg = await producer.view_message(sent[11].msg_id, TOPIC)
                assert msg.body == b"order 11"

        asyncio.run(verify())
    finally:
        proc2.stop()
