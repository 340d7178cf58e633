"""Which messages of a topic a consumer wants. Mirrors RocketMQ's ``MessageSelector``.

::

    consumer.subscribe("Orders", MessageSelector.by_sql("region = 'eu' AND amount > 100"))
    consumer.subscribe("Orders", MessageSelector.by_tag("TagA || TagB"))
    consumer.subscribe("Orders", "TagA || TagB")          # the same as by_tag

An SQL92 selector is evaluated by the broker against each message's properties (tidemq's broker,
or a RocketMQ broker with ``enablePropertyFilter=true``); see docs/filters.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.errors import ClientError
from tidemq.protocol.body import EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, SubscriptionData
from tidemq.protocol.filter import SUB_ALL, build_subscription_data
from tidemq.protocol.sql92 import Sql92Error, compile_sql92


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """A subscription expression and its type (``TAG`` or ``SQL92``). Mirrors ``MessageSelector``.

    Attributes:
        expression_type: ``"TAG"`` or ``"SQL92"``.
        expression: ``"*"`` / ``"tagA || tagB"`` for TAG, the selector text for SQL92.
    """

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """An SQL92 selector, e.g. ``"a > 5 AND b = 'x'"`` (RocketMQ 4.9's grammar: comparisons,
        BETWEEN, IN, IS [NOT] NULL, AND / OR / NOT, TRUE / FALSE). ``bySql``.

        Raises:
            ClientError: the selector does not compile (the message names line and column).
        """
        try:
            compile_sql92(sql)
        except Sql92Error as exc:
            raise ClientError(str(exc)) from None
        return cls(EXPRESSION_TYPE_SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str | None = SUB_ALL) -> MessageSelector:
        """A tag selector: ``"*"`` (or None / ``""``) for every message, else ``"tagA || tagB"``. ``byTag``."""
        return cls(EXPRESSION_TYPE_TAG, tag if tag and tag.strip() else SUB_ALL)


Selector = str | MessageSelector
"""What ``subscribe`` takes: a tag expression, or a :class:`MessageSelector`."""


def subscription_of(topic: str, selector: Selector | None) -> SubscriptionData:
    """The SubscriptionData a consumer registers for ``topic`` with ``selector``."""
    if selector is None or isinstance(selector, str):
        return build_subscription_data(topic, selector)
    return build_subscription_data(topic, selector.expression, expression_type=selector.expression_type)
