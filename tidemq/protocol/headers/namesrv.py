"""Name-server headers: broker registration, routes, KV config."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.protocol.headers.base import CommandHeader, b, i32, i64, s


@dataclass(slots=True, kw_only=True)
class RegisterBrokerRequestHeader(CommandHeader):
    """REGISTER_BROKER (103). ``body_crc32``: CRC32 & 0x7FFFFFFF of the body, 0 = unchecked."""

    broker_name: str = s("brokerName")
    broker_addr: str = s("brokerAddr")
    cluster_name: str = s("clusterName")
    ha_server_addr: str = s("haServerAddr")
    broker_id: int = i64("brokerId")
    compressed: bool = b("compressed", default=False)
    body_crc32: int = i32("bodyCrc32", required=False, default=0)


@dataclass(slots=True, kw_only=True)
class RegisterBrokerResponseHeader(CommandHeader):
    """REGISTER_BROKER response (filled only for a slave whose master is registered)."""

    ha_server_addr: str | None = s("haServerAddr", required=False)
    master_addr: str | None = s("masterAddr", required=False)


@dataclass(slots=True, kw_only=True)
class UnRegisterBrokerRequestHeader(CommandHeader):
    """UNREGISTER_BROKER (104)."""

    broker_name: str = s("brokerName")
    broker_addr: str = s("brokerAddr")
    cluster_name: str = s("clusterName")
    broker_id: int = i64("brokerId")


@dataclass(slots=True, kw_only=True)
class GetRouteInfoRequestHeader(CommandHeader):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str = s("topic")
    accept_standard_json_only: bool | None = b("acceptStandardJsonOnly")


@dataclass(slots=True, kw_only=True)
class GetTopicsByClusterRequestHeader(CommandHeader):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str = s("cluster")


@dataclass(slots=True, kw_only=True)
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    broker_name: str = s("brokerName")


@dataclass(slots=True, kw_only=True)
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    """WIPE_WRITE_PERM_OF_BROKER response."""

    wipe_topic_count: int = i32("wipeTopicCount")


@dataclass(slots=True, kw_only=True)
class PutKVConfigRequestHeader(CommandHeader):
    """PUT_KV_CONFIG (100)."""

    namespace: str = s("namespace")
    key: str = s("key")
    value: str = s("value")


@dataclass(slots=True, kw_only=True)
class GetKVConfigRequestHeader(CommandHeader):
    """GET_KV_CONFIG (101)."""

    namespace: str = s("namespace")
    key: str = s("key")


@dataclass(slots=True, kw_only=True)
class GetKVConfigResponseHeader(CommandHeader):
    """GET_KV_CONFIG response."""

    value: str | None = s("value", required=False)


@dataclass(slots=True, kw_only=True)
class DeleteKVConfigRequestHeader(CommandHeader):
    """DELETE_KV_CONFIG (102)."""

    namespace: str = s("namespace")
    key: str = s("key")


@dataclass(slots=True, kw_only=True)
class GetKVListByNamespaceRequestHeader(CommandHeader):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str = s("namespace")
