"""Broker-side recovery of what the config files lost, checked against the store after it loaded.

The store's consume-queue directories name every topic and queue that holds messages, so:

* a topic missing from ``topics.json`` (and its ``.bak``) but present in ``consumequeue/`` is
  re-created (read/write, as many queues as its highest queue id + 1) with one WARNING line per
  topic: its messages stay readable instead of the broker starting with no topics; when the files
  were gone altogether, one more WARNING lists the recovered topics and says that a topic that
  never stored a message (no consume queue) cannot be recovered;
* ``consumerOffset.json`` missing together with its ``.bak`` while the store holds messages is
  one loud WARNING naming the groups whose committed offsets are lost (groups known from
  ``subscriptionGroup.json`` and from ``%RETRY%<group>`` consume queues); they restart from their
  ``consumeFromWhere``. RocketMQ silently starts with an empty table in both cases.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from tidemq.broker.topic_config import make_topic_config
from tidemq.protocol.topic import (
    SCHEDULE_TOPIC,
    PermName,
    group_of_retry_topic,
    is_system_group,
    is_system_topic,
)

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

__all__ = ["config_files_missing", "recreate_missing_topics", "warn_lost_offsets"]

log = logging.getLogger(__name__)


def config_files_missing(path: Path) -> bool:
    """True when neither ``path`` nor ``path.bak`` exists (checked before the broker loads them)."""
    return not path.exists() and not path.with_name(path.name + ".bak").exists()


def recreate_missing_topics(broker: Broker, *, files_missing: bool = False) -> list[str]:
    """Re-create topic configs for consume-queue directories ``topics.json`` does not know.

    ``files_missing``: ``topics.json``, its ``.bak`` and its journal were all gone before loading;
    then one more WARNING says which topics were recovered from consume queues and that a topic that
    never stored a message cannot be (it has no consume queue): re-create it by hand.

    Returns the re-created topic names (one WARNING line each).
    """
    tcm = broker.topic_config_manager
    known = set(tcm.topics())
    created: list[str] = []
    for topic, queue_ids in sorted(broker.store.consume_queues.topics_and_queues().items()):
        if topic in known or topic == SCHEDULE_TOPIC or not queue_ids:
            continue
        queues = max(queue_ids) + 1
        tcm.update_topic_config(make_topic_config(topic, queues, PermName.PERM_READ | PermName.PERM_WRITE))
        messages = sum(broker.store.get_max_offset_in_queue(topic, q) for q in queue_ids)
        log.warning(
            "topic %s is missing from %s but has %d consume queue(s) holding %d message(s): re-created "
            "with %d read/write queues (perm RW); check its settings",
            topic,
            tcm.path,
            len(queue_ids),
            messages,
            queues,
        )
        created.append(topic)
    if files_missing and _holds_messages(broker):  # else a first start: nothing to say
        user = [t for t in created if not is_system_topic(t)]
        log.warning(
            "%s and its .bak are missing: %s; a topic that never stored a message has no consume queue "
            "and cannot be recovered: re-create it (tidemq admin updateTopic)",
            tcm.path,
            f"recovered {len(user)} topic(s) from their consume queues: {', '.join(user)}"
            if user
            else "no topic could be recovered from consume queues (none holds a message)",
        )
    return created


def _holds_messages(broker: Broker) -> bool:
    """Whether any non-system queue of the store holds a message (else: a first start)."""
    return any(
        broker.store.get_max_offset_in_queue(t, q) > 0
        for t, qs in broker.store.consume_queues.topics_and_queues().items()
        if not is_system_topic(t)
        for q in qs
    )


def known_groups(broker: Broker) -> list[str]:
    """Consumer groups the broker can name without the offsets file (sorted)."""
    groups = {g for g in broker.subscription_group_manager.subscription_group_table if not is_system_group(g)}
    for topic in broker.store.consume_queues.topics_and_queues():
        group = group_of_retry_topic(topic)
        if group:
            groups.add(group)
    return sorted(groups)


def warn_lost_offsets(broker: Broker, offsets_path: Path) -> list[str]:
    """One WARNING naming the groups whose offsets are gone with ``consumerOffset.json`` and its ``.bak``.

    Call only when :func:`config_files_missing` held before loading. Returns the named groups
    (empty when the store holds no messages: a first start).
    """
    if not _holds_messages(broker):
        return []
    groups = known_groups(broker)
    log.warning(
        "%s and its .bak are missing although the store holds messages: the committed offsets of %s "
        "are lost; those groups restart from their consumeFromWhere",
        offsets_path,
        f"groups {', '.join(groups)}" if groups else "every group (no group names are known)",
    )
    return groups
