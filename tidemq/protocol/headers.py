"""Typed custom headers: dataclasses <-> a command's ``extFields`` (``dict[str, str]``).

Mirrors RocketMQ's ``CommandCustomHeader`` classes (``common/protocol/header/**``). Each header
is a dataclass whose fields carry metadata: the wire name, the Java type (``str``, ``int`` =
32-bit ``Integer``, ``long`` = 64-bit ``Long``, ``bool``) and whether it is required
(``@CFNotNull``). Attributes are snake_case; wire names are RocketMQ's.

* :meth:`CommandHeader.to_ext_fields` writes Java's ``toString()`` forms: ints in decimal,
  booleans ``"true"``/``"false"``, ``None`` omitted.
* :meth:`CommandHeader.from_ext_fields` accepts ``"4"`` for numbers, ``"true"``/``"false"``
  (any case) and the C++ client's ``"1"``/``"0"`` for booleans; unknown keys (``AccessKey``,
  ``Signature``, ``OnsChannel``...) are ignored. A missing required field, or a value that does
  not parse (``"4.0"`` for an int, ``"yes"`` for a bool, a number out of range) raises
  :class:`HeaderError` naming the header, the field and the value. An empty string for an
  *optional* number or boolean counts as absent.

Example::

    hdr = PullMessageRequestHeader.from_ext_fields(request.ext_fields)
    response.ext_fields = PullMessageResponseHeader(next_begin_offset=5, ...).to_ext_fields()
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Self

from tidemq.errors import ProtocolError
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand, ext_value_to_str

Kind = Literal["str", "int", "long", "bool"]

_INT_RE = re.compile(r"[+-]?[0-9]+")
_RANGES: Final = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_TRUE: Final = frozenset({"true", "1"})
_FALSE: Final = frozenset({"false", "0"})


class HeaderError(ProtocolError):
    """A custom header is missing a required field or has a value that does not parse.

    Attributes:
        header: the header class name, e.g. ``"PullMessageRequestHeader"``.
        field: the wire name of the offending field, e.g. ``"queueId"``.
        value: the raw value received (``None`` when missing).
    """

    def __init__(self, header: str, field: str, value: str | None, message: str) -> None:
        self.header = header
        self.field = field
        self.value = value
        super().__init__(message)


def _hfield(wire: str, kind: Kind, required: bool, default: Any) -> Any:
    meta = {"wire": wire, "kind": kind, "required": required}
    if required:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


def s(wire: str, *, required: bool = True, default: str | None = None) -> Any:
    """Declare a ``String`` header field (required unless ``required=False``)."""
    return _hfield(wire, "str", required, default)


def i32(wire: str, *, required: bool = True, default: int | None = None) -> Any:
    """Declare an ``Integer`` (signed 32-bit) header field."""
    return _hfield(wire, "int", required, default)


def i64(wire: str, *, required: bool = True, default: int | None = None) -> Any:
    """Declare a ``Long`` (signed 64-bit) header field."""
    return _hfield(wire, "long", required, default)


def b(wire: str, *, required: bool = False, default: bool | None = None) -> Any:
    """Declare a ``Boolean`` header field (optional unless ``required=True``)."""
    return _hfield(wire, "bool", required, default)


@dataclass(frozen=True, slots=True)
class _Spec:
    attr: str
    wire: str
    kind: Kind
    required: bool


def _to_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_value(header: str, wire: str, label: str, kind: Kind, raw: str) -> Any:
    if kind == "str":
        return raw
    if kind == "bool":
        low = raw.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise HeaderError(header, wire, raw, f"{header}: field {label} must be a boolean, got {raw!r}")
    text = raw.strip()
    if not _INT_RE.fullmatch(text):
        bits = 32 if kind == "int" else 64
        raise HeaderError(
            header, wire, raw, f"{header}: field {label} must be a {bits}-bit integer, got {raw!r}"
        )
    number = int(text)
    low_limit, high_limit = _RANGES[kind]
    if not low_limit <= number <= high_limit:
        bits = 32 if kind == "int" else 64
        raise HeaderError(header, wire, raw, f"{header}: field {label} = {raw!r} is out of {bits}-bit range")
    return number


_SPECS: dict[type, tuple[_Spec, ...]] = {}


def _specs_of(cls: type[CommandHeader]) -> tuple[_Spec, ...]:
    specs = _SPECS.get(cls)
    if specs is None:
        specs = _SPECS[cls] = tuple(
            _Spec(f.name, f.metadata["wire"], f.metadata["kind"], f.metadata["required"])
            for f in dataclasses.fields(cls)
            if "wire" in f.metadata
        )
    return specs


@dataclass(slots=True, kw_only=True)
class CommandHeader:
    """Base of every custom header. Mirrors RocketMQ's ``CommandCustomHeader``."""

    @classmethod
    def _specs(cls) -> tuple[_Spec, ...]:
        return _specs_of(cls)

    def to_ext_fields(self) -> dict[str, str]:
        """The header as ``extFields``: Java-style strings, ``None`` fields omitted."""
        out: dict[str, str] = {}
        for spec in self._specs():
            text = _to_str(getattr(self, spec.attr))
            if text is not None:
                out[spec.wire] = text
        return out

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, Any]) -> Self:
        """Parse ``ext`` (a command's ``ext_fields``); unknown keys are ignored.

        Raises:
            HeaderError: a required field is missing, or a value does not parse.
        """
        return cls._from_ext(ext, None)

    @classmethod
    def from_command(cls, cmd: RemotingCommand) -> Self:
        """Parse the header of ``cmd`` (same as ``from_ext_fields(cmd.ext_fields)``)."""
        return cls.from_ext_fields(cmd.ext_fields)

    @classmethod
    def _from_ext(cls, ext: Mapping[str, Any], names: Mapping[str, str] | None) -> Self:
        kwargs: dict[str, Any] = {}
        for spec in cls._specs():
            key = names.get(spec.wire, spec.wire) if names else spec.wire
            label = repr(key) if key == spec.wire else f"{key!r} ({spec.wire})"
            raw = ext_value_to_str(ext.get(key))
            if raw is None or (raw == "" and spec.kind != "str" and not spec.required):
                if spec.required:
                    raise HeaderError(
                        cls.__name__, key, None, f"{cls.__name__}: missing required field {label}"
                    )
                continue
            kwargs[spec.attr] = _parse_value(cls.__name__, key, label, spec.kind, raw)
        return cls(**kwargs)


