"""Lite pull consumers: ``AsyncPullConsumer`` and ``PullConsumer`` (blocking facade).

Mirrors RocketMQ's ``DefaultLitePullConsumer``: ``subscribe`` (queues by rebalance) or
``assign`` (fixed queues); background long-polling pulls fill a buffer (flow control:
``pull_threshold_for_queue`` per queue); ``poll(timeout)`` returns buffered messages and marks
them consumed (the offset to commit is then the ProcessQueue minimum, i.e. after them);
``commit_sync`` sends offsets to the broker, or auto-commit every ``auto_commit_interval``
seconds from ``poll``; ``seek`` / ``seek_to_begin`` / ``seek_to_end``,
``offset_for_timestamp`` and ``committed``.

The blocking ``PullConsumer`` keeps the client loop's thread out of the steady state: its ``poll``
and ``commit_sync`` run on the caller's thread, and a commit sends the next pull of a queue along
with its offsets; that machinery is :class:`~tidemq.client.consumer.pull_caller.CallerSide` in
``pull_caller.py``. The loop's pull tasks (``lite_pulls.py``) still own every queue: the first pulls,
long polling once caught up, errors, failover to a slave, and whatever the committer does not pull.
One pull per queue is in flight at a time, so a queue's batches reach the buffer in queue order.
Both run the same pull kernel (``pull_core.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tidemq.client.config import PullConsumerConfig, apply_overrides
from tidemq.client.consumer.lite_offsets import LiteCommitter
from tidemq.client.consumer.lite_poll import PollBuffer
from tidemq.client.consumer.lite_pulls import LitePulls
from tidemq.client.consumer.lite_queues import LiteQueues
from tidemq.client.consumer.offset_store import ReadOffsetType, RemoteBrokerOffsetStore
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_api import PullAPIWrapper
from tidemq.client.consumer.pull_caller import CallerSide
from tidemq.client.consumer.pull_core import PullRequest
from tidemq.client.consumer.rebalance import Rebalancer
from tidemq.client.consumer.selector import Selector
from tidemq.client.direct import DirectPool
from tidemq.client.facade import BlockingFacade
from tidemq.client.instance import ClientInstance
from tidemq.errors import ClientError
from tidemq.protocol.body import ConsumeFromWhere, ConsumerData, ConsumeType, MessageModel
from tidemq.protocol.message import MessageExt, MessageQueue

__all__ = ["AsyncPullConsumer", "PullConsumer"]


class AsyncPullConsumer:
    """An asyncio lite pull consumer. Mirrors ``DefaultLitePullConsumer`` (CLUSTERING offsets on the broker).

    Made of components with public interfaces (each reads this consumer's public attributes):
    :attr:`queues` (subscriptions, assignment, rebalance steps; ``lite_queues.py``), :attr:`pulls`
    (the pull tasks running the pull kernel; ``lite_pulls.py``), :attr:`buffer` (pulled batches
    waiting for ``poll``; ``lite_poll.py``) and :attr:`committer` (``commit_sync``, auto-commit;
    ``lite_offsets.py``).

    Example::

        consumer = AsyncPullConsumer(namesrv_addr=addr, consumer_group="cg")
        consumer.subscribe("TopicA")
        await consumer.start()
        msgs = await consumer.poll(timeout=1.0)
        await consumer.commit_sync()
    """

    def __init__(self, config: PullConsumerConfig | None = None, **overrides: Any) -> None:
        self.config = apply_overrides(config, PullConsumerConfig, overrides)
        self.client_id = self.config.build_client_id()
        self.group_name = self.config.consumer_group
        self._instance: ClientInstance | None = None
        self._store: RemoteBrokerOffsetStore | None = None
        self._pull_api: PullAPIWrapper | None = None
        self.running = False
        """True between :meth:`start` and :meth:`shutdown`."""
        self.queues = LiteQueues(self)
        self.pulls = LitePulls(self)
        self.buffer = PollBuffer(self)
        self.committer = LiteCommitter(self)
        self.rebalancer = Rebalancer(
            self.group_name,
            self.client_id,
            "CLUSTERING",
            self.config.allocate_message_queue_strategy,
            self.queues,
            expire_idle_queues=False,
        )

    # -- setup ---------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        """Consume ``topic``'s queues allocated to this member by rebalance; ``expression``: ``"*"``,
        ``"tagA || tagB"`` or a :class:`MessageSelector` (``MessageSelector.by_sql("a > 5")``).

        Raises:
            ClientError: :meth:`assign` was called before.
        """
        self.queues.subscribe(topic, expression)

    async def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly ``queues`` (no rebalance). Mirrors ``assign``.

        Raises:
            ClientError: :meth:`subscribe` was called before.
        """
        await self.queues.assign(queues)

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise ClientError("the consumer is not started; call start() first")
        return self._instance

    @property
    def pull_api(self) -> PullAPIWrapper:
        """The group's :class:`PullAPIWrapper`. Raises ClientError before start()."""
        if self._pull_api is None:
            raise ClientError("the consumer is not started; call start() first")
        return self._pull_api

    @property
    def offset_store(self) -> RemoteBrokerOffsetStore:
        if self._store is None:
            raise ClientError("the consumer is not started; call start() first")
        return self._store

    def assignment(self) -> list[MessageQueue]:
        """Queues consumed now (sorted)."""
        return self.rebalancer.owned()

    async def start(self) -> None:
        """Join the ClientInstance; fetch routes; start pulling."""
        if self.running:
            return
        if not self.group_name:
            raise ClientError("consumer_group is required")
        inst = ClientInstance.acquire(self.config)
        self._store = self.committer.store = RemoteBrokerOffsetStore(inst, self.group_name)
        inst.register_consumer(self.group_name, self)
        self._instance = inst
        self._pull_api = PullAPIWrapper(inst, self.group_name)
        self.queues.start_handoff(inst)
        self.running = True
        await inst.start()
        if self.queues.handoff is not None:
            self.queues.handoff.start_renewal(self.rebalancer.owned)
        if self.config.enable_msg_trace:  # message trace: polled messages count as consumed
            from tidemq.client.trace import start_pull_trace

            self.buffer.trace = await start_pull_trace(self.config, self.group_name)
        for topic in self.subscribed_topics():
            await inst.update_topic_route_info_from_name_server(topic)
        await inst.send_heartbeat_to_all_brokers()
        if self.queues.assigned is not None:
            await self.queues.apply_assignment()
        else:
            inst.rebalance_immediately()

    async def shutdown(self) -> None:
        """Stop pulling, commit offsets, release the queues' locks (``clean_handoff``), unregister."""
        if not self.running:
            return
        self.running = False
        await self.pulls.shutdown()
        await self.committer.shutdown()
        await self.commit_sync()
        await self.queues.release_all()  # committed above: the next owners start right there
        self.rebalancer.destroy()
        trace, self.buffer.trace = self.buffer.trace, None
        if trace is not None:
            await trace.shutdown()
        inst, self._instance = self._instance, None
        if inst is not None:
            await inst.unregister_consumer(self.group_name)

    # -- ConsumerInner ---------------------------------------------------------------------------

    def subscribed_topics(self) -> set[str]:
        return set(self.rebalancer.subscription_inner)

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        self.rebalancer.topic_subscribe_info_table[topic] = set(mqs)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group_name,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=MessageModel.CLUSTERING,
            consume_from_where=ConsumeFromWhere(self.config.consume_from_where),
            subscription_data_set=list(self.rebalancer.subscription_inner.values()),
        )

    async def do_rebalance(self) -> None:
        if self.running and self.queues.assigned is None:
            await self.rebalancer.do_rebalance()

    async def persist_consumer_offset(self) -> None:
        if self._store is not None:
            await self._store.persist_all(set(self.rebalancer.process_queue_table))

    # -- polling and offsets -------------------------------------------------------------------------

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """Messages pulled so far (waits up to ``timeout`` s, default ``poll_timeout``); [] on timeout.

        Polled messages count as consumed: ``commit_sync`` (or auto-commit) stores offsets after them.
        """
        return await self.buffer.poll(self.config.poll_timeout if timeout is None else timeout)

    async def commit_sync(self) -> None:
        """Send the consumed offsets to the brokers now. Mirrors ``commitSync``.

        Only queues whose offset changed since the last commit are sent: one UPDATE_CONSUMER_OFFSET
        each, all at once (to the group's master, or a slave while the master is gone). A commit
        with nothing new consumed sends nothing.
        """
        await self.committer.commit_sync()

    async def committed(self, mq: MessageQueue) -> int:
        """The offset stored on the broker for ``mq`` (-1 if none). Mirrors ``committed``."""
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` from ``offset``. Mirrors ``seek``.

        Raises:
            ClientError: ``mq`` is not assigned, or ``offset`` is outside [min, max].
        """
        pq = self.rebalancer.process_queue_table.get(mq)
        if pq is None:
            raise ClientError(f"seek: {mq} is not assigned to this consumer")
        lo, hi = await self.min_offset(mq), await self.max_offset(mq)
        if not lo <= offset <= hi:
            raise ClientError(f"seek offset {offset} of {mq} is outside [{lo}, {hi}]")
        fresh = ProcessQueue()
        with self.pulls.table.lock:
            pq.dropped = True
            self.rebalancer.process_queue_table[mq] = fresh
            self.offset_store.update_offset(mq, offset, False)
        self.pulls.start(PullRequest(self.group_name, mq, fresh, offset))

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """Seek to the queue's min offset."""
        await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """Seek to the queue's max offset (only new messages)."""
        await self.seek(mq, await self.max_offset(mq))

    async def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET."""
        addr = await self.instance.find_broker_addr(mq.broker_name, topic=mq.topic)
        return await self.instance.api.get_min_offset(addr, mq, self.config.mq_client_api_timeout)

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET."""
        return await self.instance.max_offset(mq, self.config.mq_client_api_timeout)

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP. Mirrors ``offsetForTimestamp``."""
        return await self.instance.search_offset(mq, timestamp_ms, self.config.mq_client_api_timeout)

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``. Mirrors ``fetchMessageQueues``."""
        await self.instance.update_topic_route_info_from_name_server(topic)
        route = self.instance.topic_route_table.get(topic)
        if route is None:
            route = await self.instance.get_route(topic)
        from tidemq.client.route import route_to_subscribe_queues

        return sorted(route_to_subscribe_queues(topic, route))


class PullConsumer(BlockingFacade[AsyncPullConsumer]):
    """Blocking lite pull consumer over :class:`AsyncPullConsumer`. Mirrors ``DefaultLitePullConsumer``."""

    def __init__(self, config: PullConsumerConfig | None = None, **overrides: Any) -> None:
        super().__init__(AsyncPullConsumer(config, **overrides))
        cfg = self._core.config
        signed = bool(cfg.access_key and cfg.secret_key)
        self._direct: DirectPool | None = None if signed else DirectPool()
        """Blocking connections for :meth:`commit_sync` on the caller's thread (not with ACL
        signing, which the loop's RPC hook does)."""
        self._caller = CallerSide(self._core)

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        self._core.subscribe(topic, expression)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        self._run(self._core.assign(list(queues)))

    def shutdown(self) -> None:
        """See :meth:`AsyncPullConsumer.shutdown`; also stops the background loop when unused."""
        if self._direct is not None:
            self._direct.close()
        self._shutdown_core(self._core.shutdown, 30)

    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """See :meth:`AsyncPullConsumer.poll`; takes from the cache on this thread (no loop hop)."""
        return self._caller.poll(timeout)

    def commit_sync(self) -> None:
        """See :meth:`AsyncPullConsumer.commit_sync`. Sent on this thread over a blocking connection
        per broker (:meth:`CallerSide.commit`): no hop to the client loop, which
        keeps pulling and decoding meanwhile."""
        core = self._core
        if self._direct is None or not core.running:
            self._run(core.commit_sync())
            return
        rest = self._caller.commit(self._direct)
        if rest:
            self._run(core.committer.commit_many(rest))

    def committed(self, mq: MessageQueue) -> int:
        return self._run(self._core.committed(mq))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._run(self._core.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._run(self._core.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._run(self._core.seek_to_end(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(self._core.offset_for_timestamp(mq, timestamp_ms))

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self._core.fetch_message_queues(topic))

    def assignment(self) -> list[MessageQueue]:
        result: list[MessageQueue] = self._call(self._core.assignment)
        return result
