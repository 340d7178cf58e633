"""The name server's request processor.

Mirrors RocketMQ 4.9's ``namesrv.processor.DefaultRequestProcessor``: one small method per
request code, each taking the channel and request and returning the response. Header and body
decode errors (``HeaderError`` / ``BodyError``, both ``ProtocolError``) become SYSTEM_ERROR with
their text through the remoting layer; unknown codes get REQUEST_CODE_NOT_SUPPORTED (the Java
name server stays silent instead, which only makes clients time out).
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable

from tidemq.protocol.body import DataVersion, KVTable, RegisterBrokerBody
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    DeleteKVConfigRequestHeader,
    DeleteTopicRequestHeader,
    GetKVConfigRequestHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from tidemq.remoting.channel import Channel

from .config import NamesrvConfig
from .kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from .route_info import RouteInfoManager

log = logging.getLogger(__name__)

ADD_WRITE_PERM_OF_BROKER = 327
"""RocketMQ 4.9's ``RequestCode.ADD_WRITE_PERM_OF_BROKER`` (not in ``RequestCode`` here)."""

APPLY_TOPIC_URL = "http://rocketmq.apache.org/docs/faq/"


def suggest_todo(url: str) -> str:
    """RocketMQ's ``FAQUrl.suggestTodo``: ``"\\nSee <url> for further details."``."""
    return f"\nSee {url} for further details."


def _ok(
    body: bytes = b"", ext_fields: dict[str, str] | None = None, remark: str | None = None
) -> RemotingCommand:
    return RemotingCommand.create_response(ResponseCode.SUCCESS, remark, ext_fields, body)


def body_crc32(body: bytes) -> int:
    """RocketMQ's ``UtilAll.crc32``: CRC32 of ``body`` masked to 31 bits (never negative)."""
    return zlib.crc32(body) & 0x7FFFFFFF


Handler = Callable[[Channel | None, RemotingCommand], RemotingCommand]