# --------------------------------------------------------------------------------------------
# Producer path
# --------------------------------------------------------------------------------------------

V2_FIELD_NAMES: Final[dict[str, str]] = {
    "producerGroup": "a",
    "topic": "b",
    "defaultTopic": "c",
    "defaultTopicQueueNums": "d",
    "queueId": "e",
    "sysFlag": "f",
    "bornTimestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsumeTimes": "j",
    "unitMode": "k",
    "maxReconsumeTimes": "l",
    "batch": "m",
    "bname": "n",
}
"""Long (SEND_MESSAGE) -> one-letter (SEND_MESSAGE_V2) wire names (``SendMessageRequestHeaderV2``)."""

SEND_REPLY_MESSAGE: Final = 324
SEND_REPLY_MESSAGE_V2: Final = 325
_V1_CODES: Final = frozenset({int(RequestCode.SEND_MESSAGE), SEND_REPLY_MESSAGE})
_V2_CODES: Final = frozenset(
    {int(RequestCode.SEND_MESSAGE_V2), int(RequestCode.SEND_BATCH_MESSAGE), SEND_REPLY_MESSAGE_V2}
)


@dataclass(slots=True, kw_only=True)
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10) / SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320) request header.

    Mirrors ``SendMessageRequestHeader`` (long names) and ``SendMessageRequestHeaderV2``
    (one-letter names, :data:`V2_FIELD_NAMES`). ``born_timestamp`` is ms; ``queue_id < 0`` asks
    the broker to pick a queue. A batch is flagged by ``batch`` (C++ sends batches as code 10
    or 310 with ``batch``), not by the code; code 320 implies ``batch=True``.
    """

    producer_group: str = s("producerGroup")
    topic: str = s("topic")
    default_topic: str = s("defaultTopic")
    default_topic_queue_nums: int = i32("defaultTopicQueueNums")
    queue_id: int = i32("queueId")
    sys_flag: int = i32("sysFlag")
    born_timestamp: int = i64("bornTimestamp")
    flag: int = i32("flag")
    properties: str | None = s("properties", required=False)
    reconsume_times: int | None = i32("reconsumeTimes", required=False)
    unit_mode: bool = b("unitMode", default=False)
    batch: bool = b("batch", default=False)
    max_reconsume_times: int | None = i32("maxReconsumeTimes", required=False)
    broker_name: str | None = s("bname", required=False)

    @classmethod
    def from_command(cls, cmd: RemotingCommand) -> Self:
        """Parse by code: 10/324 long names, 310/320/325 one-letter names.

        Raises:
            HeaderError: bad or missing field (named as received, e.g. ``'e' (queueId)``), or
                ``cmd.code`` is not a send code.
        """
        if cmd.code in _V1_CODES:
            return cls.from_ext_fields(cmd.ext_fields)
        if cmd.code in _V2_CODES:
            header = cls.from_v2_ext_fields(cmd.ext_fields)
            if cmd.code == RequestCode.SEND_BATCH_MESSAGE:
                header.batch = True
            return header
        raise HeaderError(
            cls.__name__, "code", str(cmd.code), f"request code {cmd.code} is not a send request"
        )

    @classmethod
    def from_v2_ext_fields(cls, ext: Mapping[str, Any]) -> Self:
        """Parse the one-letter (V2) form."""
        return cls._from_ext(ext, V2_FIELD_NAMES)

    def to_v2_ext_fields(self) -> dict[str, str]:
        """The one-letter (V2) form, as Java / C++ >= 1.2.5 send it."""
        return {V2_FIELD_NAMES[k]: v for k, v in self.to_ext_fields().items()}


@dataclass(slots=True, kw_only=True)
class SendMessageResponseHeader(CommandHeader):
    """Send response header. Mirrors ``SendMessageResponseHeader``.

    ``msg_id`` is the offset msgId (comma-joined for a batch). ``msg_region`` and ``trace_on``
    are the ``MSG_REGION`` / ``TRACE_ON`` ext-fields Java brokers always add (the Java client
    needs extFields present after a send; C++ reads them only as strings).
    """

    msg_id: str = s("msgId")
    queue_id: int = i32("queueId")
    queue_offset: int = i64("queueOffset")
    transaction_id: str | None = s("transactionId", required=False)
    msg_region: str | None = s("MSG_REGION", required=False, default="DefaultRegion")
    trace_on: bool | None = b("TRACE_ON", default=True)


@dataclass(slots=True, kw_only=True)
class EndTransactionRequestHeader(CommandHeader):
    """END_TRANSACTION (37, oneway). ``commit_or_rollback``: 0 unknown, 8 commit, 12 rollback."""

    producer_group: str = s("producerGroup")
    tran_state_table_offset: int = i64("tranStateTableOffset")
    commit_log_offset: int = i64("commitLogOffset")
    commit_or_rollback: int = i32("commitOrRollback")
    from_transaction_check: bool = b("fromTransactionCheck", default=False)
    msg_id: str = s("msgId")
    transaction_id: str | None = s("transactionId", required=False)


@dataclass(slots=True, kw_only=True)
class CheckTransactionStateRequestHeader(CommandHeader):
    """CHECK_TRANSACTION_STATE (39, broker -> producer, oneway). Body = the half message."""

    tran_state_table_offset: int = i64("tranStateTableOffset")
    commit_log_offset: int = i64("commitLogOffset")
    msg_id: str | None = s("msgId", required=False)
    transaction_id: str | None = s("transactionId", required=False)
    offset_msg_id: str | None = s("offsetMsgId", required=False)


# --------------------------------------------------------------------------------------------
# Pull path and offsets
# --------------------------------------------------------------------------------------------


class PullSysFlag:
    """Bits of ``PullMessageRequestHeader.sysFlag``. Mirrors RocketMQ's ``PullSysFlag``."""

    FLAG_COMMIT_OFFSET: Final = 0x1
    FLAG_SUSPEND: Final = 0x2
    FLAG_SUBSCRIPTION: Final = 0x4
    FLAG_CLASS_FILTER: Final = 0x8
    FLAG_LITE_PULL_MESSAGE: Final = 0x10

    @staticmethod
    def build_sys_flag(
        commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool, lite_pull: bool = False
    ) -> int:
        """Combine the flags (``PullSysFlag.buildSysFlag``)."""
        return (
            (PullSysFlag.FLAG_COMMIT_OFFSET if commit_offset else 0)
            | (PullSysFlag.FLAG_SUSPEND if suspend else 0)
            | (PullSysFlag.FLAG_SUBSCRIPTION if subscription else 0)
            | (PullSysFlag.FLAG_CLASS_FILTER if class_filter else 0)
            | (PullSysFlag.FLAG_LITE_PULL_MESSAGE if lite_pull else 0)
        )

    @staticmethod
    def clear_commit_offset_flag(sys_flag: int) -> int:
        """``sys_flag`` without FLAG_COMMIT_OFFSET (pulling from a slave)."""
        return sys_flag & ~PullSysFlag.FLAG_COMMIT_OFFSET

    @staticmethod
    def has_commit_offset_flag(sys_flag: int) -> bool:
        return bool(sys_flag & PullSysFlag.FLAG_COMMIT_OFFSET)

    @staticmethod
    def has_suspend_flag(sys_flag: int) -> bool:
        return bool(sys_flag & PullSysFlag.FLAG_SUSPEND)

    @staticmethod
    def has_subscription_flag(sys_flag: int) -> bool:
        return bool(sys_flag & PullSysFlag.FLAG_SUBSCRIPTION)

    @staticmethod
    def has_class_filter_flag(sys_flag: int) -> bool:
        return bool(sys_flag & PullSysFlag.FLAG_CLASS_FILTER)

    @staticmethod
    def has_lite_pull_flag(sys_flag: int) -> bool:
        return bool(sys_flag & PullSysFlag.FLAG_LITE_PULL_MESSAGE)


