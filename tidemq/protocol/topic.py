"""Topic and group names: validation, retry / dead-letter topics, permissions, well-known names.

Mirrors RocketMQ's ``TopicValidator``, ``PermName`` and the name constants of ``MixAll``.
Pure functions; no I/O.
"""

from __future__ import annotations

import re
from typing import Final

from tidemq.errors import ClientError

# --- well-known names (TopicValidator / MixAll) --------------------------------------------------

AUTO_CREATE_TOPIC_KEY: Final = "TBW102"
"""Template topic a broker auto-creates new topics from (``AUTO_CREATE_TOPIC_KEY_TOPIC``)."""
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
"""Where delayed messages wait, queue ``level - 1`` per delay level (``RMQ_SYS_SCHEDULE_TOPIC``)."""
BENCHMARK_TOPIC: Final = "BenchmarkTest"
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
"""Where timer messages wait (queue 0), real topic and queue in ``REAL_TOPIC`` / ``REAL_QID``
(RocketMQ 5's ``TimerMessageStore.TIMER_TOPIC``; a system topic by its prefix)."""
TIMER_CANCEL_FLAG: Final = 1 << 62
"""Set in the ``TIMER_TOPIC`` consume-queue tags code (its due time, ms) of a message carrying
``TIMER_DEL_UNIQKEY``: a cancellation, not a message to deliver (RocketMQ's ``MAGIC_DELETE``)."""

SYSTEM_TOPICS: Final = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRACE_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
"""RocketMQ's ``SYSTEM_TOPIC_SET`` (plus anything starting with :data:`SYSTEM_TOPIC_PREFIX`)."""

NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
"""Topics a client may not send to (``NOT_ALLOWED_SEND_TOPIC_SET``): broker answers NO_PERMISSION."""

DEFAULT_CLUSTER: Final = "DefaultCluster"
MASTER_ID: Final = 0
DEFAULT_REGION: Final = "DefaultRegion"
DEFAULT_PRODUCER_GROUP: Final = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP: Final = "DEFAULT_CONSUMER"
"""Consumers may not use this group name (the Java client refuses it)."""
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
SCHEDULE_CONSUMER_GROUP: Final = "SCHEDULE_CONSUMER"
FILTERSRV_CONSUMER_GROUP: Final = "FILTERSRV_CONSUMER"
MONITOR_CONSUMER_GROUP: Final = "__MONITOR_CONSUMER"
CLIENT_INNER_PRODUCER_GROUP: Final = "CLIENT_INNER_PRODUCER"
SELF_TEST_PRODUCER_GROUP: Final = "SELF_TEST_P_GROUP"
SELF_TEST_CONSUMER_GROUP: Final = "SELF_TEST_C_GROUP"
CID_RMQ_SYS_PREFIX: Final = "CID_RMQ_SYS_"
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
REPLY_TOPIC_SUFFIX: Final = "_REPLY_TOPIC"
"""Request-reply topics are ``<cluster>_REPLY_TOPIC`` (``MixAll.REPLY_TOPIC_POSTFIX``)."""
INTERNAL_TOPIC_PREFIXES: Final = (
    RETRY_GROUP_TOPIC_PREFIX,
    DLQ_GROUP_TOPIC_PREFIX,
    SYSTEM_TOPIC_PREFIX,
    "RMQ_SYS_",
)
"""Prefixes of topics no user created: retry, dead-letter, ``rmq_sys_*`` (timer wheel, revive logs,
schedule's undeliverable) and ``RMQ_SYS_*`` (transactions, trace)."""

BROKER_BUILTIN_GROUPS: Final = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
)
"""Consumer groups every broker creates at start (``SubscriptionGroupManager.init``)."""

SYSTEM_GROUPS: Final = frozenset(
    {
        *BROKER_BUILTIN_GROUPS,
        MONITOR_CONSUMER_GROUP,
        CLIENT_INNER_PRODUCER_GROUP,
        SELF_TEST_PRODUCER_GROUP,
        SCHEDULE_CONSUMER_GROUP,
        "CID_RMQ_SYS_TRANS",
    }
)
"""Groups of RocketMQ's own tools and services (the dashboard's ``SYSTEM_GROUP_SET``), plus any
``CID_RMQ_SYS_*`` group (:func:`is_system_group`)."""
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"
"""Ext-field QUERY_MESSAGE carries when the key is a ``UNIQ_KEY`` (``MixAll.UNIQUE_MSG_QUERY_FLAG``)."""

TOPIC_MAX_LENGTH: Final = 127
GROUP_MAX_LENGTH: Final = 255
VALID_NAME_PATTERN: Final = "^[%|a-zA-Z0-9_-]+$"
_VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")


# --- validation ----------------------------------------------------------------------------------


def is_topic_or_group_illegal(name: str) -> bool:
    """True if ``name`` has a character outside ``^[%|a-zA-Z0-9_-]+$`` (``isTopicOrGroupIllegal``)."""
    return _VALID_NAME.fullmatch(name) is None


