"""A pop's filter: tag expressions (consume-queue tag codes) or SQL92 (evaluated on each stored
record's properties, the broker's :class:`~tidemq.broker.consumer_filter.ConsumerFilterManager`
compiling it once per (group, topic, expression)). Mirrors the filter half of RocketMQ 5's
``PopMessageProcessor`` (``ExpressionMessageFilter``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemq.broker.pop.result import PopError
from tidemq.protocol.body import EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.filter import SUB_ALL, build_subscription_data

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.protocol.sql92.record import RecordFilter

PopFilter = tuple["set[int] | None", "RecordFilter | None"]
"""``(tag codes or None = every tag, SQL92 record filter or None)``."""


def pop_filter(
    broker: Broker, group: str, topic: str, expression_type: str | None, expression: str | None
) -> PopFilter:
    """The filter of a pop of ``topic`` by ``group``.

    ``expression_type`` ``TAG`` (default; ``*`` or empty = every message) or ``SQL92`` (``SQL``
    accepted, as gRPC clients name it).

    Raises:
        PopError: SUBSCRIPTION_PARSE_FAILED for an expression that does not parse or an unknown
            type; SYSTEM_ERROR for SQL92 while ``enable_property_filter`` is off.
    """
    kind = (expression_type or EXPRESSION_TYPE_TAG).upper()
    if kind in (EXPRESSION_TYPE_SQL92, "SQL"):
        return None, _sql92(broker, group, topic, expression or "")
    if kind != EXPRESSION_TYPE_TAG:
        raise PopError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"unknown filter expression type {kind}")
    if not expression or expression.strip() == SUB_ALL:
        return None, None
    try:
        sub = build_subscription_data(topic, expression)
    except Exception as exc:
        raise PopError(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the filter {expression!r} failed: {exc}"
        ) from exc
    return (set(sub.code_set) if sub.code_set else None), None


def _sql92(broker: Broker, group: str, topic: str, expression: str) -> RecordFilter:
    manager = broker.consumer_filter_manager
    if not broker.config.enable_property_filter:
        raise PopError(
            ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92"
        )
    try:
        return manager.build(topic, group, expression, EXPRESSION_TYPE_SQL92, 0).matches_record
    except Exception as exc:
        raise PopError(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the SQL92 filter {expression!r} failed: {exc}"
        ) from exc
