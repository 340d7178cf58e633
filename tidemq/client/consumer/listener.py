"""Listener types, consume statuses and the "where to start" rule (pure).

Mirrors RocketMQ's ``MessageListenerConcurrently`` / ``MessageListenerOrderly``,
``ConsumeConcurrentlyStatus`` / ``ConsumeOrderlyStatus``, ``ConsumeConcurrentlyContext`` /
``ConsumeOrderlyContext`` and ``RebalancePushImpl.computePullFromWhereWithException``.

A listener is a plain callable ``listener(msgs, context) -> status``; with the asyncio API it
may be a coroutine function. It may also return ``None`` (meaning success, a Python
convenience; Java treats ``null`` as RECONSUME_LATER) or raise (meaning RECONSUME_LATER, as in
Java).
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from tidemq.errors import ClientError
from tidemq.protocol.message import MessageExt, MessageQueue

__all__ = [
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "MessageListener",
    "MessageListenerOrderly",
    "OrderlyListenerFn",
    "PullFromWhere",
    "decide_pull_from_where",
    "default_consume_timestamp",
    "parse_consume_timestamp",
]


class ConsumeConcurrentlyStatus(StrEnum):
    """Result of a concurrent listener. Mirrors ``ConsumeConcurrentlyStatus``."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(StrEnum):
    """Result of an orderly listener. Mirrors ``ConsumeOrderlyStatus``."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """Per-batch context of a concurrent listener. Mirrors ``ConsumeConcurrentlyContext``.

    Attributes:
        message_queue: the queue the batch came from.
        delay_level_when_next_consume: delay level for retries (0 = broker decides, 3 + reconsumeTimes;
            -1 = straight to the dead-letter queue).
        ack_index: index of the last message that succeeded; messages after it are retried.
            Defaults to "all" on success and -1 on RECONSUME_LATER.
    """

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """Per-batch context of an orderly listener. Mirrors ``ConsumeOrderlyContext``.

    Attributes:
        message_queue: the queue the batch came from.
        auto_commit: commit the offset after SUCCESS (default True).
        suspend_current_queue_time_millis: pause after SUSPEND (ms; -1 = consumer default).
    """

    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_millis: int = -1


Status = ConsumeConcurrentlyStatus | ConsumeOrderlyStatus | None
MessageListener = Callable[[list[MessageExt], ConsumeConcurrentlyContext], Status | Awaitable[Status]]
"""``listener(msgs, context)``: a function (run in the consume thread pool) or coroutine function."""

OrderlyListenerFn = Callable[[list[MessageExt], ConsumeOrderlyContext], Status | Awaitable[Status]]
"""``listener(msgs, ConsumeOrderlyContext)`` returning a :class:`ConsumeOrderlyStatus` (None = SUCCESS)."""


class MessageListenerOrderly:
    """Marks a listener for orderly consumption. Mirrors ``MessageListenerOrderly``.

    Wrap a function or coroutine function ``fn(msgs, context: ConsumeOrderlyContext)`` returning
    :class:`ConsumeOrderlyStatus` (``None`` = SUCCESS; an exception or any other value =
    SUSPEND_CURRENT_QUEUE_A_MOMENT) and pass it to ``register_message_listener``; the consumer then
    consumes each queue by one task at a time, in queue-offset order, holding the broker's lock.

    Example::

        consumer.register_message_listener(MessageListenerOrderly(on_messages))
        # or: consumer.register_message_listener(on_messages, orderly=True)
    """

    __slots__ = ("fn",)

    def __init__(self, fn: OrderlyListenerFn) -> None:
        self.fn = fn

    def __call__(self, msgs: list[MessageExt], context: ConsumeOrderlyContext) -> Status | Awaitable[Status]:
        return self.fn(msgs, context)


# -- compute_pull_from_where ---------------------------------------------------------------

_LAST_OFFSET_FAMILY = {
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
}


@dataclass(frozen=True, slots=True)
class PullFromWhere:
    """Where a newly owned queue starts, as decided by :func:`decide_pull_from_where`.

    ``kind``: ``"offset"`` (start at ``offset``), ``"max_offset"`` (ask GET_MAX_OFFSET),
    ``"timestamp"`` (ask SEARCH_OFFSET_BY_TIMESTAMP) or ``"skip"`` (not this round).
    """

    kind: Literal["offset", "max_offset", "timestamp", "skip"]
    offset: int = -1


def decide_pull_from_where(
    consume_from_where: str, last_offset: int, *, is_retry_topic: bool
) -> PullFromWhere:
    """The start-offset rule of ``RebalancePushImpl.computePullFromWhereWithException``.

    Args:
        consume_from_where: a ``ConsumeFromWhere`` (its Java name, e.g. ``"CONSUME_FROM_LAST_OFFSET"``).
        last_offset: the stored offset (QUERY_CONSUMER_OFFSET / local file): >= 0 stored,
            -1 none (the broker said so), anything else = error (skip this round).
        is_retry_topic: the queue belongs to ``%RETRY%<group>``.

    Raises:
        ClientError: unknown ``consume_from_where``.
    """
    cfw = str(getattr(consume_from_where, "value", consume_from_where))
    if cfw not in _LAST_OFFSET_FAMILY and cfw not in ("CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"):
        raise ClientError(f"unknown ConsumeFromWhere {consume_from_where!r}")
    if last_offset >= 0:
        return PullFromWhere("offset", last_offset)
    if last_offset != -1:
        return PullFromWhere("skip")
    if cfw in _LAST_OFFSET_FAMILY:
        return PullFromWhere("offset", 0) if is_retry_topic else PullFromWhere("max_offset")
    if cfw == "CONSUME_FROM_FIRST_OFFSET":
        return PullFromWhere("offset", 0)
    return PullFromWhere("max_offset") if is_retry_topic else PullFromWhere("timestamp")


def parse_consume_timestamp(text: str) -> int:
    """``yyyyMMddHHmmss`` in local time (RocketMQ's ``consumeTimestamp``) -> epoch milliseconds.

    Raises:
        ClientError: not 14 digits forming a valid date.
    """
    try:
        if len(text) != 14 or not text.isdigit():
            raise ValueError(text)
        parsed = _dt.datetime.strptime(text, "%Y%m%d%H%M%S")
    except ValueError:
        raise ClientError(f"consume_timestamp must be yyyyMMddHHmmss, got {text!r}") from None
    return int(parsed.timestamp() * 1000)


def default_consume_timestamp() -> str:
    """Half an hour ago as ``yyyyMMddHHmmss`` (Java's default ``consumeTimestamp``)."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(time.time() - 1800))
