"""Client management against a real broker over sockets: heartbeats, group membership, notify, locks.

Two raw ``RemotingClient`` "consumers" heartbeat into one group; the first must receive
NOTIFY_CONSUMER_IDS_CHANGED (40) when the second joins, unregisters, and disconnects.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tidemq.protocol.body import (
    ConsumerConnection,
    GetConsumerListByGroupResponseBody,
    LockBatchResponseBody,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import MessageQueue
from tidemq.remoting.channel import Channel
from tidemq.remoting.client import RemotingClient
from tidemq.testing import Cluster, run_cluster

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpp_client"
TIMEOUT = 3.0


def java_heartbeat(client_id: str, group: str, topics: list[str]) -> bytes:
    """A Java-style HeartbeatData body (enum names, numeric subVersion)."""
    subs = [
        {
            "classFilterMode": False,
            "codeSet": [],
            "expressionType": "TAG",
            "subString": "*",
            "subVersion": 1_700_000_000_000,
            "tagsSet": [],
            "topic": t,
        }
        for t in [*topics, f"%RETRY%{group}"]
    ]
    return orjson.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "consumeType": "CONSUME_PASSIVELY",
                    "groupName": group,
                    "messageModel": "CLUSTERING",
                    "subscriptionDataSet": subs,
                    "unitMode": False,
                }
            ],
            "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
        }
    )


def cpp_heartbeat_from_fixture() -> tuple[dict[str, Any], bytes]:
    """The first HEART_BEAT frame the real C++ client sent in the captured fixtures."""
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") == "frame" and rec.get("direction") == "c2s" and rec["header"]["code"] == 34:
                return rec["header"], bytes.fromhex(rec["body_hex"])
    raise AssertionError("no C++ HEART_BEAT frame in tests/fixtures/cpp_client")


class RawConsumer:
    """A bare remoting client acting as one consumer; records NOTIFY_CONSUMER_IDS_CHANGED it gets."""

    def __init__(self, broker_addr: str, client_id: str) -> None:
        self.broker_addr = broker_addr
        self.client_id = client_id
        self.client = RemotingClient()
        self.client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self)
        self.notified: list[str] = []
        self._cond = asyncio.Condition()

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        assert request.is_oneway
        async with self._cond:
            self.notified.append(request.ext_fields["consumerGroup"])
            self._cond.notify_all()
        return None

    async def wait_notified(self, count: int, within: float = TIMEOUT) -> None:
        """Wait until ``count`` notifications arrived; TimeoutError after ``within`` seconds."""
        async with self._cond:
            await asyncio.wait_for(self._cond.wait_for(lambda: len(self.notified) >= count), within)

    async def invoke(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        request = RemotingCommand.create_request(code, ext or {}, body)
        return await self.client.invoke(self.broker_addr, request, TIMEOUT)

    async def heartbeat(self, group: str, topics: list[str]) -> RemotingCommand:
        return await self.invoke(RequestCode.HEART_BEAT, body=java_heartbeat(self.client_id, group, topics))

    async def consumer_ids(self, group: str) -> RemotingCommand:
        return await self.invoke(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with run_cluster(tmp_path) as c:
        yield c


@pytest.fixture
async def consumers(cluster: Cluster) -> AsyncIterator[tuple[RawConsumer, RawConsumer]]:
    a = RawConsumer(cluster.broker_addr, "10.0.0.1@111#DEFAULT")
    b = RawConsumer(cluster.broker_addr, "10.0.0.2@222#DEFAULT")
    try:
        yield a, b
    finally:
        await a.client.close()
        await b.client.close()


async def test_members_are_notified_when_one_joins_leaves_and_disconnects(
    consumers: tuple[RawConsumer, RawConsumer],
) -> None:
    a, b = consumers
    resp = await a.heartbeat("G", ["T"])
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await a.wait_notified(1)  # its own arrival counts as a change too (Java does the same)

    # b joins: both are told
    assert (await b.heartbeat("G", ["T"])).code == ResponseCode.SUCCESS
    await a.wait_notified(2)
    await b.wait_notified(1)
    assert a.notified == ["G", "G"]

    resp = await a.consumer_ids("G")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    ids = GetConsumerListByGroupResponseBody.decode(resp.body).consumer_id_list
    assert ids == sorted([a.client_id, b.client_id])

    # a repeated heartbeat with the same topics changes nothing
    assert (await b.heartbeat("G", ["T"])).code == ResponseCode.SUCCESS
    # b unregisters: a is told, the list shrinks
    resp = await b.invoke(
        RequestCode.UNREGISTER_CLIENT, {"clientID": b.client_id, "consumerGroup": "G", "producerGroup": "P"}
    )
    assert resp.code == ResponseCode.SUCCESS
    await a.wait_notified(3)
    resp = await a.consumer_ids("G")
    assert GetConsumerListByGroupResponseBody.decode(resp.body).consumer_id_list == [a.client_id]

    # b comes back and then its connection drops: a is told each time
    assert (await b.heartbeat("G", ["T"])).code == ResponseCode.SUCCESS
    await a.wait_notified(4)
    await b.client.close()
    await a.wait_notified(5)
    resp = await a.consumer_ids("G")
    assert GetConsumerListByGroupResponseBody.decode(resp.body).consumer_id_list == [a.client_id]
    assert a.notified == ["G"] * 5


async def test_topic_set_change_notifies_the_group(consumers: tuple[RawConsumer, RawConsumer]) -> None:
    a, b = consumers
    await a.heartbeat("G", ["T"])
    await b.heartbeat("G", ["T"])
    await a.wait_notified(2)
    await b.heartbeat("G", ["T", "U"])
    await a.wait_notified(3)
    resp = await a.invoke(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    conn = ConsumerConnection.decode(resp.body)
    assert sorted(c.client_id for c in conn.connection_set) == sorted([a.client_id, b.client_id])
    assert set(conn.subscription_table) == {"T", "U", "%RETRY%G"}


async def test_unknown_group_answers(consumers: tuple[RawConsumer, RawConsumer]) -> None:
    a, _ = consumers
    resp = await a.consumer_ids("NoSuchGroup")
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "no consumer for this group, NoSuchGroup"
    resp = await a.invoke(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "NoSuchGroup"})
    assert resp.code == ResponseCode.CONSUMER_NOT_ONLINE
    resp = await a.invoke(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {})
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark and "consumerGroup" in resp.remark


async def test_bad_heartbeat_body_is_rejected_with_a_reason(
    consumers: tuple[RawConsumer, RawConsumer],
) -> None:
    a, _ = consumers
    resp = await a.invoke(RequestCode.HEART_BEAT, body=b"{not json")
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark and "HEART_BEAT" in resp.remark
    resp = await a.invoke(RequestCode.HEART_BEAT)
    assert resp.code == ResponseCode.SYSTEM_ERROR


async def test_cpp_heartbeat_is_accepted_and_retry_topic_routable(cluster: Cluster) -> None:
    header, body = cpp_heartbeat_from_fixture()
    group = json.loads(body)["consumerDataSet"][0]["groupName"]
    client = RemotingClient()
    try:
        request = RemotingCommand.create_request(RequestCode.HEART_BEAT, dict(header["extFields"]), body)
        request.language = "CPP"
        request.version = int(header["version"])
        resp = await client.invoke(cluster.broker_addr, request, TIMEOUT)
        assert resp.code == ResponseCode.SUCCESS, resp.remark

        info = cluster.broker.consumer_manager.get_consumer_group_info(group)
        assert info is not None
        assert info.get_all_client_ids() == [json.loads(body)["clientID"]]
        assert str(info.message_model.value) == "CLUSTERING"
        assert f"%RETRY%{group}" in info.subscription_table
        assert info.channel_info_table[next(iter(info.channel_info_table))].language == "CPP"

        # the retry topic exists on the broker and the name server serves a route for it
        route_req = RemotingCommand.create_request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"%RETRY%{group}"}
        )
        route = await client.invoke(cluster.namesrv_addr, route_req, TIMEOUT)
        assert route.code == ResponseCode.SUCCESS, route.remark
    finally:
        await client.close()


async def test_lock_batch_between_two_clients(consumers: tuple[RawConsumer, RawConsumer]) -> None:
    a, b = consumers
    mqs = [MessageQueue("T", "broker-a", i) for i in range(3)]

    def lock_body(client_id: str, queues: list[MessageQueue]) -> bytes:
        return orjson.dumps(
            {"clientId": client_id, "consumerGroup": "G", "mqSet": [q.to_json() for q in queues]}
        )

    resp = await a.invoke(RequestCode.LOCK_BATCH_MQ, body=lock_body(a.client_id, mqs[:2]))
    assert resp.code == ResponseCode.SUCCESS
    assert LockBatchResponseBody.decode(resp.body).lock_ok_mq_set == set(mqs[:2])
    resp = await b.invoke(RequestCode.LOCK_BATCH_MQ, body=lock_body(b.client_id, mqs))
    assert LockBatchResponseBody.decode(resp.body).lock_ok_mq_set == {mqs[2]}
    # a renews (answer includes renewals), then releases queue 0 which b can then take
    resp = await a.invoke(RequestCode.LOCK_BATCH_MQ, body=lock_body(a.client_id, mqs[:2]))
    assert LockBatchResponseBody.decode(resp.body).lock_ok_mq_set == set(mqs[:2])
    resp = await a.invoke(RequestCode.UNLOCK_BATCH_MQ, body=lock_body(a.client_id, mqs[:1]))
    assert resp.code == ResponseCode.SUCCESS
    resp = await b.invoke(RequestCode.LOCK_BATCH_MQ, body=lock_body(b.client_id, mqs[:1]))
    assert LockBatchResponseBody.decode(resp.body).lock_ok_mq_set == {mqs[0]}
    resp = await a.invoke(RequestCode.LOCK_BATCH_MQ, body=b"[]")
    assert resp.code == ResponseCode.SYSTEM_ERROR


async def test_check_client_config(consumers: tuple[RawConsumer, RawConsumer]) -> None:
    a, _ = consumers

    def body(expression_type: str, expression: str = "a > 1") -> bytes:
        sub = {"topic": "T", "subString": expression, "expressionType": expression_type, "subVersion": 1}
        return orjson.dumps({"clientId": a.client_id, "group": "G", "subscriptionData": sub})

    assert (await a.invoke(RequestCode.CHECK_CLIENT_CONFIG, body=body("TAG"))).code == ResponseCode.SUCCESS
    # SQL92 filtering is on by default (tests/integration/test_sql92_filter.py has the rest)
    resp = await a.invoke(RequestCode.CHECK_CLIENT_CONFIG, body=body("SQL92"))
    assert resp.code == ResponseCode.SUCCESS
    resp = await a.invoke(RequestCode.CHECK_CLIENT_CONFIG, body=body("SQL92", "a >"))
    assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert resp.remark and resp.remark.startswith("Invalid MessageSelector.")
