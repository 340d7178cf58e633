"""Pull, offset and query headers. Mirrors ``PullMessageRequestHeader``, ``PullSysFlag``,
``QueryConsumerOffsetRequestHeader``, ``SearchOffsetRequestHeader``, ``QueryMessageRequestHeader``..."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Self

from tidemq.protocol.headers.base import CommandHeader, b, i32, i64, s, small_int


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

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, Any]) -> Self:
        """Parse ``ext``: read field by field when it is plainly formed (strings, unsigned digits:
        every pull a client sends), else by the generic parser, which gives the same header or the
        error that names the bad field.

        Raises:
            HeaderError: a required field is missing, or a value does not parse.
        """
        header = cls._from_plain(ext)
        return header if header is not None else cls._from_ext(ext, None)

    @classmethod
    def _from_plain(cls, ext: Mapping[str, Any]) -> Self | None:
        # Written out field by field, without loops or generators: this runs for every pull.
        get = ext.get
        group, topic, queue_id, offset, max_nums, sys_flag, commit, suspend, sub_version = (
            get("consumerGroup"),
            get("topic"),
            get("queueId"),
            get("queueOffset"),
            get("maxMsgNums"),
            get("sysFlag"),
            get("commitOffset"),
            get("suspendTimeoutMillis"),
            get("subVersion"),
        )
        if not (
            type(group) is str
            and type(topic) is str
            and type(queue_id) is str
            and type(offset) is str
            and type(max_nums) is str
            and type(sys_flag) is str
            and type(commit) is str
            and type(suspend) is str
            and type(sub_version) is str
            and len(queue_id) < 10
            and len(max_nums) < 10
            and len(sys_flag) < 10
            and len(offset) < 19
            and len(commit) < 19
            and len(suspend) < 19
            and len(sub_version) < 19
        ):
            return None
        digits = queue_id + offset + max_nums + sys_flag + commit + suspend + sub_version
        if not (digits.isascii() and digits.isdigit()):  # an empty part: int() raises below
            return None
        subscription, expression_type = get("subscription"), get("expressionType")
        if not (
            (subscription is None or type(subscription) is str)
            and (expression_type is None or type(expression_type) is str)
        ):
            return None
        header = object.__new__(cls)  # every field set (the test against the generic parser checks)
        try:
            header.queue_id = small_int(queue_id)
            header.queue_offset = int(offset)
            header.max_msg_nums = small_int(max_nums)
            header.sys_flag = small_int(sys_flag)
            header.commit_offset = int(commit)
            header.suspend_timeout_millis = int(suspend)
            header.sub_version = int(sub_version)
        except ValueError:  # int(""): a part is empty
            return None
        header.consumer_group = group
        header.topic = topic
        header.subscription = subscription
        header.expression_type = expression_type
        return header


@dataclass(slots=True, kw_only=True)
class PullMessageResponseHeader(CommandHeader):
    """PULL_MESSAGE response; all four fields are sent for every status."""

    suggest_which_broker_id: int = i64("suggestWhichBrokerId")
    next_begin_offset: int = i64("nextBeginOffset")
    min_offset: int = i64("minOffset")
    max_offset: int = i64("maxOffset")


def pull_response_fields(
    suggest_which_broker_id: int, next_begin_offset: int, min_offset: int, max_offset: int
) -> dict[str, str]:
    """``PullMessageResponseHeader(...).to_ext_fields()`` written out (every pull's answer builds
    it): the same keys in the same order, decimal strings."""
    return {
        "suggestWhichBrokerId": str(suggest_which_broker_id),
        "nextBeginOffset": str(next_begin_offset),
        "minOffset": str(min_offset),
        "maxOffset": str(max_offset),
    }


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
