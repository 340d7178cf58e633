"""Client-management and admin headers: unregister, consumer lists, send-back, topics,
stats, reset offset, running info."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.protocol.headers.base import CommandHeader, b, i32, i64, s


@dataclass(slots=True, kw_only=True)
class UnregisterClientRequestHeader(CommandHeader):
    """UNREGISTER_CLIENT (35). C++ sends ``""`` for the group it does not unregister."""

    client_id: str = s("clientID")
    producer_group: str | None = s("producerGroup", required=False)
    consumer_group: str | None = s("consumerGroup", required=False)


@dataclass(slots=True, kw_only=True)
class GetConsumerListByGroupRequestHeader(CommandHeader):
    """GET_CONSUMER_LIST_BY_GROUP (38) request."""

    consumer_group: str = s("consumerGroup")


@dataclass(slots=True, kw_only=True)
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    """NOTIFY_CONSUMER_IDS_CHANGED (40, broker -> consumer, oneway)."""

    consumer_group: str = s("consumerGroup")


@dataclass(slots=True, kw_only=True)
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    """CONSUMER_SEND_MSG_BACK (36). ``offset`` is the failed message's *physical* offset.

    ``delay_level``: 0 = broker picks ``3 + reconsumeTimes``, < 0 = straight to the DLQ.
    """

    offset: int = i64("offset")
    group: str = s("group")
    delay_level: int = i32("delayLevel")
    origin_msg_id: str | None = s("originMsgId", required=False)
    origin_topic: str | None = s("originTopic", required=False)
    unit_mode: bool = b("unitMode", default=False)
    max_reconsume_times: int | None = i32("maxReconsumeTimes", required=False)


# --------------------------------------------------------------------------------------------
# Admin
# --------------------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class CreateTopicRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_TOPIC (17). ``topic_filter_type`` ``SINGLE_TAG`` or ``MULTI_TAG``."""

    topic: str = s("topic")
    default_topic: str = s("defaultTopic")
    read_queue_nums: int = i32("readQueueNums")
    write_queue_nums: int = i32("writeQueueNums")
    perm: int = i32("perm")
    topic_filter_type: str = s("topicFilterType")
    topic_sys_flag: int | None = i32("topicSysFlag", required=False)
    order: bool = b("order", default=False)
    attributes: str | None = s("attributes", required=False)
    """RocketMQ 5: ``+key=value,-key`` (``tidemq.protocol.topic_attributes``)."""


@dataclass(slots=True, kw_only=True)
class DeleteTopicRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_BROKER (215) / DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str = s("topic")


@dataclass(slots=True, kw_only=True)
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    """DELETE_SUBSCRIPTIONGROUP (207)."""

    group_name: str = s("groupName")
    remove_offset: bool = b("removeOffset", default=False)


@dataclass(slots=True, kw_only=True)
class GetConsumeStatsRequestHeader(CommandHeader):
    """GET_CONSUME_STATS (208); blank ``topic`` = every topic the group has offsets for."""

    consumer_group: str = s("consumerGroup")
    topic: str | None = s("topic", required=False)


@dataclass(slots=True, kw_only=True)
class GetTopicStatsInfoRequestHeader(CommandHeader):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str = s("topic")


@dataclass(slots=True, kw_only=True)
class GetConsumerConnectionListRequestHeader(CommandHeader):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str = s("consumerGroup")


@dataclass(slots=True, kw_only=True)
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220).

    ``timestamp`` ms (-1 = to the max offset); wire name of ``is_force`` is ``isForce``.
    """

    topic: str = s("topic")
    group: str = s("group")
    timestamp: int = i64("timestamp")
    is_force: bool = b("isForce", required=True)


@dataclass(slots=True, kw_only=True)
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    """GET_CONSUMER_RUNNING_INFO (307), admin -> broker -> that client."""

    consumer_group: str = s("consumerGroup")
    client_id: str = s("clientId")
    jstack_enable: bool | None = b("jstackEnable")


@dataclass(slots=True, kw_only=True)
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    """CONSUME_MESSAGE_DIRECTLY (309), admin -> broker -> that client."""

    consumer_group: str = s("consumerGroup")
    client_id: str | None = s("clientId", required=False)
    msg_id: str | None = s("msgId", required=False)
    broker_name: str | None = s("brokerName", required=False)
