"""Rebalancer: keeps a consumer's owned queues equal to its allocation.

Mirrors RocketMQ's ``RebalanceImpl`` (+ ``RebalancePushImpl`` / ``RebalanceLitePullImpl`` via
the :class:`RebalanceHost` hooks). For each subscribed topic (including ``%RETRY%<group>``):
BROADCASTING owns every readable queue; CLUSTERING sorts the queues and the group's client ids
(GET_CONSUMER_LIST_BY_GROUP), runs the allocation strategy and applies the
:func:`~tidemq.client.consumer.rebalance_plan.plan_rebalance` diff: dropped queues are marked
dropped and their offsets persisted before they are forgotten; new queues start from
``compute_pull_from_where``. When anything changed, the host is told first (new subscription
version + heartbeat) and then the new queues' PullRequests are dispatched.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from tidemq.client.consumer.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_service import PullRequest
from tidemq.client.consumer.rebalance_plan import plan_rebalance
from tidemq.errors import ClientError
from tidemq.protocol.body import SubscriptionData
from tidemq.protocol.message import MessageQueue

__all__ = ["RebalanceHost", "Rebalancer"]

log = logging.getLogger(__name__)


class RebalanceHost(Protocol):
    """Consumer-specific steps of a rebalance."""

    async def find_consumer_id_list(self, topic: str) -> list[str]:
        """Client ids of the group (from a broker of ``topic``)."""
        ...

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Persist and forget ``mq``'s offset; True when the queue may be removed."""
        ...

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Start offset for a newly owned queue; < 0 means "skip this round"."""
        ...

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        """Forget any in-memory offset of ``mq`` before it is (re)added."""
        ...

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        """Called once per changed topic, before new queues start pulling."""
        ...

    def dispatch_pull_request(self, requests: list[PullRequest]) -> None:
        """Start pulling the new queues."""
        ...


class Rebalancer:
    """Owned-queue table of one consumer group. Mirrors ``RebalanceImpl``.

    Args:
        group: the consumer group.
        client_id: this client's id.
        message_model: ``"CLUSTERING"`` or ``"BROADCASTING"``.
        strategy: allocation strategy (default Averagely).
        host: the consumer's hooks.
        expire_idle_queues: drop and recreate queues not pulled for 120 s (push consumers).
    """

    def __init__(
        self,
        group: str,
        client_id: str,
        message_model: str,
        strategy: AllocateMessageQueueStrategy | None,
        host: RebalanceHost,
        *,
        expire_idle_queues: bool = True,
    ) -> None:
        self.group = group
        self.client_id = client_id
        self.message_model = str(getattr(message_model, "value", message_model))
        self.strategy = strategy or AllocateMessageQueueAveragely()
        self.host = host
        self.expire_idle_queues = expire_idle_queues
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self.lock_hook: Callable[[MessageQueue], Awaitable[bool]] | None = None
        """Orderly CLUSTERING: LOCK_BATCH_MQ a new queue before owning it (``RebalanceImpl.lock``);
        a queue whose lock is refused is skipped this round."""

    def owned(self, topic: str | None = None) -> list[MessageQueue]:
        """Currently owned queues (of ``topic``), sorted."""
        return sorted(mq for mq in self.process_queue_table if topic is None or mq.topic == topic)

    async def do_rebalance(self) -> None:
        """One round over every subscribed topic. Mirrors ``doRebalance``."""
        for topic in list(self.subscription_inner):
            try:
                await self.rebalance_by_topic(topic)
            except ClientError as exc:
                log.warning("rebalance of %s in %s skipped: %s", topic, self.group, exc)
        self.truncate_message_queue_not_my_topic()

    async def rebalance_by_topic(self, topic: str) -> None:
        """Mirrors ``rebalanceByTopic``."""
        mq_set = self.topic_subscribe_info_table.get(topic)
        if not mq_set:
            if not topic.startswith("%RETRY%"):
                log.debug("rebalance of %s: no route yet for group %s", topic, self.group)
            return
        if self.message_model == "BROADCASTING":
            allocated = set(mq_set)
        else:
            cid_all = await self.host.find_consumer_id_list(topic)
            if not cid_all:
                log.debug("rebalance of %s: no consumer ids for group %s", topic, self.group)
                return
            allocated = set(self.strategy.allocate(self.group, self.client_id, mq_set, cid_all))
        await self.update_process_queue_table_in_rebalance(topic, allocated, mq_set)

    async def update_process_queue_table_in_rebalance(
        self, topic: str, allocated: set[MessageQueue], mq_all: set[MessageQueue]
    ) -> bool:
        """Apply the diff for ``topic``. Mirrors ``updateProcessQueueTableInRebalance``; True when changed."""
        owned = {mq: pq for mq, pq in self.process_queue_table.items() if mq.topic == topic}
        expired = {mq for mq, pq in owned.items() if self.expire_idle_queues and pq.is_pull_expired()}
        plan = plan_rebalance(owned, allocated, expired=expired)
        changed = False
        for mq in plan.drop:
            pq = owned[mq]
            pq.dropped = True
            if await self.host.remove_unnecessary_message_queue(mq, pq):
                self.process_queue_table.pop(mq, None)
                changed = True
                log.info("%s: drop %s from the process queue table", self.group, mq)
        requests: list[PullRequest] = []
        for mq in plan.add:
            if mq in self.process_queue_table:
                continue
            if self.lock_hook is not None and not await self.lock_hook(mq):
                log.info("%s: %s is locked by another member; retry next round", self.group, mq)
                continue
            self.host.remove_dirty_offset(mq)
            next_offset = await self.host.compute_pull_from_where(mq)
            if next_offset < 0:
                log.warning("%s: cannot compute the start offset of %s; retry next round", self.group, mq)
                continue
            pq = ProcessQueue()
            pq.locked = self.lock_hook is not None
            self.process_queue_table[mq] = pq
            requests.append(PullRequest(self.group, mq, pq, next_offset))
            changed = True
            log.info("%s: add %s, next offset %d", self.group, mq, next_offset)
        if changed:
            await self.host.message_queue_changed(topic, mq_all, allocated)
        if requests:
            self.host.dispatch_pull_request(requests)
        return changed

    def truncate_message_queue_not_my_topic(self) -> None:
        """Drop queues of topics no longer subscribed. Mirrors ``truncateMessageQueueNotMyTopic``."""
        for mq in [mq for mq in self.process_queue_table if mq.topic not in self.subscription_inner]:
            pq = self.process_queue_table.pop(mq)
            pq.dropped = True

    def destroy(self) -> None:
        """Mark every queue dropped and forget them. Mirrors ``destroy``."""
        for pq in self.process_queue_table.values():
            pq.dropped = True
        self.process_queue_table.clear()
