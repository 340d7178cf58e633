"""What the broker tells the store's retention about consumers' progress, and its disk wiring.

The store (``tidemq/store/retention.py``) keeps every commit-log segment holding a message some
consumer has not consumed. The consumers it is told about (:func:`install`):

* every group with a committed offset for a queue (``consumerOffset.json``): its committed offset;
* every online CLUSTERING group subscribed to a topic with CONSUME_FROM_FIRST_OFFSET (or MIN_OFFSET)
  and no committed offset for a queue yet: it will read that queue from its min offset;
* the delay-level service (``delay level N`` for ``SCHEDULE_TOPIC_XXXX`` queue ``N - 1``): its
  delivery progress, so a delayed message is never deleted before it was delivered.

A group deleted with ``tidemq admin deleteSubGroup`` keeps its committed offsets (as RocketMQ does);
remove them (or the topic) for its backlog to become deletable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemq.protocol.body.base import ConsumeFromWhere, MessageModel
from tidemq.store.dispatcher import TopicQueueKey

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

__all__ = ["consumer_floors", "install", "schedule_floors"]

_FROM_FIRST = frozenset(
    {ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET}
)


def consumer_floors(broker: Broker) -> dict[TopicQueueKey, dict[str, int]]:
    """``{(topic, queue_id): {group: next offset it consumes}}`` of the groups this broker knows.

    Thread-safe: the offset table is copied under its lock; the consumer table is copied first.
    """
    floors: dict[TopicQueueKey, dict[str, int]] = {}
    table = broker.consumer_offset_manager.copy_table()
    for key, queues in table.items():
        topic, _, group = key.partition("@")
        for qid, offset in queues.items():
            floors.setdefault((topic, qid), {})[group] = offset
    queues_of = broker.store.consume_queues.topics_and_queues()
    for group, info in list(broker.consumer_manager.consumer_table.items()):
        if info.message_model != MessageModel.CLUSTERING or info.consume_from_where not in _FROM_FIRST:
            continue
        for topic in list(info.subscription_table):
            for qid in queues_of.get(topic, ()):
                floors.setdefault((topic, qid), {}).setdefault(group, 0)
    return floors


def schedule_floors(broker: Broker) -> dict[TopicQueueKey, dict[str, int]]:
    """The delay-level service's progress: ``{(SCHEDULE_TOPIC_XXXX, level - 1): {"delay level L": offset}}``."""
    service = broker.schedule_message_service
    if service is None:
        return {}
    return service.retention_floors()


def install(broker: Broker) -> None:
    """Tell the store's retention about the broker's consumers, and wake the delay levels when the
    disk is writable again (a due message waits for it)."""
    retention = broker.store.retention
    retention.floor_providers.append(lambda: consumer_floors(broker))
    retention.floor_providers.append(lambda: schedule_floors(broker))

    def on_disk_state(full: bool) -> None:
        service = broker.schedule_message_service
        if not full and service is not None:
            service.wakeup()

    broker.store.disk_guard.listeners.append(on_disk_state)
