"""NameServer over real sockets: brokers register, clients read routes, dead brokers vanish."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from tests.helpers import wait_for, wait_until
from tidemq.namesrv import NameServer, NamesrvConfig
from tidemq.namesrv.processor import body_crc32
from tidemq.protocol.body import (
    ClusterInfo,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import FrameDecoder, RemotingCommand
from tidemq.remoting import RemotingClient

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cpp_client"


@pytest.fixture
async def namesrv() -> AsyncIterator[NameServer]:
    ns = NameServer(NamesrvConfig(), host="127.0.0.1", port=0)
    await ns.start()
    yield ns
    await ns.shutdown()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    cli = RemotingClient()
    yield cli
    await cli.close()


def register_request(name: str, addr: str, *topics: str, compressed: bool = False) -> RemotingCommand:
    wrapper = TopicConfigSerializeWrapper({t: TopicConfig(t, 4, 4, 6) for t in topics}, DataVersion(1, 1))
    body = RegisterBrokerBody(wrapper).encode(compress=compressed)
    ext = {
        "brokerName": name,
        "brokerAddr": addr,
        "clusterName": "DefaultCluster",
        "haServerAddr": addr.replace("10911", "10912"),
        "brokerId": "0",
        "compressed": str(compressed).lower(),
        "bodyCrc32": str(body_crc32(body)),
    }
    return RemotingCommand.create_request(RequestCode.REGISTER_BROKER, ext, body)


async def get_route(client: RemotingClient, ns: NameServer, topic: str) -> RemotingCommand:
    request = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return await client.invoke(ns.addr, request, timeout=5.0)


async def wait_for_route_gone(
    client: RemotingClient, ns: NameServer, topic: str, within: float = 5.0
) -> None:
    """Ask for the route until the name server says TOPIC_NOT_EXIST (deadline, not a sleep)."""

    async def gone() -> bool:
        return (await get_route(client, ns, topic)).code == ResponseCode.TOPIC_NOT_EXIST

    await wait_until(gone, within, f"the route of {topic} to be dropped")


async def test_broker_registers_and_client_gets_route(namesrv: NameServer, client: RemotingClient) -> None:
    """A fake broker's REGISTER_BROKER makes its topics routable to a separate client."""
    broker = RemotingClient()
    try:
        response = await broker.invoke(
            namesrv.addr, register_request("broker-a", "10.1.2.3:10911", "TopicA", "TBW102"), 5.0
        )
        assert response.code == ResponseCode.SUCCESS
        route_response = await get_route(client, namesrv, "TopicA")
        assert route_response.code == ResponseCode.SUCCESS
        route = TopicRouteData.decode(route_response.body)
        assert [(b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
            ("broker-a", {0: "10.1.2.3:10911"})
        ]
        assert [(q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [(4, 4, 6)]
        raw = orjson.loads(route_response.body)
        assert raw["brokerDatas"][0]["brokerAddrs"] == {"0": "10.1.2.3:10911"}
        assert raw["filterServerTable"] == {}
        cluster = await client.invoke(
            namesrv.addr, RemotingCommand.create_request(RequestCode.GET_BROKER_CLUSTER_INFO), 5.0
        )
        assert ClusterInfo.decode(cluster.body).cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    finally:
        await broker.close()


async def test_compressed_registration_over_the_wire(namesrv: NameServer, client: RemotingClient) -> None:
    """A compressed RegisterBrokerBody (as Java brokers send with compressedRegister) works too."""
    broker = RemotingClient()
    try:
        request = register_request("broker-z", "10.1.2.9:10911", "Zipped", compressed=True)
        assert (await broker.invoke(namesrv.addr, request, 5.0)).code == ResponseCode.SUCCESS
        assert (await get_route(client, namesrv, "Zipped")).code == ResponseCode.SUCCESS
    finally:
        await broker.close()


async def test_broker_connection_close_removes_routes(namesrv: NameServer, client: RemotingClient) -> None:
    """When the broker's connection closes its topics disappear at once; other brokers stay."""
    broker_a, broker_b = RemotingClient(), RemotingClient()
    try:
        await broker_a.invoke(
            namesrv.addr, register_request("broker-a", "10.1.2.3:10911", "Shared", "OnlyA"), 5.0
        )
        await broker_b.invoke(namesrv.addr, register_request("broker-b", "10.1.2.4:10911", "Shared"), 5.0)
        await broker_a.close()
        await wait_for_route_gone(client, namesrv, "OnlyA")
        shared = TopicRouteData.decode((await get_route(client, namesrv, "Shared")).body)
        assert [b.broker_name for b in shared.broker_datas] == ["broker-b"]
    finally:
        await broker_a.close()
        await broker_b.close()


async def test_client_connection_close_keeps_routes(namesrv: NameServer) -> None:
    """A plain client disconnecting does not disturb the brokers' routes."""
    broker, reader_client = RemotingClient(), RemotingClient()
    try:
        await broker.invoke(namesrv.addr, register_request("broker-a", "10.1.2.3:10911", "TopicA"), 5.0)
        await get_route(reader_client, namesrv, "TopicA")
        await reader_client.close()
        checker = RemotingClient()
        try:
            assert (await get_route(checker, namesrv, "TopicA")).code == ResponseCode.SUCCESS
        finally:
            await checker.close()
    finally:
        await broker.close()


async def test_silent_broker_expires() -> None:
    """A broker that stops registering is dropped by the periodic scan (short expiry for the test)."""
    ns = NameServer(
        host="127.0.0.1",
        port=0,
        broker_channel_expired_time=0.2,
        scan_not_active_broker_interval=0.05,
        scan_not_active_broker_delay=0.0,
    )
    await ns.start()
    broker, client = RemotingClient(), RemotingClient()
    try:
        await broker.invoke(ns.addr, register_request("broker-a", "10.1.2.3:10911", "TopicA"), 5.0)
        assert (await get_route(client, ns, "TopicA")).code == ResponseCode.SUCCESS
        await wait_for_route_gone(client, ns, "TopicA")
        # The expired broker's connection was closed by the name server.
        await wait_for(
            lambda: not broker.channels, 5.0, "the name server to close the expired broker's connection"
        )
    finally:
        await broker.close()
        await client.close()
        await ns.shutdown()


async def test_unknown_topic_and_bad_header(namesrv: NameServer, client: RemotingClient) -> None:
    """Unknown topic -> TOPIC_NOT_EXIST; a request missing its header field -> SYSTEM_ERROR naming it."""
    missing = await get_route(client, namesrv, "Nope")
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert missing.remark is not None and missing.remark.startswith(
        "No topic route info in name server for the topic: Nope"
    )
    bad = await client.invoke(
        namesrv.addr, RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC), 5.0
    )
    assert bad.code == ResponseCode.SYSTEM_ERROR and "topic" in (bad.remark or "")
    odd = await client.invoke(namesrv.addr, RemotingCommand.create_request(RequestCode.PULL_MESSAGE), 5.0)
    assert odd.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_cpp_client_route_request(namesrv: NameServer, client: RemotingClient) -> None:
    """The real C++ client's GET_ROUTEINFO_BY_TOPIC frame gets a route its JSON parser accepts."""
    with (FIXTURES / "cpp_client-producer-send.jsonl").open() as fh:
        record = next(
            r
            for r in map(json.loads, fh)
            if r.get("direction") == "c2s" and r.get("code_name") == "GET_ROUTEINFO_BY_TOPIC"
        )
    topic = record["header"]["extFields"]["topic"]
    broker = RemotingClient()
    try:
        await broker.invoke(namesrv.addr, register_request("broker-a", "127.0.0.1:10911", topic), 5.0)
        reader, writer = await asyncio.open_connection("127.0.0.1", namesrv.port)
        writer.write(base64.b64decode(record["raw_b64"]))
        decoder = FrameDecoder()
        frames: list[RemotingCommand] = []
        async with asyncio.timeout(5.0):
            while not frames:
                frames += decoder.feed(await reader.read(65536))
        writer.close()
        response = frames[0]
        assert response.code == ResponseCode.SUCCESS and response.opaque == 0 and response.is_response
        assert TopicRouteData.decode(response.body).queue_datas[0].broker_name == "broker-a"
    finally:
        await broker.close()
