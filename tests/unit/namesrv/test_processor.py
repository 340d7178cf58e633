"""DefaultRequestProcessor: name server request handling, called directly (no sockets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidemq.namesrv import KVConfigManager, NamesrvConfig, RouteInfoManager
from tidemq.namesrv.processor import DefaultRequestProcessor, body_crc32
from tidemq.protocol.body import (
    ClusterInfo,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand

NOW = 1_700_000_000_000


def make(order: bool = False, kv_path: Path | None = None) -> DefaultRequestProcessor:
    config = NamesrvConfig(order_message_enable=order, kv_config_path=str(kv_path) if kv_path else None)
    return DefaultRequestProcessor(
        RouteInfoManager(), KVConfigManager(config.kv_config_path), config, lambda: NOW
    )


def register_request(
    *topics: str, compressed: bool = False, crc: int | None = None, broker_id: int = 0, name: str = "broker-a"
) -> RemotingCommand:
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper({t: TopicConfig(t, 4, 4, 6) for t in topics}, DataVersion(NOW, 1))
    ).encode(compress=compressed)
    ext = {
        "brokerName": name,
        "brokerAddr": f"10.0.0.5:{10911 + broker_id}",
        "clusterName": "DefaultCluster",
        "haServerAddr": "10.0.0.5:10912",
        "brokerId": str(broker_id),
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(body_crc32(body) if crc is None else crc),
    }
    return RemotingCommand.create_request(RequestCode.REGISTER_BROKER, ext, body)


async def call(p: DefaultRequestProcessor, code: int, ext: dict[str, str] | None = None) -> RemotingCommand:
    response = await p.process_request(None, RemotingCommand.create_request(code, ext))  # type: ignore[arg-type]
    assert response is not None
    return response


def route_of(p: DefaultRequestProcessor, topic: str) -> TopicRouteData:
    response = p.get_route_info_by_topic(None, RemotingCommand.create_request(105, {"topic": topic}))
    assert response.code == ResponseCode.SUCCESS, response.remark
    return TopicRouteData.decode(response.body)


@pytest.mark.parametrize("compressed", [False, True])
def test_register_broker_plain_and_compressed(compressed: bool) -> None:
    """Both body forms register the broker's topics; the route lists them."""
    p = make()
    response = p.register_broker(None, register_request("TopicA", "TBW102", compressed=compressed))
    assert response.code == ResponseCode.SUCCESS
    route = route_of(p, "TopicA")
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.5:10911"}
    assert route.queue_datas[0].write_queue_nums == 4


def test_register_broker_crc_mismatch_is_rejected() -> None:
    """A bodyCrc32 that does not match the body gets SYSTEM_ERROR 'crc32 not match' and no change."""
    p = make()
    response = p.register_broker(None, register_request("TopicA", crc=12345))
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert p.route_info_manager.pick_topic_route_data("TopicA") is None


def test_register_broker_crc_zero_is_not_checked() -> None:
    """bodyCrc32=0 means 'do not check'."""
    p = make()
    assert p.register_broker(None, register_request("TopicA", crc=0)).code == ResponseCode.SUCCESS


def test_register_broker_slave_gets_master_addresses() -> None:
    """A slave's REGISTER_BROKER response names the master's address and HA address."""
    p = make()
    p.register_broker(None, register_request("TopicA"))
    response = p.register_broker(None, register_request(broker_id=1))
    assert response.ext_fields == {"masterAddr": "10.0.0.5:10911", "haServerAddr": "10.0.0.5:10912"}


async def test_register_broker_missing_header_field_is_protocol_error() -> None:
    """A REGISTER_BROKER without brokerName raises a HeaderError naming the field."""
    from tidemq.protocol.headers import HeaderError

    p = make()
    request = register_request("TopicA")
    del request.ext_fields["brokerName"]
    with pytest.raises(HeaderError, match="brokerName"):
        p.register_broker(None, request)


def test_register_broker_answers_order_topic_kv_table() -> None:
    """The REGISTER_BROKER response body is the ORDER_TOPIC_CONFIG KV table when there is one."""
    p = make()
    assert p.register_broker(None, register_request("TopicA")).body == b""
    p.kv_config_manager.put_kv_config("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4")
    body = p.register_broker(None, register_request("TopicA")).body
    assert KVTable.decode(body).table == {"TopicA": "broker-a:4"}


