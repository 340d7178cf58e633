"""Client registration and group queries: the broker side of consumer rebalancing.

Mirrors RocketMQ's ``ClientManageProcessor`` (HEART_BEAT 34, UNREGISTER_CLIENT 35,
CHECK_CLIENT_CONFIG 46), the group queries of ``ConsumerManageProcessor``
(GET_CONSUMER_LIST_BY_GROUP 38) and ``AdminBrokerProcessor`` (GET_CONSUMER_CONNECTION_LIST 203,
LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42). protocol.md §3.3 and §3.6.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from tidemq.broker.consumer_manager import ClientChannel, ClientChannelInfo, ConsumerGroupInfo, now_millis
from tidemq.broker.names import check_client_id, check_group_name, check_retry_topic_of, check_topic_name
from tidemq.errors import ProtocolError
from tidemq.protocol.body import (
    Connection,
    ConsumerConnection,
    ConsumerData,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
)
from tidemq.protocol.topic import PermName, retry_topic
from tidemq.remoting.log_limit import bad_request_log, clip

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

log = logging.getLogger(__name__)

#: TopicSysFlag bit for unit-mode subscriptions (``TopicSysFlag.buildSysFlag(false, true)``).
_FLAG_UNIT_SUB = 0x2


def _response(code: int, remark: str | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.create_response(code, remark=remark, body=body)


class ClientManageProcessor:
    """HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG, GET_CONSUMER_LIST_BY_GROUP,
    GET_CONSUMER_CONNECTION_LIST, LOCK_BATCH_MQ and UNLOCK_BATCH_MQ.

    Mirrors ``ClientManageProcessor`` plus the client-related parts of ``ConsumerManageProcessor``
    and ``AdminBrokerProcessor``. Register it for every code of ``CODES``.

    Args:
        broker: the owning ``Broker`` (``consumer_manager``, ``producer_manager``,
            ``rebalance_lock_manager``, ``subscription_group_manager``, ``topic_config_manager``,
            ``register_broker_all``).
    """

    CODES: ClassVar[tuple[int, ...]] = (
        RequestCode.HEART_BEAT,
        RequestCode.UNREGISTER_CLIENT,
        RequestCode.CHECK_CLIENT_CONFIG,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        RequestCode.GET_CONSUMER_CONNECTION_LIST,
        RequestCode.LOCK_BATCH_MQ,
        RequestCode.UNLOCK_BATCH_MQ,
    )

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(
        self, channel: ClientChannel, request: RemotingCommand
    ) -> RemotingCommand | None:
        """Answer one request of ``CODES``; bad bodies/headers -> SYSTEM_ERROR naming the problem."""
        code = request.code
        try:
            if code == RequestCode.HEART_BEAT:
                return await self.heart_beat(channel, request)
            if code == RequestCode.UNREGISTER_CLIENT:
                return self.unregister_client(channel, request)
            if code == RequestCode.CHECK_CLIENT_CONFIG:
                return self.check_client_config(channel, request)
            if code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
                return self.get_consumer_list_by_group(channel, request)
            if code == RequestCode.GET_CONSUMER_CONNECTION_LIST:
                return self.get_consumer_connection_list(channel, request)
            if code == RequestCode.LOCK_BATCH_MQ:
                return self.lock_batch_mq(channel, request)
            if code == RequestCode.UNLOCK_BATCH_MQ:
                return self.unlock_batch_mq(channel, request)
        except (ProtocolError, ValueError, KeyError, TypeError) as exc:
            name = _code_name(code)
            bad_request_log.log(
                logging.WARNING,
                channel.remote_addr,
                "bad %s request from %s: %s",
                name,
                channel.remote_addr,
                exc,
                kind=f"bad {name}",
            )
            return _response(ResponseCode.SYSTEM_ERROR, f"bad {name} request: {exc}")
        return _response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {code} not supported")

    # -- HEART_BEAT (34) ---------------------------------------------------------------------

    async def heart_beat(self, channel: ClientChannel, request: RemotingCommand) -> RemotingCommand:
        """Register the heartbeat's consumers and producers. Mirrors ``ClientManageProcessor.heartBeat``.

        Per consumer group: find or auto-create the subscription group, create ``%RETRY%<group>``
        (``retry_queue_nums`` queues, perm R|W) and re-register with the name servers when it is new,
        then ``ConsumerManager.register_consumer`` (which notifies the group on changes).
        """
        if not request.body:
            raise ProtocolError("HEART_BEAT without a HeartbeatData body")
        heartbeat = HeartbeatData.decode(request.body)
        now = now_millis()
        info = ClientChannelInfo(
            channel=channel,
            client_id=heartbeat.client_id,
            language=str(request.language),
            version=int(request.version),
            last_update_timestamp=now,
        )
        problem = _check_heartbeat_names(heartbeat)
        if problem is not None:  # nothing registered or created from a heartbeat with a bad name
            return _response(ResponseCode.SYSTEM_ERROR, problem)
        broker = self.broker
        created_topic = False
        for data in heartbeat.consumer_data_set:
            created_topic |= self._register_consumer(heartbeat.client_id, info, data, now)
        for pdata in heartbeat.producer_data_set:
            broker.producer_manager.register_producer(
                pdata.group_name,
                ClientChannelInfo(channel, info.client_id, info.language, info.version, now),
            )
        if created_topic:
            try:
                await broker.registrar.register_increment()  # only the new retry topics
            except Exception:  # the 30 s registration timer retries; never fail the heartbeat
                log.warning("registering the new retry topics failed", exc_info=True)
        return _response(ResponseCode.SUCCESS)

    def _register_consumer(
        self, client_id: str, info: ClientChannelInfo, data: ConsumerData, now: int
    ) -> bool:
        """One consumer group of a heartbeat: its retry topic when the group is known (created when
        missing), then ``ConsumerManager.register_consumer`` and the group's SQL92 filters. Returns
        whether a retry topic was created (the caller then registers it with the name servers)."""
        broker = self.broker
        group = data.group_name
        notify = True
        created_topic = False
        config = broker.subscription_group_manager.find_subscription_group_config(group)
        if config is not None:
            notify = bool(getattr(config, "notify_consumer_ids_changed_enable", True))
            sys_flag = _FLAG_UNIT_SUB if getattr(data, "unit_mode", False) else 0
            topic = retry_topic(group)
            existed = broker.topic_config_manager.select_topic_config(topic) is not None
            if not existed and check_retry_topic_of(group) is None:  # no retries for > 120 chars
                broker.topic_config_manager.create_topic_in_send_message_back_method(
                    topic, config.retry_queue_nums, PermName.PERM_WRITE | PermName.PERM_READ, sys_flag
                )
                created_topic = broker.topic_config_manager.select_topic_config(topic) is not None
        changed = broker.consumer_manager.register_consumer(
            group,
            dataclasses.replace(info),  # one record per group: no aliasing between tables
            data.consume_type,
            data.message_model,
            data.consume_from_where,
            data.subscription_data_set,
            notify,
            now,
        )
        broker.consumer_filter_manager.register(group, data.subscription_data_set)  # SQL92
        if changed:
            log.info(
                "registered consumer %s in group %s (%s, %s)",
                client_id,
                group,
                _enum_name(data.message_model),
                _enum_name(data.consume_type),
            )
        return created_topic

    # -- UNREGISTER_CLIENT (35) --------------------------------------------------------------

    def unregister_client(self, channel: ClientChannel, request: RemotingCommand) -> RemotingCommand:
        """Remove the client from its producer and/or consumer group; notify the remaining members.

        Mirrors ``ClientManageProcessor.unregisterClient``.
        """
        header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        info = ClientChannelInfo(
            channel, header.client_id, str(request.language), int(request.version), now_millis()
        )
        if header.producer_group:
            self.broker.producer_manager.unregister_producer(header.producer_group, info)
        if header.consumer_group:
            config = self.broker.subscription_group_manager.find_subscription_group_config(
                header.consumer_group
            )
            notify = bool(getattr(config, "notify_consumer_ids_changed_enable", True)) if config else True
            self.broker.consumer_manager.unregister_consumer(header.consumer_group, info, notify)
            cm = self.broker.consumer_manager
            if cm.find_channel(header.consumer_group, header.client_id) is None:
                self.broker.rebalance_lock_manager.unlock_all(header.consumer_group, header.client_id)
        return _response(ResponseCode.SUCCESS)

    # -- CHECK_CLIENT_CONFIG (46) ------------------------------------------------------------

    def check_client_config(self, channel: ClientChannel, request: RemotingCommand) -> RemotingCommand:
        """SUCCESS for TAG subscriptions and SQL92 ones that compile; SUBSCRIPTION_PARSE_FAILED (the
        parser's message) for those that do not; SYSTEM_ERROR when ``enable_property_filter`` is off.

        Mirrors ``ClientManageProcessor.checkClientConfig``.
        """
        obj: Any = orjson.loads(request.body) if request.body else {}
        if not isinstance(obj, dict):
            raise ProtocolError("CHECK_CLIENT_CONFIG body is not a JSON object")
        code, remark = self.broker.consumer_filter_manager.check_client_config(obj.get("subscriptionData"))
        return _response(code, remark)

    # -- GET_CONSUMER_LIST_BY_GROUP (38) -----------------------------------------------------

    def get_consumer_list_by_group(self, channel: ClientChannel, request: RemotingCommand) -> RemotingCommand:
        """Body ``{"consumerIdList": [...]}`` (sorted); unknown or empty group -> SYSTEM_ERROR.

        Mirrors ``ConsumerManageProcessor.getConsumerListByGroup``.
        """
        header = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
        group = header.consumer_group
        info = self.broker.consumer_manager.get_consumer_group_info(group)
        ids = info.get_all_client_ids() if info is not None else []
        if not ids:
            bad_request_log.warning(
                channel.remote_addr,
                "get_consumer_list_by_group: no consumer for group %s (from %s)",
                group,
                channel.remote_addr,
            )
            return _response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        body = GetConsumerListByGroupResponseBody(consumer_id_list=ids).encode()
        return _response(ResponseCode.SUCCESS, body=body)

    # -- GET_CONSUMER_CONNECTION_LIST (203) --------------------------------------------------

    def get_consumer_connection_list(
        self, channel: ClientChannel, request: RemotingCommand
    ) -> RemotingCommand:
        """Body ConsumerConnection of the group; CONSUMER_NOT_ONLINE when it has no member.

        Mirrors ``AdminBrokerProcessor.getConsumerConnectionList``.
        """
        header = GetConsumerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        group = header.consumer_group
        info = self.broker.consumer_manager.get_consumer_group_info(group)
        if info is None or not info.channel_info_table:
            return _response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        body = _consumer_connection(info)
        return _response(ResponseCode.SUCCESS, body=body)

    # -- LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42) -------------------------------------------

    def lock_batch_mq(self, channel: ClientChannel, request: RemotingCommand) -> RemotingCommand:
        """Lock the requested queues for the client; body ``{"lockOKMQSet": [...]}`` (renewals included).

        Mirrors ``AdminBrokerProcessor.lockBatchMQ`` / ``RebalanceLockManager.tryLockBatch``.
        """
        if not request.body:
            raise ProtocolError("LOCK_BATCH_MQ without a LockBatchRequestBody")
        body = LockBatchRequestBody.decode(request.body)
        locked = self.broker.rebalance_lock_manager.try_lock_batch(
            body.consumer_group, body.mq_set, body.client_id, now_millis()
        )
        out = LockBatchResponseBody(lock_ok_mq_set=locked).encode()
        return _response(ResponseCode.SUCCESS, body=out)

    def unlock_batch_mq(self, channel: ClientChannel, request: RemotingCommand) -> RemotingCommand:
        """Release the client's locks on the listed queues. Mirrors ``AdminBrokerProcessor.unlockBatchMQ``."""
        if not request.body:
            raise ProtocolError("UNLOCK_BATCH_MQ without an UnlockBatchRequestBody")
        body = UnlockBatchRequestBody.decode(request.body)
        self.broker.rebalance_lock_manager.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return _response(ResponseCode.SUCCESS)


def _check_heartbeat_names(heartbeat: HeartbeatData) -> str | None:
    """The bad client id, or the first bad group or subscription-topic name, of a heartbeat
    (``tidemq.broker.names``)."""
    problem = check_client_id(heartbeat.client_id)
    if problem is not None:
        return problem
    for data in heartbeat.consumer_data_set:
        problem = check_group_name(data.group_name)
        if problem is not None:
            return f"consumer group: {problem}"
        for sub in data.subscription_data_set:
            problem = check_topic_name(sub.topic)
            if problem is not None:
                return f"subscription of group {clip(data.group_name)}: {problem}"
    for pdata in heartbeat.producer_data_set:
        problem = check_group_name(pdata.group_name)
        if problem is not None:
            return f"producer group: {problem}"
    return None


def _code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


def _enum_name(value: Any) -> str:
    return str(getattr(value, "name", value))


def _consumer_connection(info: ConsumerGroupInfo) -> bytes:
    """Encode a group's members and subscriptions as a ConsumerConnection body."""
    connections = [
        Connection(
            client_id=ch.client_id,
            client_addr=ch.channel.remote_addr,
            language=ch.language,
            version=ch.version,
        )
        for ch in info.channel_info_table.values()
    ]
    return ConsumerConnection(
        connection_set=connections,
        subscription_table=dict(info.subscription_table),
        consume_type=info.consume_type,
        message_model=info.message_model,
        consume_from_where=info.consume_from_where,
    ).encode()
