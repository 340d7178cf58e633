"""Rebalancer: keeps a consumer's owned queues equal to its allocation.

Mirrors RocketMQ's ``RebalanceImpl`` (+ ``RebalancePushImpl`` / ``RebalanceLitePullImpl`` via
the :class:`RebalanceHost` hooks). For each subscribed topic (including ``%RETRY%<group>``):
BROADCASTING owns every readable queue; CLUSTERING sorts the queues and the group's client ids
(GET_CONSUMER_LIST_BY_GROUP), runs the allocation strategy and applies the
:func:`~tidemq.client.consumer.rebalance_plan.plan_rebalance` diff: dropped queues are marked
dropped and their offsets persisted before they are forgotten; new queues start from
``compute_pull_from_where``. When anything changed, the host is told first (new subscription
version + heartbeat) and then the new queues' PullRequests are dispatched.

A round runs in two phases: first every topic's dropped queues are released (all at once), then
every topic's new queues are added (all at once, each dispatched as soon as it may start). With a
``lock_hook`` a new queue is locked on its broker first; while another member holds that lock (it
is handing the queue over: draining, committing, then unlocking; ``handoff.py``) the lock is tried
again every :data:`LOCK_RETRY_S` for up to ``lock_wait`` seconds. Releasing before acquiring means
two members swapping queues never wait for each other.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from tidemq.client.consumer.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_core import PullRequest
from tidemq.client.consumer.rebalance_plan import RebalancePlan, plan_rebalance
from tidemq.errors import ClientError
from tidemq.protocol.body import SubscriptionData
from tidemq.protocol.message import MessageQueue

__all__ = ["RebalanceHost", "Rebalancer"]

log = logging.getLogger(__name__)

LOCK_RETRY_S = 0.02
"""Seconds between two tries of a refused queue lock while its old owner hands it over."""


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
        """LOCK_BATCH_MQ a new queue before owning it (orderly: ``RebalanceImpl.lock``; clean
        hand-off: wait for the old owner's release). True when this client holds the lock."""
        self.lock_wait = 0.0
        """Seconds a refused lock is retried (the old owner is handing the queue over)."""
        self.lock_required = True
        """True (orderly): a queue still locked by another member after ``lock_wait`` is skipped
        this round. False (clean hand-off): it is taken anyway, from the committed offset, as
        RocketMQ does (the old owner is gone, hung, or a client that never locks)."""

    def owned(self, topic: str | None = None) -> list[MessageQueue]:
        """Currently owned queues (of ``topic``), sorted."""
        return sorted(mq for mq in self.process_queue_table if topic is None or mq.topic == topic)

    async def do_rebalance(self) -> None:
        """One round over every subscribed topic. Mirrors ``doRebalance``: every topic's dropped
        queues are released first, then every topic's new queues are added."""
        pending: list[tuple[str, RebalancePlan, set[MessageQueue], set[MessageQueue], bool]] = []
        for topic in list(self.subscription_inner):
            try:
                found = await self.allocate(topic)
                if found is not None:
                    allocated, mq_all = found
                    plan, dropped = await self.release(topic, allocated)
                    pending.append((topic, plan, allocated, mq_all, dropped))
            except ClientError as exc:
                log.warning("rebalance of %s in %s skipped: %s", topic, self.group, exc)
        await asyncio.gather(*(self.acquire(*args) for args in pending))
        self.truncate_message_queue_not_my_topic()

    async def rebalance_by_topic(self, topic: str) -> None:
        """Mirrors ``rebalanceByTopic``."""
        found = await self.allocate(topic)
        if found is not None:
            await self.update_process_queue_table_in_rebalance(topic, *found)

    async def allocate(self, topic: str) -> tuple[set[MessageQueue], set[MessageQueue]] | None:
        """``(this member's queues, all queues)`` of ``topic``, or None when there is no route or
        no consumer id list yet (the round skips the topic)."""
        mq_set = self.topic_subscribe_info_table.get(topic)
        if not mq_set:
            if not topic.startswith("%RETRY%"):
                log.debug("rebalance of %s: no route yet for group %s", topic, self.group)
            return None
        if self.message_model == "BROADCASTING":
            return set(mq_set), mq_set
        cid_all = await self.host.find_consumer_id_list(topic)
        if not cid_all:
            log.debug("rebalance of %s: no consumer ids for group %s", topic, self.group)
            return None
        return set(self.strategy.allocate(self.group, self.client_id, mq_set, cid_all)), mq_set

    async def update_process_queue_table_in_rebalance(
        self, topic: str, allocated: set[MessageQueue], mq_all: set[MessageQueue]
    ) -> bool:
        """Apply the diff for ``topic``. Mirrors ``updateProcessQueueTableInRebalance``; True when changed."""
        plan, dropped = await self.release(topic, allocated)
        return await self.acquire(topic, plan, allocated, mq_all, dropped)

    async def release(self, topic: str, allocated: set[MessageQueue]) -> tuple[RebalancePlan, bool]:
        """Phase one for ``topic``: plan the diff and release the queues to drop (all at once).
        Returns the plan and whether any queue was removed from the table."""
        owned = {mq: pq for mq, pq in self.process_queue_table.items() if mq.topic == topic}
        expired = {mq for mq, pq in owned.items() if self.expire_idle_queues and pq.is_pull_expired()}
        plan = plan_rebalance(owned, allocated, expired=expired)

        async def drop(mq: MessageQueue) -> bool:
            pq = owned[mq]
            pq.dropped = True
            if not await self.host.remove_unnecessary_message_queue(mq, pq):
                return False
            if self.process_queue_table.get(mq) is pq:
                del self.process_queue_table[mq]
            log.info("%s: drop %s from the process queue table", self.group, mq)
            return True

        results = await asyncio.gather(*(drop(mq) for mq in plan.drop))
        return plan, any(results)

    async def acquire(
        self,
        topic: str,
        plan: RebalancePlan,
        allocated: set[MessageQueue],
        mq_all: set[MessageQueue],
        dropped: bool,
    ) -> bool:
        """Phase two for ``topic``: add the plan's new queues (all at once). The host is told of
        the change (:meth:`RebalanceHost.message_queue_changed`) once, before the first new queue
        is dispatched, or after the drops when no queue was added. True when anything changed."""
        told = False
        telling = asyncio.Lock()

        async def tell() -> None:
            nonlocal told
            async with telling:
                if not told:
                    told = True
                    await self.host.message_queue_changed(topic, mq_all, allocated)

        async def add(mq: MessageQueue) -> bool:
            request = await self._new_request(mq)
            if request is None:
                return False
            await tell()
            if request.process_queue.dropped or self.process_queue_table.get(mq) is not request.process_queue:
                return True  # dropped by a later round meanwhile
            self.host.dispatch_pull_request([request])
            return True

        added = await asyncio.gather(*(add(mq) for mq in plan.add if mq not in self.process_queue_table))
        changed = dropped or any(added)
        if changed:
            await tell()
        return changed

    async def _new_request(self, mq: MessageQueue) -> PullRequest | None:
        """Lock (when asked), compute the start offset and own ``mq``; None to retry next round."""
        locked = await self._lock(mq)
        if locked is None:
            return None
        self.host.remove_dirty_offset(mq)
        next_offset = await self.host.compute_pull_from_where(mq)
        if next_offset < 0:
            log.warning("%s: cannot compute the start offset of %s; retry next round", self.group, mq)
            return None
        if mq in self.process_queue_table:  # added by an overlapping round meanwhile
            return None
        pq = ProcessQueue()
        pq.locked = locked
        self.process_queue_table[mq] = pq
        log.info("%s: add %s, next offset %d", self.group, mq, next_offset)
        return PullRequest(self.group, mq, pq, next_offset)

    async def _lock(self, mq: MessageQueue) -> bool | None:
        """Try ``lock_hook`` for up to ``lock_wait`` s: True locked, False go on without the lock,
        None skip the queue this round (``lock_required``)."""
        if self.lock_hook is None:
            return False
        deadline = time.monotonic() + self.lock_wait
        while not await self.lock_hook(mq):
            if time.monotonic() >= deadline:
                if self.lock_required:
                    log.info("%s: %s is locked by another member; retry next round", self.group, mq)
                    return None
                log.warning(
                    "%s: %s was not released within %gs; starting from its committed offset",
                    self.group,
                    mq,
                    self.lock_wait,
                )
                return False
            await asyncio.sleep(LOCK_RETRY_S)
        return True

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
