"""Queue selectors for ``send(..., selector=...)``. Mirrors RocketMQ's ``MessageQueueSelector`` family.

A selector is any object with ``select(mqs, msg, arg) -> MessageQueue``, or a plain function
with that signature. :class:`SelectMessageQueueByHash` gives orderly sends per key: every
message with the same ``arg`` lands on the same queue, the same one Java's selector picks
(it hashes with Java's ``String.hashCode``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tidemq.errors import ClientError
from tidemq.protocol.filter import tags_hash
from tidemq.protocol.message import Message, MessageQueue

__all__ = [
    "MessageQueueSelector",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SelectorLike",
    "java_hash_code",
    "select_queue",
]


class MessageQueueSelector(Protocol):
    """Picks the queue for one message. Mirrors ``MessageQueueSelector``."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        """Return one of ``mqs`` (the topic's writable queues, sorted by broker then id)."""
        ...


SelectorLike = MessageQueueSelector | Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def java_hash_code(arg: Any) -> int:
    """Java ``hashCode()`` of a str (``String.hashCode``), int (``Integer``/``Long``) or bool."""
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(2**31) <= arg < 2**31:
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - 2**32 if h >= 2**31 else h
    return tags_hash(str(arg))


class SelectMessageQueueByHash:
    """Queue ``abs(hashCode(arg) % n)``: one key, one queue. Mirrors ``SelectMessageQueueByHash``."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        if not mqs:
            raise ClientError(f"no queue to select for topic {msg.topic}")
        return mqs[abs(java_hash_code(arg)) % len(mqs)]


class SelectMessageQueueByRandom:
    """A random queue. Mirrors ``SelectMessageQueueByRandom``."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        if not mqs:
            raise ClientError(f"no queue to select for topic {msg.topic}")
        return mqs[self._rng.randrange(len(mqs))]


def select_queue(selector: SelectorLike, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """Run a selector object or function and check its answer.

    Raises:
        ClientError: the selector returned something that is not one of ``mqs``.
    """
    fn: Any = getattr(selector, "select", selector)
    mq = fn(mqs, msg, arg)
    if mq not in mqs:
        raise ClientError(f"selector returned {mq!r}, which is not a writable queue of topic {msg.topic}")
    return mq  # type: ignore[no-any-return]
