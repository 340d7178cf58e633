"""POP receipt handles (``extraInfo`` / the ``POP_CK`` property) and the pop response's offset
info strings. Pure code. Mirrors RocketMQ 5's ``ExtraInfoUtil`` and ``KeyBuilder`` (rocketmq5.md §8.3).

A handle is space-separated::

    ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId msgQueueOffset

``ckQueueOffset`` is the check-point's start offset (the queue offset the pop began at),
``popTime`` / ``invisibleTime`` are ms, ``reviveQid`` the revive queue holding the check-point
(999 = an order pop, no check-point), ``retryFlag`` ``0`` normal / ``1`` retry V1 / ``2`` retry V2
topic, ``queueId`` / ``msgQueueOffset`` where the message is (in the retry topic when flagged).
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.protocol.topic import RETRY_GROUP_TOPIC_PREFIX

NORMAL_TOPIC = "0"
RETRY_TOPIC = "1"
RETRY_TOPIC_V2 = "2"
POP_ORDER_REVIVE_QUEUE = 999
"""``KeyBuilder.POP_ORDER_REVIVE_QUEUE``: the revive queue id of an order (FIFO) pop's handles."""
POP_RETRY_SEPARATOR_V1 = "_"
POP_RETRY_SEPARATOR_V2 = "+"
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
"""``PopAckConstants.REVIVE_GROUP``: the group under which revive progress is kept."""


class ExtraInfoError(ValueError):
    """A receipt handle that does not parse (too few fields, a field that is not a number)."""


def revive_topic(cluster_name: str) -> str:
    """``rmq_sys_REVIVE_LOG_<cluster>``: where check-points and acks are written
    (``PopAckConstants.buildClusterReviveTopic``)."""
    return REVIVE_TOPIC_PREFIX + cluster_name


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """The pop retry topic of (group, topic): ``%RETRY%<group>_<topic>`` (V1) or
    ``%RETRY%<group>+<topic>`` (V2). Mirrors ``KeyBuilder.buildPopRetryTopic``."""
    sep = POP_RETRY_SEPARATOR_V2 if v2 else POP_RETRY_SEPARATOR_V1
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{sep}{topic}"


def is_pop_retry_topic_v2(topic: str) -> bool:
    """Whether ``topic`` is a POP retry topic of the V2 form (``%RETRY%<group>+<topic>``, RocketMQ 5's
    ``KeyBuilder.isPopRetryTopicV2``)."""
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and POP_RETRY_SEPARATOR_V2 in topic


def retry_flag(topic: str) -> str:
    """``0`` for a normal topic, ``1`` for a ``%RETRY%`` topic, ``2`` for a V2 pop retry topic."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC
    return NORMAL_TOPIC


def real_topic(topic: str, group: str, flag: str) -> str:
    """The topic a handle's queue id and offset refer to: ``topic`` or its pop retry topic.

    Raises:
        ExtraInfoError: ``flag`` is not 0, 1 or 2.
    """
    if flag == NORMAL_TOPIC:
        return topic
    if flag == RETRY_TOPIC:
        return pop_retry_topic(topic, group)
    if flag == RETRY_TOPIC_V2:
        return pop_retry_topic(topic, group, v2=True)
    raise ExtraInfoError(f"retry flag must be 0, 1 or 2, got {flag!r}")


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """A parsed receipt handle (see the module docstring). Times in ms."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int

    @property
    def is_order(self) -> bool:
        """Whether the handle came from a FIFO (``order``) pop: its revive queue id is
        :data:`POP_ORDER_REVIVE_QUEUE` (``ExtraInfoUtil.isOrder``)."""
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    @property
    def visible_at(self) -> int:
        """When the message becomes visible again (ms): ``pop_time + invisible_time``."""
        return self.pop_time + self.invisible_time

    def __str__(self) -> str:
        return (
            f"{self.ck_queue_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} "
            f"{self.retry} {self.broker_name} {self.queue_id} {self.queue_offset}"
        )


