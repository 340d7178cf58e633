"""Delay levels: the hook for delivering messages parked in ``SCHEDULE_TOPIC_XXXX``.

Mirrors the pure parts of RocketMQ's ``ScheduleMessageService`` (``computeDeliverTimestamp``,
``messageTimeup``).

The store (``MessageStore.put_messages``) stores a message with delay level L > 0 (clamped to the
highest level, 18 by default) in ``SCHEDULE_TOPIC_XXXX`` queue ``L - 1`` with its real destination
in the ``REAL_TOPIC`` / ``REAL_QID`` properties and, as consume-queue tags code, its delivery time (ms).

Hook for the delivery service (a later issue): a ``ScheduleMessageService`` reads queue ``L - 1``
from its offset in ``delayOffset.json``, and for every entry whose tags code (delivery time) has
passed calls :func:`restore_real_message` and puts the result back through the store.
"""

from __future__ import annotations

from tidemq.protocol.filter import tags_hash
from tidemq.protocol.message import MessageConst
from tidemq.store.results import MessageExtBrokerInner


def compute_deliver_timestamp(delay_level: int, store_timestamp_ms: int, delay_table: dict[int, int]) -> int:
    """When a message stored at ``store_timestamp_ms`` with ``delay_level`` is due (ms)."""
    delay = delay_table.get(delay_level)
    if delay is None:
        return store_timestamp_ms + 1000
    return store_timestamp_ms + delay


def restore_real_message(msg: MessageExtBrokerInner) -> MessageExtBrokerInner:
    """The message a delivery service puts back when a scheduled message is due.

    Mirrors ``ScheduleMessageService.messageTimeup``: real topic and queue from ``REAL_TOPIC`` /
    ``REAL_QID``, ``DELAY`` cleared, tags code recomputed from ``TAGS``; body, flag, properties,
    born time/host and reconsume times kept.
    """
    props = dict(msg.properties)
    topic = props.pop(MessageConst.PROPERTY_REAL_TOPIC, msg.topic)
    queue_id = int(props.pop(MessageConst.PROPERTY_REAL_QUEUE_ID, "0") or 0)
    props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
    out = MessageExtBrokerInner(
        topic,
        msg.body,
        flag=msg.flag,
        properties=props,
        queue_id=queue_id,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        reconsume_times=msg.reconsume_times,
        tags_code=tags_hash(props.get(MessageConst.PROPERTY_TAGS)),
    )
    return out