@dataclass(slots=True, kw_only=True)
class PullMessageRequestHeader(CommandHeader):
    """PULL_MESSAGE (11) request. ``suspend_timeout_millis`` and ``sub_version`` are ms.

    ``subscription`` is sent only with FLAG_SUBSCRIPTION; ``expression_type`` ``TAG``/``SQL92``.
    """

    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i32("queueId")
    queue_offset: int = i64("queueOffset")
    max_msg_nums: int = i32("maxMsgNums")
    sys_flag: int = i32("sysFlag")
    commit_offset: int = i64("commitOffset")
    suspend_timeout_millis: int = i64("suspendTimeoutMillis")
    subscription: str | None = s("subscription", required=False)
    sub_version: int = i64("subVersion")
    expression_type: str | None = s("expressionType", required=False)


@dataclass(slots=True, kw_only=True)
class PullMessageResponseHeader(CommandHeader):
    """PULL_MESSAGE response; all four fields are sent for every status."""

    suggest_which_broker_id: int = i64("suggestWhichBrokerId")
    next_begin_offset: int = i64("nextBeginOffset")
    min_offset: int = i64("minOffset")
    max_offset: int = i64("maxOffset")


@dataclass(slots=True, kw_only=True)
class QueryConsumerOffsetRequestHeader(CommandHeader):
    """QUERY_CONSUMER_OFFSET (14) request."""

    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i32("queueId")


