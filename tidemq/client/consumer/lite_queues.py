"""Which queues a lite pull consumer pulls: its subscriptions or its fixed assignment.

:class:`LiteQueues` keeps ``subscribe`` (queues by rebalance) and ``assign`` (fixed queues, no
rebalance) apart, and is the consumer's :class:`~tidemq.client.consumer.rebalance.RebalanceHost`:
a queue it gains starts a pull task from the start offset (``compute_pull_from_where``); a queue it
loses stops pulling, has its offset committed synchronously and, with ``clean_handoff``, its broker
lock released so that the next owner starts right there (``handoff.py``). Mirrors the
assignment half of ``DefaultLitePullConsumerImpl`` and its ``RebalanceLitePullImpl``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tidemq.client.consumer.handoff import InstanceLocks, QueueHandoff
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_core import PullRequest
from tidemq.client.consumer.selector import Selector, subscription_of
from tidemq.client.consumer.start_offset import compute_pull_from_where
from tidemq.errors import ClientError
from tidemq.protocol.filter import build_subscription_data
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.topic import validate_topic

if TYPE_CHECKING:
    from tidemq.client.consumer.pull import AsyncPullConsumer
    from tidemq.client.instance import ClientInstance

__all__ = ["LiteQueues"]


class LiteQueues:
    """Subscriptions, assignment and rebalance steps of one
    :class:`~tidemq.client.consumer.pull.AsyncPullConsumer` (module docstring). Reads the consumer's
    public ``config``, ``group_name``, ``client_id``, ``instance``, ``offset_store``, ``rebalancer``,
    ``running`` and ``pulls``.

    Args:
        core: the consumer.

    Attributes:
        assigned: the queues given to ``assign``, or None while the consumer subscribes.
        handoff: clean hand-off of subscribed queues while running with ``clean_handoff``, else None.
    """

    def __init__(self, core: AsyncPullConsumer) -> None:
        self.core = core
        self.assigned: set[MessageQueue] | None = None
        self.handoff: QueueHandoff | None = None

    def subscribe(self, topic: str, expression: Selector) -> None:
        """Pull ``topic``'s queues that rebalance gives this member.

        Raises:
            ClientError: ``assign`` was called before. TopicError: an invalid topic name.
        """
        validate_topic(topic)
        if self.assigned is not None:
            raise ClientError("subscribe() and assign() cannot be mixed")
        self.core.rebalancer.subscription_inner[topic] = subscription_of(topic, expression)

    async def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Pull exactly ``queues`` (no rebalance); applied at once while running.

        Raises:
            ClientError: ``subscribe`` was called before.
        """
        subs = self.core.rebalancer.subscription_inner
        if subs and self.assigned is None:
            raise ClientError("subscribe() and assign() cannot be mixed")
        self.assigned = set(queues)
        for mq in self.assigned:
            subs.setdefault(mq.topic, build_subscription_data(mq.topic, "*"))
        if self.core.running:
            await self.apply_assignment()

    async def apply_assignment(self) -> None:
        """Make the owned queues exactly the assigned ones (a rebalance with a fixed outcome)."""
        assert self.assigned is not None
        rebalancer = self.core.rebalancer
        for topic in {mq.topic for mq in self.assigned} | set(rebalancer.subscription_inner):
            mine = {mq for mq in self.assigned if mq.topic == topic}
            await rebalancer.update_process_queue_table_in_rebalance(topic, mine, mine)

    def start_handoff(self, inst: ClientInstance) -> None:
        """At start: with ``clean_handoff`` and subscriptions, queues change hands through their
        broker locks (the rebalancer waits for a lock up to ``handoff_timeout``)."""
        cfg, core = self.core.config, self.core
        if not cfg.clean_handoff or self.assigned is not None:
            return
        self.handoff = QueueHandoff(InstanceLocks(inst, core.group_name, core.client_id), cfg.handoff_timeout)
        core.rebalancer.lock_hook = self.handoff.lock
        core.rebalancer.lock_wait = cfg.handoff_timeout
        core.rebalancer.lock_required = False

    async def release_all(self) -> None:
        """At shutdown, after the last commit: release every owned queue's lock (the next owners
        start from that commit)."""
        if self.handoff is not None:
            await self.handoff.stop_renewal()
            await self.handoff.unlock_all(self.core.rebalancer.owned())

    # -- RebalanceHost ----------------------------------------------------------------------------

    async def find_consumer_id_list(self, topic: str) -> list[str]:
        """The group's client ids, from a broker of ``topic`` (``MQClientInstance.findConsumerIdList``).

        Raises:
            TideMQError: no broker of ``topic`` answered (the rebalance of the topic waits a round).
        """
        return await self.core.instance.find_consumer_id_list(topic, self.core.group_name)

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """A queue taken away: stop its pull task, commit its offset synchronously, forget it, and
        release its lock when hand-off is on (the next owner starts from that commit); always True
        (``RebalanceLitePullImpl.removeUnnecessaryMessageQueue``, plus the clean hand-off)."""
        core = self.core
        table = core.pulls.table
        core.pulls.stop(mq)
        # Past the table's lock: a poll counting messages of mq as consumed has finished (its offset
        # is in the offset table), and later ones see the queue dropped.
        await core.offset_store.persist(mq)
        with table.lock:
            core.offset_store.remove_offset(mq)
            table.committed.pop(mq, None)
        if self.handoff is not None:  # committed synchronously above: the next owner starts there
            await self.handoff.unlock_all([mq])
        return True

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        """Forget ``mq``'s in-memory and last committed offsets before it is (re)added
        (``RebalanceImpl.removeDirtyOffset``)."""
        table = self.core.pulls.table
        with table.lock:
            self.core.offset_store.remove_offset(mq)
            table.committed.pop(mq, None)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Mirrors ``RebalancePushImpl.computePullFromWhereWithException`` (protocol.md §7.5)."""
        core = self.core
        return await compute_pull_from_where(core.instance, core.offset_store, core.config, mq)

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        """Heartbeat at once so the brokers know the new subscription state
        (``RebalanceLitePullImpl.messageQueueChanged``, without its listener call)."""
        await self.core.instance.send_heartbeat_to_all_brokers()

    def dispatch_pull_request(self, requests: list[PullRequest]) -> None:
        """Start a pull task for each new queue from its start offset, recorded as committed
        (RocketMQ's lite pull starts its ``PullTaskImpl`` in ``updatePullTask`` instead)."""
        core = self.core
        table = core.pulls.table
        for pr in requests:
            with table.lock:
                core.offset_store.update_offset(pr.message_queue, pr.next_offset, False)
                # the starting offset needs no commit (it is the broker's, or nothing was consumed yet)
                table.committed[pr.message_queue] = pr.next_offset
            core.pulls.start(pr)