def check_topic(topic: str | None) -> str | None:
    """Return why ``topic`` is not a valid topic name, or ``None`` if it is.

    Same rules and texts as ``TopicValidator.validateTopic`` (the broker answers SYSTEM_ERROR
    with this text as remark): not blank, only ``[%|a-zA-Z0-9_-]``, at most 127 characters.
    """
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return f"The specified topic[{topic}] contains illegal characters, allowing only {VALID_NAME_PATTERN}"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic[{topic[:32]}...] is longer than topic max length {TOPIC_MAX_LENGTH}."
    return None


def validate_topic(topic: str | None) -> str:
    """Return ``topic`` if valid, else raise.

    Raises:
        ClientError: the text of :func:`check_topic`.
    """
    error = check_topic(topic)
    if error is not None:
        raise ClientError(error)
    assert topic is not None
    return topic


def check_group(group: str | None) -> str | None:
    """Return why ``group`` is not a valid consumer/producer group name, or ``None``.

    Mirrors ``Validators.checkGroup``: not blank, only ``[%|a-zA-Z0-9_-]``, at most 255 characters.
    """
    if group is None or not group.strip():
        return "the specified group is blank"
    if is_topic_or_group_illegal(group):
        return f"the specified group[{group}] contains illegal characters, allowing only {VALID_NAME_PATTERN}"
    if len(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    return None


def validate_group(group: str | None) -> str:
    """Return ``group`` if valid, else raise :class:`ClientError` with :func:`check_group`'s text."""
    error = check_group(group)
    if error is not None:
        raise ClientError(error)
    assert group is not None
    return group


def is_system_topic(topic: str) -> bool:
    """True for RocketMQ's system topics (``TopicValidator.isSystemTopic``)."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    """True if clients may not send to ``topic`` (``TopicValidator.isNotAllowedSendTopic``)."""
    return topic in NOT_ALLOWED_SEND_TOPICS


def is_sys_consumer_group(group: str) -> bool:
    """True for ``CID_RMQ_SYS_*`` groups (``MixAll.isSysConsumerGroup``)."""
    return group.startswith(CID_RMQ_SYS_PREFIX)


def is_system_group(group: str) -> bool:
    """True for :data:`SYSTEM_GROUPS` and ``CID_RMQ_SYS_*`` groups: not a user's consumer group."""
    return group in SYSTEM_GROUPS or group.startswith(CID_RMQ_SYS_PREFIX)


def is_internal_topic(topic: str, cluster_names: set[str] | frozenset[str] = frozenset()) -> bool:
    """True for topics no user created, hidden from users' topic lists (dashboard, Spark's
    ``subscribePattern``, ``statsAll``, metrics): :func:`is_system_topic`'s, retry and dead-letter
    topics, ``RMQ_SYS_*``, ``<cluster>_REPLY_TOPIC``, and the per-cluster / per-broker topics named
    in ``cluster_names``."""
    return (
        topic in SYSTEM_TOPICS
        or topic.startswith(INTERNAL_TOPIC_PREFIXES)
        or topic.endswith(REPLY_TOPIC_SUFFIX)
        or topic in cluster_names
    )


# --- retry and dead-letter topics ----------------------------------------------------------------


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a group's failed messages come back (``MixAll.getRetryTopic``)."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: where messages go after ``max_reconsume_times`` (``MixAll.getDLQTopic``)."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    """True if ``topic`` starts with ``%RETRY%``."""
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    """True if ``topic`` starts with ``%DLQ%``."""
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def group_of_retry_topic(topic: str) -> str | None:
    """The consumer group of a ``%RETRY%<group>`` topic, ``None`` for other topics."""
    return topic[len(RETRY_GROUP_TOPIC_PREFIX) :] if is_retry_topic(topic) else None


# --- permissions ---------------------------------------------------------------------------------


class PermName:
    """Topic / broker permission bits. Mirrors RocketMQ's ``PermName``.

    A topic's ``perm`` is a bit set: 6 = read + write, 7 = read + write + inherit (the template
    ``TBW102`` is registered with 7 so new topics can be created from it).
    """

    PERM_PRIORITY: Final = 8
    PERM_READ: Final = 4
    PERM_WRITE: Final = 2
    PERM_INHERIT: Final = 1
    PRIORITY: Final = 8
    READ: Final = 4
    WRITE: Final = 2
    INHERIT: Final = 1

    @staticmethod
    def is_readable(perm: int) -> bool:
        """True if the READ bit (4) is set."""
        return perm & PermName.PERM_READ == PermName.PERM_READ

    @staticmethod
    def is_writeable(perm: int) -> bool:
        """True if the WRITE bit (2) is set."""
        return perm & PermName.PERM_WRITE == PermName.PERM_WRITE

    @staticmethod
    def is_inherited(perm: int) -> bool:
        """True if the INHERIT bit (1) is set."""
        return perm & PermName.PERM_INHERIT == PermName.PERM_INHERIT

    @staticmethod
    def is_priority(perm: int) -> bool:
        """True if the PRIORITY bit (8) is set."""
        return perm & PermName.PERM_PRIORITY == PermName.PERM_PRIORITY

    @staticmethod
    def perm_to_string(perm: int) -> str:
        """``7`` -> ``"RWX"``, ``4`` -> ``"R--"`` (``PermName.perm2String``)."""
        return "".join(
            (
                "R" if PermName.is_readable(perm) else "-",
                "W" if PermName.is_writeable(perm) else "-",
                "X" if PermName.is_inherited(perm) else "-",
            )
        )
