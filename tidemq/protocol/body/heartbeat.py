"""Heartbeats, subscriptions, orderly locks, consumer lists, subscription groups. Mirrors
``HeartbeatData``, ``ConsumerData``, ``SubscriptionData``, ``LockBatchRequestBody``, ``SubscriptionGroupConfig``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from tidemq.errors import BodyError
from tidemq.protocol.body.base import (
    _R,
    EXPRESSION_TYPE_TAG,
    ConsumeFromWhere,
    ConsumeType,
    JsonBody,
    MessageModel,
    _as_int,
    _mq_list_json,
    _mq_set,
    _now_ms,
    _WireEnum,
)
from tidemq.protocol.message import MessageQueue


@dataclass(slots=True)
class SubscriptionData(JsonBody):
    """A consumer's subscription to one topic. Mirrors ``SubscriptionData``.

    ``code_set`` holds the tag hashes (see ``tidemq.protocol.filter``); ``sub_version`` is a ms
    timestamp. Reading C++'s form: ``subVersion`` may be a string, sets may be absent,
    ``expressionType`` absent means TAG. For TAG subscriptions ``code_set`` is always recomputed
    from ``tags_set`` (the C++ client 1.x sends bogus ``"codeSet":[0,0]``).
    """

    topic: str
    sub_string: str = "*"
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = field(default_factory=_now_ms)
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": sorted(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        tags = {str(t) for t in r.lst("tagsSet")}
        try:
            codes = {_as_int(c) for c in r.lst("codeSet")}
        except (TypeError, ValueError):
            raise BodyError(
                f"SubscriptionData: codeSet must hold integers, got {r.obj['codeSet']!r}"
            ) from None
        expression_type = r.s("expressionType", EXPRESSION_TYPE_TAG) or EXPRESSION_TYPE_TAG
        if tags and expression_type == EXPRESSION_TYPE_TAG:
            # The hash is a pure function of the tag: recompute rather than trust the peer.
            # The C++ client 1.x sends "codeSet":[0,0] for "TagA || TagC".
            from tidemq.protocol.filter import tags_hash  # filter imports this module

            codes = {tags_hash(t) for t in tags}
        return cls(
            topic=r.req_s("topic"),
            sub_string=r.s("subString", "*"),
            tags_set=tags,
            code_set=codes,
            sub_version=r.i("subVersion"),
            expression_type=expression_type,
            class_filter_mode=r.b("classFilterMode"),
        )


def _enum_or_none(enum: type[_WireEnum], value: Any) -> Any:
    return None if value is None else enum.from_wire(value)


@dataclass(slots=True)
class ConsumerData(JsonBody):
    """One consumer group in a heartbeat. Mirrors ``ConsumerData``."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where.value,
            "consumeType": self.consume_type.value,
            "groupName": self.group_name,
            "messageModel": self.message_model.value,
            "subscriptionDataSet": [sd.to_json() for sd in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(
            group_name=r.req_s("groupName"),
            consume_type=ConsumeType.from_wire(r.obj.get("consumeType", 1)),
            message_model=MessageModel.from_wire(r.obj.get("messageModel", 1)),
            consume_from_where=ConsumeFromWhere.from_wire(r.obj.get("consumeFromWhere", 0)),
            subscription_data_set=[
                SubscriptionData.from_json_checked(s) for s in r.lst("subscriptionDataSet")
            ],
            unit_mode=r.b("unitMode"),
        )


@dataclass(slots=True)
class ProducerData(JsonBody):
    """One producer group in a heartbeat. Mirrors ``ProducerData``."""

    group_name: str

    def to_json(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        return cls(_R(obj, cls.__name__).req_s("groupName"))


@dataclass(slots=True)
class HeartbeatData(JsonBody):
    """HEART_BEAT (34) body. Mirrors ``HeartbeatData`` (wire name of ``client_id``: ``clientID``)."""

    client_id: str
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json() for c in self.consumer_data_set],
            "producerDataSet": [p.to_json() for p in self.producer_data_set],
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(
            r.req_s("clientID"),
            [ProducerData.from_json_checked(p) for p in r.lst("producerDataSet")],
            [ConsumerData.from_json_checked(c) for c in r.lst("consumerDataSet")],
        )


@dataclass(slots=True)
class LockBatchRequestBody(JsonBody):
    """LOCK_BATCH_MQ (41) body. Mirrors ``LockBatchRequestBody``."""

    consumer_group: str
    client_id: str
    mq_set: set[MessageQueue] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": _mq_list_json(self.mq_set),
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(r.req_s("consumerGroup"), r.req_s("clientId"), _mq_set(r.lst("mqSet"), cls.__name__))


@dataclass(slots=True)
class UnlockBatchRequestBody(LockBatchRequestBody):
    """UNLOCK_BATCH_MQ (42) body. Mirrors ``UnlockBatchRequestBody`` (same shape as the lock body)."""


@dataclass(slots=True)
class LockBatchResponseBody(JsonBody):
    """LOCK_BATCH_MQ response body: the queues now held by the client (``lockOKMQSet``)."""

    lock_ok_mq_set: set[MessageQueue] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {"lockOKMQSet": _mq_list_json(self.lock_ok_mq_set)}

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(_mq_set(r.lst("lockOKMQSet"), cls.__name__))


@dataclass(slots=True)
class GetConsumerListByGroupResponseBody(JsonBody):
    """GET_CONSUMER_LIST_BY_GROUP (38) response body (``consumerIdList``)."""

    consumer_id_list: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"consumerIdList": list(self.consumer_id_list)}

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        return cls([str(x) for x in _R(obj, cls.__name__).lst("consumerIdList")])


@dataclass(slots=True)
class SubscriptionGroupConfig(JsonBody):
    """A consumer group's broker-side settings. Mirrors ``SubscriptionGroupConfig`` (its defaults)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False
    """RocketMQ 5: POP consumers of the group pop in order (FIFO); written to the JSON only when true."""

    def to_json(self) -> dict[str, Any]:
        extra = {"consumeMessageOrderly": True} if self.consume_message_orderly else {}
        return extra | {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(
            group_name=r.req_s("groupName"),
            consume_enable=r.b("consumeEnable", True),
            consume_from_min_enable=r.b("consumeFromMinEnable", True),
            consume_broadcast_enable=r.b("consumeBroadcastEnable", True),
            retry_queue_nums=r.i("retryQueueNums", 1),
            retry_max_times=r.i("retryMaxTimes", 16),
            broker_id=r.i("brokerId", 0),
            which_broker_when_consume_slowly=r.i("whichBrokerWhenConsumeSlowly", 1),
            notify_consumer_ids_changed_enable=r.b("notifyConsumerIdsChangedEnable", True),
            consume_message_orderly=r.b("consumeMessageOrderly", False),
        )
