"""Tag filtering: tag hash codes, subscription expressions, matching.

Mirrors RocketMQ's ``FilterAPI`` (client), ``ExpressionMessageFilter.isMatchedByConsumeQueue``
(broker) and the tag check of ``PullAPIWrapper.processPullResult`` (client re-filter).

The broker filters by *hash*: each consume-queue entry holds ``tags_hash(tag)`` and a pull keeps
entries whose code is in the subscription's ``codeSet``. Hashes can collide, so clients filter
again by the exact tag string.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Final

from tidemq.protocol.body import EXPRESSION_TYPE_TAG, SubscriptionData

SUB_ALL: Final = "*"
"""Subscription expression meaning "every tag"."""
TAG_SEPARATOR: Final = "||"


@lru_cache(maxsize=4096)
def _hash_code(text: str) -> int:
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_hash(tag: str | None) -> int:
    """Java's ``String.hashCode()`` of ``tag``: the consume-queue "tags code".

    ``h = 31 * h + c`` over the UTF-16 code units of the string (a character outside the BMP
    counts as its two surrogates), wrapped to a *signed* 32-bit int. ``None`` and ``""`` -> 0
    (a message without tag; RocketMQ's ``tagsString2tagsCode``).

    >>> tags_hash("TagA")
    2598919
    """
    if not tag:
        return 0
    return _hash_code(tag)


def to_int32(value: int) -> int:
    """Truncate to a signed 32-bit int like Java's ``Long.intValue()``."""
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value


def parse_tags(expression: str | None) -> list[str]:
    """``"a || b ||c"`` -> ``["a", "b", "c"]``; ``"*"``, ``""`` and ``None`` -> ``[]``."""
    if expression is None or not expression.strip() or expression.strip() == SUB_ALL:
        return []
    return [tag.strip() for tag in expression.split(TAG_SEPARATOR) if tag.strip()]


def build_subscription_data(
    topic: str,
    expression: str | None,
    *,
    expression_type: str = EXPRESSION_TYPE_TAG,
    sub_version: int | None = None,
) -> SubscriptionData:
    """Build what a consumer registers for ``topic``. Mirrors ``FilterAPI.buildSubscriptionData``.

    Args:
        topic: the subscribed topic.
        expression: ``"*"`` / ``""`` / ``None`` for every message, else ``"tagA || tagB"``
            (TAG type); for another ``expression_type`` (e.g. ``"SQL92"``) kept verbatim.
        expression_type: ``"TAG"`` (default) or ``"SQL92"``.
        sub_version: subscription version, ms timestamp; default now.

    Returns:
        SubscriptionData with ``tags_set`` and ``code_set`` (tag hashes) filled for TAG type.
    """
    version = int(time.time() * 1000) if sub_version is None else sub_version
    is_all = expression is None or not expression.strip() or expression.strip() == SUB_ALL
    if expression_type != EXPRESSION_TYPE_TAG:
        return SubscriptionData(
            topic=topic,
            sub_string=SUB_ALL if is_all else str(expression),
            sub_version=version,
            expression_type=expression_type,
        )
    if is_all:
        return SubscriptionData(topic=topic, sub_string=SUB_ALL, sub_version=version)
    tags = parse_tags(expression)
    return SubscriptionData(
        topic=topic,
        sub_string=str(expression),
        tags_set=set(tags),
        code_set={tags_hash(t) for t in tags},
        sub_version=version,
    )


def is_tags_code_matched(subscription: SubscriptionData | None, tags_code: int | None) -> bool:
    """Broker-side check of one consume-queue entry against a subscription.

    Mirrors ``ExpressionMessageFilter.isMatchedByConsumeQueue``: no subscription, class-filter
    mode, ``*``, or an entry without a tags code all match; otherwise the entry's code
    (truncated to 32 bits, as Java's ``intValue()``) must be in ``code_set``. Non-TAG
    expressions (SQL92) are not evaluated here and match.
    """
    if subscription is None or subscription.class_filter_mode:
        return True
    if subscription.expression_type != EXPRESSION_TYPE_TAG:
        return True
    if tags_code is None or subscription.sub_string == SUB_ALL:
        return True
    return to_int32(tags_code) in subscription.code_set


def is_tag_matched(subscription: SubscriptionData | None, tag: str | None) -> bool:
    """Client-side exact check of a pulled message's tag (``PullAPIWrapper.processPullResult``).

    Matches when the subscription has no tags (``*``) or is in class-filter mode; otherwise the
    message must carry a tag that is in ``tags_set``.
    """
    if subscription is None or subscription.class_filter_mode or not subscription.tags_set:
        return True
    return tag is not None and tag in subscription.tags_set
