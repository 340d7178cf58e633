"""SQL92 property filters end to end: the broker's pull and CHECK_CLIENT_CONFIG answers on the wire,
and tidemq's push and lite pull consumers subscribing with ``MessageSelector.by_sql``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from tests.helpers import SQL92_SELECTOR, SQL92_VECTORS, sql92_props, start_push_consumer, wait_for
from tests.integration.conftest import Wire
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext
from tidemq.client.consumer.pull import AsyncPullConsumer
from tidemq.client.consumer.selector import MessageSelector
from tidemq.client.producer.producer import AsyncProducer
from tidemq.errors import ClientError
from tidemq.protocol.body import ConsumerData, HeartbeatData, SubscriptionData
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import PullMessageRequestHeader, PullSysFlag
from tidemq.protocol.message import Message, MessageExt
from tidemq.protocol.message_codec import decode_messages
from tidemq.testing import Cluster, run_cluster

SQL = SQL92_SELECTOR
VECTORS = SQL92_VECTORS
_props = sql92_props


async def _sql_pull(
    wire: Wire, topic: str, offset: int, sql: str, *, group: str = "G", flag: bool = True
) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=0,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=PullSysFlag.build_sys_flag(False, False, flag, False),
        commit_offset=0,
        suspend_timeout_millis=0,
        subscription=sql if flag else None,
        sub_version=1,
        expression_type="SQL92",
    )
    return await wire.invoke(RequestCode.PULL_MESSAGE, header.to_ext_fields())


async def test_broker_pull_filters_by_properties_and_refuses_bad_expressions(
    wire: Wire, cluster: Cluster
) -> None:
    """A pull with an SQL92 subscription returns exactly the matching messages (§2.3 vectors); a range
    with no match answers PULL_RETRY_IMMEDIATELY past it; a bad expression gets 23 with the position;
    CHECK_CLIENT_CONFIG answers as RocketMQ's; with filtering off SQL92 is SYSTEM_ERROR."""
    await wire.create_topic("SqlT", 1)
    for i, (a, b, tag, _) in enumerate(VECTORS):
        props = _props(a, b) | ({"TAGS": tag} if tag else {}) | {"i": str(i)}
        assert (await wire.send("SqlT", f"m{i}".encode(), properties=props)).code == ResponseCode.SUCCESS
    response = await _sql_pull(wire, "SqlT", 0, SQL)
    assert response.code == ResponseCode.SUCCESS, response.remark
    got = [int(m.properties["i"]) for m in decode_messages(response.body)]
    assert got == [i for i, v in enumerate(VECTORS) if v[3]]
    assert response.ext_fields["nextBeginOffset"] == str(len(VECTORS))

    none = await _sql_pull(wire, "SqlT", 1, "a > 100")
    assert (none.code, none.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert none.ext_fields["nextBeginOffset"] == str(len(VECTORS))
    assert (await _sql_pull(wire, "SqlT", 0, "TAGS = 'another'")).code == ResponseCode.SUCCESS

    bad = await _sql_pull(wire, "SqlT", 0, "a > 5 AND")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert bad.remark.startswith("parse the consumer's subscription failed") and "column 10" in bad.remark

    # without the subscription bit the heartbeat's filter is used; one that did not compile -> 27
    heartbeat = HeartbeatData(
        client_id="127.0.0.1@hb",
        consumer_data_set=[
            ConsumerData(
                group_name=group,
                subscription_data_set=[SubscriptionData("SqlT", sql, sub_version=5, expression_type="SQL92")],
            )
            for group, sql in (("Hb", SQL), ("HbBad", "a >"))
        ],
    )
    assert (await wire.invoke(RequestCode.HEART_BEAT, body=heartbeat.encode())).code == ResponseCode.SUCCESS
    not_there = await _sql_pull(wire, "SqlT", 0, "a >", group="HbBad", flag=False)
    assert not_there.code == ResponseCode.FILTER_DATA_NOT_EXIST
    via_heartbeat = await _sql_pull(wire, "SqlT", 0, SQL, group="Hb", flag=False)
    assert via_heartbeat.code == ResponseCode.SUCCESS, via_heartbeat.remark
    assert len(decode_messages(via_heartbeat.body)) == 2

    async def check(sub: dict[str, object]) -> RemotingCommand:
        body = orjson.dumps({"clientId": "c", "group": "G", "subscriptionData": sub})
        return await wire.invoke(RequestCode.CHECK_CLIENT_CONFIG, {"clientId": "c", "group": "G"}, body)

    assert (await check({"topic": "SqlT", "subString": "*"})).code == ResponseCode.SUCCESS
    assert (
        await check({"topic": "SqlT", "subString": SQL, "expressionType": "SQL92"})
    ).code == ResponseCode.SUCCESS
    refused = await check({"topic": "SqlT", "subString": "a >> 1", "expressionType": "SQL92"})
    assert refused.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert refused.remark.startswith("Invalid MessageSelector.") and "column 4" in refused.remark

    cluster.broker.config.enable_property_filter = False
    off = await _sql_pull(wire, "SqlT", 0, SQL)
    assert (off.code, off.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "The broker does not support consumer to filter message by SQL92",
    )
    assert (
        await _sql_pull(wire, "SqlT", 0, "a >")
    ).code == ResponseCode.SUBSCRIPTION_PARSE_FAILED  # tested first
    assert (
        await check({"topic": "SqlT", "subString": SQL, "expressionType": "SQL92"})
    ).code == ResponseCode.SYSTEM_ERROR


async def test_push_and_lite_pull_consumers_get_exactly_the_matching_messages(tmp_path: Path) -> None:
    """``MessageSelector.by_sql`` on tidemq's push consumer (heartbeat filter, long polling on an
    empty queue) and lite pull consumer (filter in every pull) delivers exactly the matches."""
    async with run_cluster(tmp_path) as cluster:
        addr = cluster.namesrv_addr
        producer = AsyncProducer(namesrv_addr=addr, producer_group="sqlpg")
        await producer.start()
        await producer.send(Message("SqlC", b"creates the topic", properties={"a": "1"}))  # no match
        pushed: list[MessageExt] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            pushed.extend(msgs)

        push = await start_push_consumer(addr, "sql-push", "SqlC", listener, MessageSelector.by_sql(SQL))  # type: ignore[arg-type]
        pull = AsyncPullConsumer(
            namesrv_addr=addr, consumer_group="sql-pull", consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        pull.subscribe("SqlC", MessageSelector.by_sql(SQL))
        await pull.start()
        polled: list[MessageExt] = []
        try:
            for i, (a, b, tag, _) in enumerate(VECTORS):
                await producer.send(
                    Message("SqlC", f"m{i}", tags=tag, properties=_props(a, b) | {"i": str(i)})
                )
            want = sorted(str(i) for i, v in enumerate(VECTORS) if v[3])

            async def poll() -> None:
                while len(polled) < len(want):
                    polled.extend(await pull.poll(0.2))

            await asyncio.wait_for(poll(), 15)
            await wait_for(lambda: len(pushed) >= len(want), 15, "pushed matches")
            await asyncio.sleep(0)  # nothing else may arrive: the broker skipped the rest
            assert sorted(m.properties["i"] for m in pushed) == want
            assert sorted(m.properties["i"] for m in polled) == want
        finally:
            await pull.shutdown()
            await push.shutdown()
            await producer.shutdown()


async def test_push_consumer_start_fails_when_the_broker_refuses_sql92(tmp_path: Path) -> None:
    """As RocketMQ's client does (CHECK_CLIENT_CONFIG at start): a broker with property filtering
    off refuses the SQL92 subscription and ``start()`` raises with its remark."""
    async with run_cluster(tmp_path, enable_property_filter=False) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="sqloffpg")
        await producer.start()
        await producer.send(Message("SqlOff", b"creates the topic"))
        await producer.shutdown()

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            return None

        with pytest.raises(ClientError, match="does not support consumer to filter message by SQL92"):
            await start_push_consumer(
                cluster.namesrv_addr, "sql-off", "SqlOff", listener, MessageSelector.by_sql(SQL)
            )  # type: ignore[arg-type]


async def test_held_pull_waits_past_messages_that_do_not_match(wire: Wire, cluster: Cluster) -> None:
    """A long-polling SQL92 pull is not woken by arriving messages that do not match (as RocketMQ's
    hold service): its one answer is the matching message, not PULL_RETRY_IMMEDIATELY."""
    await wire.create_topic("SqlHold", 1)
    header = PullMessageRequestHeader(
        consumer_group="G",
        topic="SqlHold",
        queue_id=0,
        queue_offset=0,
        max_msg_nums=32,
        sys_flag=PullSysFlag.build_sys_flag(False, True, True, False),
        commit_offset=0,
        suspend_timeout_millis=20_000,
        subscription="a > 5",
        sub_version=1,
        expression_type="SQL92",
    )
    pull = asyncio.ensure_future(
        wire.invoke(RequestCode.PULL_MESSAGE, header.to_ext_fields(), rpc_timeout=30)
    )
    hold = cluster.broker.pull_request_hold_service
    await wait_for(lambda: hold.held_count == 1, 5, "the pull held")
    for a in ("1", "2", "3"):
        assert (await wire.send("SqlHold", b"no", properties={"a": a})).code == ResponseCode.SUCCESS
    assert (await wire.send("SqlHold", b"yes", properties={"a": "9"})).code == ResponseCode.SUCCESS
    response = await asyncio.wait_for(pull, 10)
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert [m.body for m in decode_messages(response.body)] == [b"yes"]
    assert response.ext_fields["nextBeginOffset"] == "4"