class DefaultRequestProcessor:
    """Answers the name server's request codes. Mirrors ``DefaultRequestProcessor``.

    Args:
        route_info_manager: the routing state to read and update.
        kv_config_manager: the KV store.
        config: name server options (``order_message_enable``).
        clock: returns the current time in ms (injectable for tests).
    """

    def __init__(
        self,
        route_info_manager: RouteInfoManager,
        kv_config_manager: KVConfigManager,
        config: NamesrvConfig | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.route_info_manager = route_info_manager
        self.kv_config_manager = kv_config_manager
        self.config = config or NamesrvConfig()
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.handlers: dict[int, Handler] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.QUERY_DATA_VERSION: self.query_broker_topic_config,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list_from_nameserver,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list_from_ns,
            RequestCode.GET_NAMESRV_CONFIG: self.get_namesrv_config,
        }

    @property
    def request_codes(self) -> list[int]:
        """Every request code this processor answers (to register on a RemotingServer)."""
        return list(self.handlers)

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """RequestProcessor entry point: run the handler for ``request.code``."""
        handler = self.handlers.get(request.code)
        if handler is None:
            return RemotingCommand.create_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
            )
        return handler(channel, request)

    # ------------------------------------------------------------------ brokers

    def register_broker(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """REGISTER_BROKER (103): record the broker and its topics; answer the ORDER_TOPIC_CONFIG KV table."""
        header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        if header.body_crc32 and body_crc32(request.body) != header.body_crc32:
            peer = channel.remote_addr if channel is not None else "?"
            log.warning("REGISTER_BROKER from %s: body crc32 does not match its header", peer)
            return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        wrapper = None
        filter_servers: list[str] | None = []
        if request.body:
            body = RegisterBrokerBody.decode(request.body, compressed=header.compressed)
            wrapper = body.topic_config_serialize_wrapper
            filter_servers = body.filter_server_list
        result = self.route_info_manager.register_broker(
            header.cluster_name,
            header.broker_addr,
            header.broker_name,
            header.broker_id,
            header.ha_server_addr,
            wrapper,
            filter_servers,
            channel,
            self.clock(),
        )
        ext: dict[str, str] = {}
        if result.ha_server_addr is not None:
            ext["haServerAddr"] = result.ha_server_addr
        if result.master_addr is not None:
            ext["masterAddr"] = result.master_addr
        table = self.kv_config_manager.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        return _ok(KVTable(table).encode() if table is not None else b"", ext)

    def unregister_broker(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """UNREGISTER_BROKER (104)."""
        header = UnRegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        self.route_info_manager.unregister_broker(
            header.cluster_name, header.broker_addr, header.broker_name, header.broker_id
        )
        return _ok()

    def query_broker_topic_config(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """QUERY_DATA_VERSION (322): has the broker's topic table changed? Refreshes liveness if not.

        Header ``brokerAddr`` (S!); body DataVersion. Response header ``changed``; body = the
        version the name server holds (absent if none).
        """
        broker_addr = request.ext_fields.get("brokerAddr")
        if not broker_addr:
            return RemotingCommand.create_response(
                ResponseCode.SYSTEM_ERROR,
                "QueryDataVersionRequestHeader: missing required field 'brokerAddr'",
            )
        version = DataVersion.decode(request.body) if request.body else DataVersion(0, 0)
        rim = self.route_info_manager
        changed = rim.is_broker_topic_config_changed(broker_addr, version)
        if not changed:
            rim.update_broker_info_update_timestamp(broker_addr, self.clock())
        held = rim.query_broker_topic_config(broker_addr)
        return _ok(held.encode() if held is not None else b"", {"changed": "true" if changed else "false"})

    def wipe_write_perm_of_broker(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """WIPE_WRITE_PERM_OF_BROKER (205): make a broker read-only in every route."""
        header = WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.route_info_manager.wipe_write_perm_of_broker_by_lock(header.broker_name)
        log.info("wiped write perm of broker %s on %d topics", header.broker_name, count)
        return _ok(ext_fields={"wipeTopicCount": str(count)})

    def add_write_perm_of_broker(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """ADD_WRITE_PERM_OF_BROKER (327): make a broker writable again in every route."""
        header = WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.route_info_manager.add_write_perm_of_broker_by_lock(header.broker_name)
        return _ok(ext_fields={"addTopicCount": str(count)})

    # ------------------------------------------------------------------ routes and topics

    def get_route_info_by_topic(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC (105): TopicRouteData, or TOPIC_NOT_EXIST with RocketMQ's remark."""
        header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        route = self.route_info_manager.pick_topic_route_data(header.topic)
        if route is None:
            return RemotingCommand.create_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}{suggest_todo(APPLY_TOPIC_URL)}",
            )
        if self.config.order_message_enable:
            route.order_topic_conf = self.kv_config_manager.get_kv_config(
                NAMESPACE_ORDER_TOPIC_CONFIG, header.topic
            )
        return _ok(route.encode())

    def get_broker_cluster_info(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_INFO (106): ClusterInfo."""
        return _ok(self.route_info_manager.get_all_cluster_info().encode())

    def get_all_topic_list_from_nameserver(
        self, channel: Channel | None, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): TopicList."""
        return _ok(self.route_info_manager.get_all_topic_list().encode())

    def get_topics_by_cluster(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPICS_BY_CLUSTER (224): TopicList of one cluster."""
        header = GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
        return _ok(self.route_info_manager.get_topics_by_cluster(header.cluster).encode())

    def get_system_topic_list_from_ns(
        self, channel: Channel | None, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS (304): cluster and broker names plus one broker address."""
        return _ok(self.route_info_manager.get_system_topic_list().encode())

    def delete_topic_in_namesrv(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV (216): header ``topic`` (S!), ``clusterName`` (S?)."""
        header = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        self.route_info_manager.delete_topic(header.topic, request.ext_fields.get("clusterName") or None)
        return _ok()

    def get_namesrv_config(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG (319): the options as Java properties text (camelCase keys)."""
        import dataclasses

        lines = []
        for f in dataclasses.fields(self.config):
            value = getattr(self.config, f.name)
            head, *rest = f.name.split("_")
            key = head + "".join(p[:1].upper() + p[1:] for p in rest)
            text = str(value).lower() if isinstance(value, bool) else "" if value is None else str(value)
            lines.append(f"{key}={text}\n")
        return _ok("".join(sorted(lines)).encode())

    # ------------------------------------------------------------------ KV config

    def put_kv_config(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """PUT_KV_CONFIG (100)."""
        header = PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv_config_manager.put_kv_config(header.namespace, header.key, header.value)
        return _ok()

    def get_kv_config(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """GET_KV_CONFIG (101): header ``value``, or QUERY_NOT_FOUND."""
        header = GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        value = self.kv_config_manager.get_kv_config(header.namespace, header.key)
        if value is None:
            return RemotingCommand.create_response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        return _ok(ext_fields={"value": value})

    def delete_kv_config(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """DELETE_KV_CONFIG (102)."""
        header = DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv_config_manager.delete_kv_config(header.namespace, header.key)
        return _ok()

    def get_kv_list_by_namespace(self, channel: Channel | None, request: RemotingCommand) -> RemotingCommand:
        """GET_KVLIST_BY_NAMESPACE (219): KVTable, or QUERY_NOT_FOUND."""
        header = GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields)
        table = self.kv_config_manager.get_kv_list_by_namespace(header.namespace)
        if table is None:
            return RemotingCommand.create_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
            )
        return _ok(KVTable(table).encode())