@dataclass(slots=True, kw_only=True)
class QueryConsumerOffsetResponseHeader(CommandHeader):
    """QUERY_CONSUMER_OFFSET response (SUCCESS only)."""

    offset: int = i64("offset")


@dataclass(slots=True, kw_only=True)
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    """UPDATE_CONSUMER_OFFSET (15) request (often oneway)."""

    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i32("queueId")
    commit_offset: int = i64("commitOffset")


@dataclass(slots=True, kw_only=True)
class GetMaxOffsetRequestHeader(CommandHeader):
    """GET_MAX_OFFSET (30) request."""

    topic: str = s("topic")
    queue_id: int = i32("queueId")


@dataclass(slots=True, kw_only=True)
class GetMaxOffsetResponseHeader(CommandHeader):
    """GET_MAX_OFFSET response: the next offset to be written (number of entries)."""

    offset: int = i64("offset")


@dataclass(slots=True, kw_only=True)
class GetMinOffsetRequestHeader(CommandHeader):
    """GET_MIN_OFFSET (31) request."""

    topic: str = s("topic")
    queue_id: int = i32("queueId")


@dataclass(slots=True, kw_only=True)
class GetMinOffsetResponseHeader(CommandHeader):
    """GET_MIN_OFFSET response."""

    offset: int = i64("offset")


