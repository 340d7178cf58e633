"""Admin requests a broker answers (protocol.md §3.8). Mirrors part of RocketMQ's ``AdminBrokerProcessor``.

UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208), CLEAN_EXPIRED_CONSUMEQUEUE (306),
DELETE_EXPIRED_COMMITLOG (329), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200),
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), DELETE_SUBSCRIPTIONGROUP (207), GET_PRODUCER_CONNECTION_LIST (204),
QUERY_TOPIC_CONSUME_BY_WHO (300), CLONE_GROUP_OFFSET (314).
The relays to consumers (222, 307, 309) live in ``relay.py``; runtime info, statistics and broker
config (28, 315, 25, 26) in ``admin_runtime.py``.

Bodies keyed by MessageQueue (ConsumeStats, TopicStatsTable) use fastjson's object-as-key form, as
only Java admin tools read them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, ClassVar

import orjson

from tidemq.errors import ProtocolError
from tidemq.protocol.body import (
    Connection,
    ConsumeStats,
    CreateTopicListRequestBody,
    OffsetWrapper,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicOffset,
    TopicStatsTable,
    loads_body,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    HeaderError,
)
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.topic import AUTO_CREATE_TOPIC_KEY, check_group, check_topic
from tidemq.protocol.topic_attributes import alter_attributes, parse_attributes

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel

log = logging.getLogger(__name__)

_CONFIG_CHANGES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)
"""Admin requests that change ``topics.json`` or ``subscriptionGroup.json``: answered once written."""


def _resp(code: int, remark: str | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.create_response(code, remark, None, body)


class AdminBrokerProcessor:
    """Topic, group and statistics administration. Mirrors ``AdminBrokerProcessor``."""

    CODES: ClassVar[tuple[int, ...]] = (
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.GET_ALL_TOPIC_CONFIG,
        RequestCode.GET_TOPIC_STATS_INFO,
        RequestCode.GET_CONSUME_STATS,
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.GET_PRODUCER_CONNECTION_LIST,
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
        RequestCode.CLONE_GROUP_OFFSET,
    )

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Dispatch on the code; malformed headers/bodies answer SYSTEM_ERROR with the reason."""
        code = request.code
        try:
            if code == RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE:
                await asyncio.get_running_loop().run_in_executor(
                    None, self.broker.store.retention.clean_expired_consume_queue
                )
                return _resp(ResponseCode.SUCCESS)
            if code == RequestCode.DELETE_EXPIRED_COMMITLOG:
                # tidemq's extField force=true (admin deleteExpiredCommitLog --force): one forced pass
                force = (request.ext_fields or {}).get("force", "").lower() == "true"
                deleted = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: self.broker.store.retention.delete_expired_files(force)
                )
                self.broker.store.retention.clean_expired_consume_queue()
                log.info(
                    "DELETE_EXPIRED_COMMITLOG%s from %s deleted %s segment(s)",
                    " (force)" if force else "",
                    channel.remote_addr,
                    deleted,
                )
                return _resp(ResponseCode.SUCCESS, f"deleted {deleted} commit-log segment(s)")
            response = self.handle(request)
            if code in _CONFIG_CHANGES:
                await self.broker.config_files_written()  # answered once the change is on disk
            return response
        except (HeaderError, ProtocolError) as exc:
            return _resp(ResponseCode.SYSTEM_ERROR, str(exc))

    def handle(self, request: RemotingCommand) -> RemotingCommand:
        """Decision logic of the synchronous admin requests."""
        code = request.code
        if code == RequestCode.UPDATE_AND_CREATE_TOPIC:
            return self.update_and_create_topic(CreateTopicRequestHeader.from_command(request))
        if code == RequestCode.UPDATE_AND_CREATE_TOPIC_LIST:
            return self.update_and_create_topic_list(request.body)
        if code == RequestCode.DELETE_TOPIC_IN_BROKER:
            return self.delete_topic(DeleteTopicRequestHeader.from_command(request).topic)
        if code == RequestCode.GET_ALL_TOPIC_CONFIG:
            wrapper = self.broker.topic_config_manager.build_topic_config_serialize_wrapper()
            return _resp(ResponseCode.SUCCESS, None, wrapper.encode())
        if code == RequestCode.GET_TOPIC_STATS_INFO:
            return self.get_topic_stats_info(GetTopicStatsInfoRequestHeader.from_command(request).topic)
        if code == RequestCode.GET_CONSUME_STATS:
            h = GetConsumeStatsRequestHeader.from_command(request)
            return self.get_consume_stats(h.consumer_group, h.topic)
        if code == RequestCode.QUERY_TOPIC_CONSUME_BY_WHO:
            return self.query_topic_consume_by_who(_required(request, "topic"))
        if code == RequestCode.CLONE_GROUP_OFFSET:
            return self.clone_group_offset(
                _required(request, "srcGroup"),
                _required(request, "destGroup"),
                str(request.ext_fields.get("topic") or ""),
            )
        if code == RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP:
            cfg = SubscriptionGroupConfig.from_json(loads_body(request.body, "SubscriptionGroupConfig"))
            problem = check_group(cfg.group_name)
            if problem is not None:
                return _resp(ResponseCode.SYSTEM_ERROR, problem)
            self.broker.subscription_group_manager.update_subscription_group_config(cfg)
            return _resp(ResponseCode.SUCCESS)
        if code == RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
            return _resp(
                ResponseCode.SUCCESS, None, orjson.dumps(self.broker.subscription_group_manager.encode())
            )
        if code == RequestCode.DELETE_SUBSCRIPTIONGROUP:
            d = DeleteSubscriptionGroupRequestHeader.from_command(request)
            self.broker.subscription_group_manager.delete_subscription_group_config(d.group_name)
            if d.remove_offset:
                self.broker.consumer_offset_manager.remove_offset(d.group_name)
            return _resp(ResponseCode.SUCCESS)
        if code == RequestCode.GET_PRODUCER_CONNECTION_LIST:
            group = request.ext_fields.get("producerGroup")
            if not group:
                return _resp(
                    ResponseCode.SYSTEM_ERROR,
                    "GetProducerConnectionListRequestHeader: missing required field 'producerGroup'",
                )
            return self.get_producer_connection_list(str(group))
        return _resp(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")

    def get_producer_connection_list(self, group: str) -> RemotingCommand:
        """GET_PRODUCER_CONNECTION_LIST (204): body ``ProducerConnection`` ``{"connectionSet":[Connection]}``
        from the producer manager; an unknown group answers SYSTEM_ERROR (RocketMQ's remark)."""
        channels = self.broker.producer_manager.get_producer_channels(group)
        if not channels:
            return _resp(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        connections = [
            Connection(
                client_id=info.client_id,
                client_addr=info.channel.remote_addr,
                language=str(info.language),
                version=int(info.version),
            ).to_json()
            for info in sorted(channels, key=lambda i: (i.client_id, i.channel.remote_addr))
        ]
        return _resp(ResponseCode.SUCCESS, None, orjson.dumps({"connectionSet": connections}))

    # -- topics ----------------------------------------------------------------------------------

    def update_and_create_topic(self, h: CreateTopicRequestHeader) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC: validate, store, persist; re-registration follows (on_change)."""
        current = self.broker.topic_config_manager.topic_config_table.get(h.topic)
        try:
            attributes = alter_attributes(
                current is None, current.attributes if current else {}, parse_attributes(h.attributes)
            )
        except ValueError as exc:
            return _resp(ResponseCode.SYSTEM_ERROR, f"topic attributes: {exc}")
        tc = TopicConfig(
            topic_name=h.topic,
            read_queue_nums=h.read_queue_nums,
            write_queue_nums=h.write_queue_nums,
            perm=h.perm,
            topic_filter_type=h.topic_filter_type,
            topic_sys_flag=h.topic_sys_flag or 0,
            order=h.order,
            attributes=attributes,
        )
        problem = _check_topic_config(tc)
        if problem is not None:
            return _resp(ResponseCode.SYSTEM_ERROR, problem)
        self.broker.topic_config_manager.update_topic_config(tc)
        return _resp(ResponseCode.SUCCESS)

    def update_and_create_topic_list(self, body: bytes | None) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC_LIST (18, RocketMQ 5): body ``{"topicConfigList": [TopicConfig]}``.

        Every config is checked first (a bad one refuses the whole list, INVALID_PARAMETER with
        its remark); then one data-version bump, one persist and one incremental registration for
        all. Configs equal to the current ones are left alone (RocketMQ answers the whole request
        early on the first such config; tidemq goes on with the rest).
        """
        configs = CreateTopicListRequestBody.decode(body or b"{}").topic_config_list
        for tc in configs:
            problem = _check_topic_config(tc)
            if problem is not None:
                return _resp(ResponseCode.INVALID_PARAMETER, problem)
        self.broker.topic_config_manager.update_topic_config_list(configs)
        return _resp(ResponseCode.SUCCESS)

    def delete_topic(self, topic: str) -> RemotingCommand:
        """DELETE_TOPIC_IN_BROKER: drop the config and the groups' offsets for it."""
        problem = check_topic(topic)
        if problem is not None:
            return _resp(ResponseCode.SYSTEM_ERROR, problem)
        self.broker.topic_config_manager.delete_topic_config(topic)
        self.broker.consumer_offset_manager.clean_offset_by_topic(topic)
        clean = getattr(self.broker.store, "clean_unused_topic", None)
        if callable(clean):
            clean(set(self.broker.topic_config_manager.topics()))
        return _resp(ResponseCode.SUCCESS)

    def get_topic_stats_info(self, topic: str) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO: min/max offset and last store time of queues 0..writeQueueNums-1."""
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return _resp(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = self.broker.store
        table = TopicStatsTable()
        for qid in range(tc.write_queue_nums):
            mx = max(store.get_max_offset_in_queue(topic, qid), 0)
            mn = max(store.get_min_offset_in_queue(topic, qid), 0)
            last = store.lookup.get_message_store_timestamp(topic, qid, mx - 1) if mx > 0 else 0
            mq = MessageQueue(topic, self.broker.config.broker_name, qid)
            table.offset_table[mq] = TopicOffset(
                min_offset=mn, max_offset=mx, last_update_timestamp=max(last, 0)
            )
        return _resp(ResponseCode.SUCCESS, None, table.encode())

    # -- consumer groups ---------------------------------------------------------------------------

    def consume_stats(self, group: str, topic: str | None) -> ConsumeStats:
        """ConsumeStats of ``group`` for ``topic`` (blank = every topic the group has offsets for)."""
        broker = self.broker
        topics = (
            [topic]
            if topic and topic.strip()
            else sorted(broker.consumer_offset_manager.which_topic_by_consumer(group))
        )
        stats = ConsumeStats()
        info = broker.consumer_manager.get_consumer_group_info(group)
        for t in topics:
            tc = broker.topic_config_manager.select_topic_config(t)
            if tc is None:
                continue
            subscribed = broker.consumer_manager.find_subscription_data(group, t)  # or popped
            if info is not None and info.subscription_table and subscribed is None:
                continue
            for qid in range(tc.read_queue_nums):
                broker_offset = max(broker.store.get_max_offset_in_queue(t, qid), 0)
                consumer_offset = max(broker.consumer_offset_manager.query_offset(group, t, qid), 0)
                last = 0
                if consumer_offset > 0:
                    last = max(
                        broker.store.lookup.get_message_store_timestamp(t, qid, consumer_offset - 1), 0
                    )
                stats.offset_table[MessageQueue(t, broker.config.broker_name, qid)] = OffsetWrapper(
                    broker_offset=broker_offset, consumer_offset=consumer_offset, last_timestamp=last
                )
        return stats

    def get_consume_stats(self, group: str, topic: str | None) -> RemotingCommand:
        """GET_CONSUME_STATS (208)."""
        if topic and topic.strip() and self.broker.topic_config_manager.select_topic_config(topic) is None:
            return _resp(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        return _resp(ResponseCode.SUCCESS, None, self.consume_stats(group, topic).encode())

    def query_topic_consume_by_who(self, topic: str) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO (300): body ``GroupList`` ``{"groupList":[...]}``: the groups
        online for ``topic`` plus those with committed offsets for it."""
        groups = set(self.broker.consumer_manager.query_topic_consume_by_who(topic))
        groups |= self.broker.consumer_offset_manager.which_group_by_topic(topic)
        return _resp(ResponseCode.SUCCESS, None, orjson.dumps({"groupList": sorted(groups)}))

    def clone_group_offset(self, src: str, dest: str, topic: str) -> RemotingCommand:
        """CLONE_GROUP_OFFSET (314): copy ``src``'s committed offsets of ``topic`` (blank: every topic
        ``src`` has offsets for) to ``dest``. Mirrors ``cloneGroupOffset``."""
        for name in (src, dest):
            problem = check_group(name)
            if problem is not None:
                return _resp(ResponseCode.SYSTEM_ERROR, problem)
        manager = self.broker.consumer_offset_manager
        topics = [topic] if topic.strip() else sorted(manager.which_topic_by_consumer(src))
        for t in topics:
            for qid, offset in manager.query_offset_table(src, t).items():
                manager.commit_offset("CLONE", dest, t, qid, offset)
        return _resp(ResponseCode.SUCCESS)


def _check_topic_config(tc: TopicConfig) -> str | None:
    """Why ``tc`` cannot be created (a remark), or None."""
    problem = check_topic(tc.topic_name)
    if problem is not None:
        return problem
    if tc.topic_name == AUTO_CREATE_TOPIC_KEY:
        return f"The specified topic[{tc.topic_name}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC."
    if tc.read_queue_nums < 0 or tc.write_queue_nums < 0 or not 0 <= tc.perm <= 15:
        return "readQueueNums/writeQueueNums must be >= 0 and perm within 0..15"
    if tc.topic_filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
        return f"unknown topicFilterType {tc.topic_filter_type!r}"
    return None


def _required(request: RemotingCommand, name: str) -> str:
    value = request.ext_fields.get(name)
    if value is None or str(value) == "":
        raise ProtocolError(f"missing required field {name!r}")
    return str(value)
