"""What a pop tells the broker about its consumer group, which may never heartbeat (a POP client, a
gRPC SimpleConsumer): RocketMQ 5's ``PopMessageProcessor`` calls
``ConsumerManager.compensateBasicConsumerInfo`` (the group pops: ``CONSUME_POP``, CLUSTERING) on
every POP_MESSAGE, and, once the topic and group checks passed, ``compensateSubscribeData`` for the
topic (the pop's filter) and for the group's pop retry topic (``*``). Subscription lookups
(``ConsumerManager.find_subscription_data``: consume stats, the admin views) then know the group's
subscription without a heartbeat; see ``tidemq/broker/consumer_manager.py`` for the table and its
expiry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemq.broker.pop.extra_info import pop_retry_topic
from tidemq.protocol.body import EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, ConsumeType, MessageModel
from tidemq.protocol.filter import SUB_ALL, build_subscription_data

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker


def compensate_pop_consumer(broker: Broker, group: str) -> None:
    """Record that ``group`` consumes by POP, clustering (``compensateBasicConsumerInfo``)."""
    broker.consumer_manager.compensate_basic_consumer_info(
        group, ConsumeType.CONSUME_POP, MessageModel.CLUSTERING
    )


def compensate_pop_subscription(
    broker: Broker, group: str, topic: str, expression_type: str | None, expression: str | None
) -> None:
    """Record ``group``'s subscription to ``topic`` (``expression`` of ``expression_type`` TAG or
    SQL92, ``SQL`` as gRPC clients name it; none = ``*``) and to its pop retry topic (``*``), both
    versioned now, as a pop with that filter shows them (``compensateSubscribeData``). Also
    :func:`compensate_pop_consumer`. An expression that does not parse records nothing (the pop is
    refused)."""
    compensate_pop_consumer(broker, group)
    kind = (expression_type or EXPRESSION_TYPE_TAG).upper() if expression else EXPRESSION_TYPE_TAG
    if kind == "SQL":
        kind = EXPRESSION_TYPE_SQL92
    retry = pop_retry_topic(topic, group, broker.config.enable_retry_topic_v2)
    try:
        sub = build_subscription_data(topic, expression or SUB_ALL, expression_type=kind)
        retry_sub = build_subscription_data(retry, SUB_ALL, expression_type=kind)
    except Exception:  # a filter that does not parse: the pop answers the error
        return
    cm = broker.consumer_manager
    cm.compensate_subscribe_data(group, topic, sub)
    cm.compensate_subscribe_data(group, retry, retry_sub)