@dataclass(slots=True, kw_only=True)
class SearchOffsetRequestHeader(CommandHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP (29) request; ``timestamp`` in ms."""

    topic: str = s("topic")
    queue_id: int = i32("queueId")
    timestamp: int = i64("timestamp")


@dataclass(slots=True, kw_only=True)
class SearchOffsetResponseHeader(CommandHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP response."""

    offset: int = i64("offset")


@dataclass(slots=True, kw_only=True)
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    """GET_EARLIEST_MSG_STORETIME (32) request."""

    topic: str = s("topic")
    queue_id: int = i32("queueId")


@dataclass(slots=True, kw_only=True)
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    """GET_EARLIEST_MSG_STORETIME response; ``timestamp`` ms, -1 if the queue is empty."""

    timestamp: int = i64("timestamp")


@dataclass(slots=True, kw_only=True)
class ViewMessageRequestHeader(CommandHeader):
    """VIEW_MESSAGE_BY_ID (33) request; ``offset`` is the commit-log (physical) offset."""

    offset: int = i64("offset")


@dataclass(slots=True, kw_only=True)
class QueryMessageRequestHeader(CommandHeader):
    """QUERY_MESSAGE (12) request; timestamps in ms.

    ``unique_key_query`` is the ``_UNIQUE_KEY_QUERY`` ext-field Java adds beside the header.
    """

    topic: str = s("topic")
    key: str = s("key")
    max_num: int = i32("maxNum")
    begin_timestamp: int = i64("beginTimestamp")
    end_timestamp: int = i64("endTimestamp")
    unique_key_query: bool | None = b("_UNIQUE_KEY_QUERY")


@dataclass(slots=True, kw_only=True)
class QueryMessageResponseHeader(CommandHeader):
    """QUERY_MESSAGE response."""

    index_last_update_timestamp: int = i64("indexLastUpdateTimestamp")
    index_last_update_phyoffset: int = i64("indexLastUpdatePhyoffset")


# --------------------------------------------------------------------------------------------
# Clients, retry
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Name server
# --------------------------------------------------------------------------------------------


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


HEADER_BY_REQUEST_CODE: Final[dict[int, type[CommandHeader]]] = {
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeader,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeader,
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
    RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RequestCode.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    RequestCode.PUT_KV_CONFIG: PutKVConfigRequestHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigRequestHeader,
    RequestCode.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: UnRegisterBrokerRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    RequestCode.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    RequestCode.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: DeleteTopicRequestHeader,
    RequestCode.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    RequestCode.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
    RequestCode.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
}
"""Request code -> its request header class (codes without a header are absent)."""