async def test_unknown_topic_gets_rocketmq_remark() -> None:
    """GET_ROUTEINFO_BY_TOPIC for an unknown topic: TOPIC_NOT_EXIST, RocketMQ's remark, no body."""
    response = await call(make(), RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark == (
        "No topic route info in name server for the topic: Nope\n"
        "See http://rocketmq.apache.org/docs/faq/ for further details."
    )
    assert response.body == b""


async def test_order_topic_conf_only_when_enabled() -> None:
    """orderTopicConf comes from the KV store when order_message_enable is set."""
    for enabled in (False, True):
        p = make(order=enabled)
        p.register_broker(None, register_request("TopicA"))
        p.kv_config_manager.put_kv_config("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4")
        assert route_of(p, "TopicA").order_topic_conf == ("broker-a:4" if enabled else None)


async def test_unregister_broker_removes_route() -> None:
    """UNREGISTER_BROKER makes the broker's topics unroutable."""
    p = make()
    p.register_broker(None, register_request("TopicA"))
    ext = {
        "brokerName": "broker-a",
        "brokerAddr": "10.0.0.5:10911",
        "clusterName": "DefaultCluster",
        "brokerId": "0",
    }
    assert (await call(p, RequestCode.UNREGISTER_BROKER, ext)).code == ResponseCode.SUCCESS
    response = await call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})
    assert response.code == ResponseCode.TOPIC_NOT_EXIST


async def test_cluster_info_and_topic_lists() -> None:
    """GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST and GET_TOPICS_BY_CLUSTER describe what registered."""
    p = make()
    p.register_broker(None, register_request("TopicA", "TopicB"))
    info = ClusterInfo.decode((await call(p, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.5:10911"}
    topics = TopicList.decode((await call(p, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)
    assert topics.topic_list == {"TopicA", "TopicB"}
    by_cluster = await call(p, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"})
    assert TopicList.decode(by_cluster.body).topic_list == {"TopicA", "TopicB"}


async def test_delete_topic_in_namesrv() -> None:
    """DELETE_TOPIC_IN_NAMESRV removes the topic's route."""
    p = make()
    p.register_broker(None, register_request("TopicA"))
    assert (
        await call(p, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicA"})
    ).code == ResponseCode.SUCCESS
    assert (
        await call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})
    ).code == ResponseCode.TOPIC_NOT_EXIST


async def test_wipe_write_perm_counts_topics() -> None:
    """WIPE_WRITE_PERM_OF_BROKER answers wipeTopicCount and leaves routes read-only."""
    p = make()
    p.register_broker(None, register_request("TopicA", "TopicB"))
    response = await call(p, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert response.ext_fields == {"wipeTopicCount": "2"}
    assert route_of(p, "TopicA").queue_datas[0].perm == 4


async def test_kv_config_round_trip(tmp_path: Path) -> None:
    """PUT/GET/DELETE_KV_CONFIG and GET_KVLIST_BY_NAMESPACE behave like RocketMQ's, and persist."""
    path = tmp_path / "kvConfig.json"
    p = make(kv_path=path)
    ns = {"namespace": "NS", "key": "k"}
    missing = await call(p, RequestCode.GET_KV_CONFIG, ns)
    assert (missing.code, missing.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "No config item, Namespace: NS Key: k",
    )
    assert (await call(p, RequestCode.PUT_KV_CONFIG, {**ns, "value": "v1"})).code == ResponseCode.SUCCESS
    got = await call(p, RequestCode.GET_KV_CONFIG, ns)
    assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": "v1"})
    listed = await call(p, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
    assert KVTable.decode(listed.body).table == {"k": "v1"}
    reloaded = KVConfigManager(path)
    reloaded.load()
    assert reloaded.get_kv_config("NS", "k") == "v1"
    await call(p, RequestCode.DELETE_KV_CONFIG, ns)
    assert (await call(p, RequestCode.GET_KV_CONFIG, ns)).code == ResponseCode.QUERY_NOT_FOUND
    none = await call(p, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "Other"})
    assert (none.code, none.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: Other")


async def test_query_data_version() -> None:
    """QUERY_DATA_VERSION says whether the broker's topic table changed since it registered."""
    p = make()
    p.register_broker(None, register_request("TopicA"))
    same = RemotingCommand.create_request(
        RequestCode.QUERY_DATA_VERSION, {"brokerAddr": "10.0.0.5:10911"}, DataVersion(NOW, 1).encode()
    )
    response = p.query_broker_topic_config(None, same)
    assert response.ext_fields == {"changed": "false"}
    assert DataVersion.decode(response.body) == DataVersion(NOW, 1)
    newer = RemotingCommand.create_request(
        RequestCode.QUERY_DATA_VERSION, {"brokerAddr": "10.0.0.5:10911"}, DataVersion(NOW, 2).encode()
    )
    assert p.query_broker_topic_config(None, newer).ext_fields == {"changed": "true"}