def build_extra_info(
    ck_queue_offset: int,
    pop_time: int,
    invisible_time: int,
    revive_qid: int,
    topic: str,
    broker_name: str,
    queue_id: int,
    msg_queue_offset: int,
) -> str:
    """The handle text (``ExtraInfoUtil.buildExtraInfo``); ``topic`` is the topic the message was
    read from (a retry topic sets the retry flag)."""
    return (
        f"{ck_queue_offset} {pop_time} {invisible_time} {revive_qid} {retry_flag(topic)} "
        f"{broker_name} {queue_id} {msg_queue_offset}"
    )


def parse_extra_info(text: str, offset: int | None = None) -> ExtraInfo:
    """Parse a handle. A 7-field handle (no message offset, as old clients send) takes ``offset``.

    Raises:
        ExtraInfoError: fewer than 7 fields, a number that does not parse, a bad retry flag.
    """
    parts = text.split(" ") if isinstance(text, str) else []
    if len(parts) < 7 or (len(parts) < 8 and offset is None):
        raise ExtraInfoError(f"extraInfo must have 8 space-separated fields, got {text!r}")
    try:
        info = ExtraInfo(
            int(parts[0]),
            int(parts[1]),
            int(parts[2]),
            int(parts[3]),
            parts[4],
            parts[5],
            int(parts[6]),
            int(parts[7]) if len(parts) >= 8 else int(offset),  # type: ignore[arg-type]
        )
    except ValueError as exc:
        raise ExtraInfoError(f"extraInfo has a field that is not a number: {text!r}") from exc
    if info.retry not in (NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2):
        raise ExtraInfoError(f"extraInfo retry flag must be 0, 1 or 2: {text!r}")
    return info


# -- the pop response's info strings (entries joined with ";") ------------------------------------


def start_offset_entry(topic: str, queue_id: int, start_offset: int) -> str:
    """One ``startOffsetInfo`` entry: ``retryFlag queueId startOffset``."""
    return f"{retry_flag(topic)} {queue_id} {start_offset}"


def msg_offset_entry(topic: str, queue_id: int, offsets: list[int]) -> str:
    """One ``msgOffsetInfo`` entry: ``retryFlag queueId off1,off2,...``."""
    return f"{retry_flag(topic)} {queue_id} {','.join(map(str, offsets))}"


def order_count_entry(topic: str, queue_id: int, queue_offset: int, count: int) -> str:
    """One ``orderCountInfo`` entry keyed by queue offset: ``retryFlag qo<queueId>%<offset> count``."""
    return f"{retry_flag(topic)} qo{queue_id}%{queue_offset} {count}"


def _parse_info(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if not text:
        return out
    for one in text.split(";"):
        parts = one.split(" ")
        if len(parts) != 3:
            raise ExtraInfoError(f"info entry must have 3 fields: {one!r}")
        out[f"{parts[0]}@{parts[1]}"] = parts[2]
    return out


def parse_start_offset_info(text: str | None) -> dict[str, int]:
    """``{"retryFlag@queueId": startOffset}`` (``ExtraInfoUtil.parseStartOffsetInfo``)."""
    return {k: int(v) for k, v in _parse_info(text).items()}


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]]:
    """``{"retryFlag@queueId": [offsets]}`` (``ExtraInfoUtil.parseMsgOffsetInfo``)."""
    return {k: [int(x) for x in v.split(",")] for k, v in _parse_info(text).items()}


def parse_order_count_info(text: str | None) -> dict[str, int]:
    """``{"retryFlag@queueId" or "retryFlag@qo<queueId>%<offset>": count}``."""
    return {k: int(v) for k, v in _parse_info(text).items()}


def start_offset_key(topic: str, queue_id: int) -> str:
    """The map key of the info strings for a message read from ``topic``: ``retryFlag@queueId``."""
    return f"{retry_flag(topic)}@{queue_id}"


def queue_offset_key(topic: str, queue_id: int, queue_offset: int) -> str:
    """The per-offset key of ``orderCountInfo``: ``retryFlag@qo<queueId>%<offset>``."""
    return f"{retry_flag(topic)}@qo{queue_id}%{queue_offset}"
