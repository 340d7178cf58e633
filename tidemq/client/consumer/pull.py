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
``pull_caller.py``. The loop's pull tasks here still own every queue: the first pulls, long polling
once caught up, errors, failover to a slave, and whatever the committer does not pull. One pull
per queue is in flight at a time, so a queue's batches reach the buffer in queue order.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any

from tidemq.client.api import PullResult
from tidemq.client.config import PullConsumerConfig, apply_overrides
from tidemq.client.consumer.consume_cache import ConsumeRequestCache
from tidemq.client.consumer.handoff import InstanceLocks, QueueHandoff
from tidemq.client.consumer.offset_store import ReadOffsetType, RemoteBrokerOffsetStore
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_api import PullAPIWrapper, process_pull_result
from tidemq.client.consumer.pull_caller import CallerSide
from tidemq.client.consumer.pull_core import PullRequest, PullVerdict
from tidemq.client.consumer.pull_table import PullTable
from tidemq.client.consumer.rebalance import Rebalancer
from tidemq.client.consumer.selector import Selector, subscription_of
from tidemq.client.consumer.start_offset import compute_pull_from_where
from tidemq.client.direct import DirectPool
from tidemq.client.facade import BlockingFacade
from tidemq.client.instance import ClientInstance
from tidemq.errors import ClientError, TideMQError
from tidemq.protocol.body import ConsumeFromWhere, ConsumerData, ConsumeType, MessageModel, SubscriptionData
from tidemq.protocol.filter import build_subscription_data
from tidemq.protocol.headers import PullSysFlag
from tidemq.protocol.message import MessageExt, MessageQueue
from tidemq.protocol.topic import validate_topic

__all__ = ["AsyncPullConsumer", "PullConsumer"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")


def _count_records(body: bytes) -> int:
    """Records in a PULL_MESSAGE body (their TOTALSIZE fields walked, nothing decoded)."""
    n = pos = 0
    end = len(body)
    unpack = _SIZE.unpack_from
    while pos + 4 <= end:
        size = unpack(body, pos)[0]
        if size <= 0:
            break
        pos += size
        n += 1
    return n


PulledBatch = tuple[MessageQueue, ProcessQueue, PullResult, "SubscriptionData | None", int]
"""A pull answer waiting in the cache, not decoded yet: ``(queue, its ProcessQueue, the FOUND result
with its raw body, the subscription it was pulled with, records in the body)``."""


class AsyncPullConsumer:
    """An asyncio lite pull consumer. Mirrors ``DefaultLitePullConsumer`` (CLUSTERING offsets on the broker).

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
        self.rebalancer = Rebalancer(
            self.group_name,
            self.client_id,
            "CLUSTERING",
            self.config.allocate_message_queue_strategy,
            self,
            expire_idle_queues=False,
        )
        self._pull_api: PullAPIWrapper | None = None
        self._assigned: set[MessageQueue] | None = None
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self.table = PullTable(self.config.consumer_pull_timeout)
        """Per-queue pull state shared with a blocking caller's thread (``pull_table.py``)."""
        self._cache: ConsumeRequestCache[PulledBatch] | None = None
        self.last_commit = time.monotonic()
        """``time.monotonic()`` of the last commit (auto-commit runs ``auto_commit_interval`` after)."""
        self._tasks_bg: set[asyncio.Task[None]] = set()
        self._running = False
        self._trace: Any = None  # AsyncTraceDispatcher while enable_msg_trace (tidemq.client.trace)
        self._handoff: QueueHandoff | None = None
        """Clean hand-off of subscribed queues (``clean_handoff``; ``handoff.py``)."""
        self._lock = self.table.lock
        """Guards the ProcessQueues, the offset table and :attr:`table` between the loop (pulls,
        rebalance) and the thread of a blocking ``poll`` / ``commit_sync`` (:class:`CallerSide`).
        Held only for short sections that never await (re-entrant: a pull answer read by a committer
        is handled under it)."""

    # -- setup ---------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        """Consume ``topic``'s queues allocated to this member by rebalance; ``expression``: ``"*"``,
        ``"tagA || tagB"`` or a :class:`MessageSelector` (``MessageSelector.by_sql("a > 5")``)."""
        validate_topic(topic)
        if self._assigned is not None:
            raise ClientError("subscribe() and assign() cannot be mixed")
        self.rebalancer.subscription_inner[topic] = subscription_of(topic, expression)

    async def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly ``queues`` (no rebalance). Mirrors ``assign``."""
        if self.rebalancer.subscription_inner and self._assigned is None:
            raise ClientError("subscribe() and assign() cannot be mixed")
        self._assigned = set(queues)
        for mq in self._assigned:
            self.rebalancer.subscription_inner.setdefault(mq.topic, build_subscription_data(mq.topic, "*"))
        if self._running:
            await self._apply_assignment()

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
        if self._running:
            return
        if not self.group_name:
            raise ClientError("consumer_group is required")
        inst = ClientInstance.acquire(self.config)
        self._store = RemoteBrokerOffsetStore(inst, self.group_name)
        inst.register_consumer(self.group_name, self)
        self._instance = inst
        self._pull_api = PullAPIWrapper(inst, self.group_name)
        if self.config.clean_handoff and self._assigned is None:
            self._handoff = QueueHandoff(
                InstanceLocks(inst, self.group_name, self.client_id), self.config.handoff_timeout
            )
            self.rebalancer.lock_hook = self._handoff.lock
            self.rebalancer.lock_wait = self.config.handoff_timeout
            self.rebalancer.lock_required = False
        self._running = True
        await inst.start()
        if self._handoff is not None:
            self._handoff.start_renewal(self.rebalancer.owned)
        if self.config.enable_msg_trace:  # message trace: polled messages count as consumed
            from tidemq.client.trace import start_pull_trace

            self._trace = await start_pull_trace(self.config, self.group_name)
        for topic in self.subscribed_topics():
            await inst.update_topic_route_info_from_name_server(topic)
        await inst.send_heartbeat_to_all_brokers()
        if self._assigned is not None:
            await self._apply_assignment()
        else:
            inst.rebalance_immediately()

    async def _apply_assignment(self) -> None:
        assert self._assigned is not None
        for topic in {mq.topic for mq in self._assigned} | set(self.rebalancer.subscription_inner):
            mine = {mq for mq in self._assigned if mq.topic == topic}
            await self.rebalancer.update_process_queue_table_in_rebalance(topic, mine, mine)

    async def shutdown(self) -> None:
        """Stop pulling, commit offsets, unregister."""
        if not self._running:
            return
        self._running = False
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), *self._tasks_bg, return_exceptions=True)
        self._tasks.clear()
        await self.commit_sync()
        if self._handoff is not None:  # committed above: the next owners start right there
            await self._handoff.stop_renewal()
            await self._handoff.unlock_all(self.rebalancer.owned())
        self.rebalancer.destroy()
        trace, self._trace = self._trace, None
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
        if self._running and self._assigned is None:
            await self.rebalancer.do_rebalance()

    async def persist_consumer_offset(self) -> None:
        if self._store is not None:
            await self._store.persist_all(set(self.rebalancer.process_queue_table))

    # -- RebalanceHost -------------------------------------------------------------------------------

    async def find_consumer_id_list(self, topic: str) -> list[str]:
        return await self.instance.find_consumer_id_list(topic, self.group_name)

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        task = self._tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        with self._lock:
            self.table.forget(mq)  # a caller's pull in flight: its answer is dropped
            # Holding the lock: a poll counting messages of mq as consumed has finished (its offset
            # is in the table), and later ones see the queue dropped.
        await self.offset_store.persist(mq)
        with self._lock:
            self.offset_store.remove_offset(mq)
            self.table.committed.pop(mq, None)
        if self._handoff is not None:  # committed synchronously above: the next owner starts there
            await self._handoff.unlock_all([mq])
        return True

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        with self._lock:
            self.offset_store.remove_offset(mq)
            self.table.committed.pop(mq, None)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Mirrors ``RebalancePushImpl.computePullFromWhereWithException`` (protocol.md §7.5)."""
        return await compute_pull_from_where(self.instance, self.offset_store, self.config, mq)

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        await self.instance.send_heartbeat_to_all_brokers()

    def dispatch_pull_request(self, requests: list[PullRequest]) -> None:
        for pr in requests:
            with self._lock:
                self.offset_store.update_offset(pr.message_queue, pr.next_offset, False)
                # the starting offset needs no commit (it is the broker's, or nothing was consumed yet)
                self.table.committed[pr.message_queue] = pr.next_offset
            self._start_task(pr)

    def _start_task(self, pr: PullRequest) -> None:
        old = self._tasks.pop(pr.message_queue, None)
        if old is not None:
            old.cancel()
        self.table.set_request(pr)  # a caller's pull for the previous PullRequest: its answer is dropped
        self._tasks[pr.message_queue] = asyncio.ensure_future(self._pull_loop(pr))

    # -- pulling -----------------------------------------------------------------------------------

    async def _pull_loop(self, pr: PullRequest) -> None:
        """Mirrors ``DefaultLitePullConsumerImpl.PullTaskImpl``: pull, buffer, repeat."""
        cfg, mq, pq = self.config, pr.message_queue, pr.process_queue
        while self._running and not pq.dropped:
            if (
                pq.msg_count > cfg.pull_threshold_for_queue
                or len(self.cache) * cfg.pull_batch_size > cfg.pull_threshold_for_all
            ):
                await asyncio.sleep(0.05)
                continue
            if not self.table.claim_for_loop(mq):
                await asyncio.sleep(0.05)
                continue
            sub = self.rebalancer.subscription_inner.get(mq.topic)
            try:
                result = await self.pull_api.pull_kernel_impl(
                    mq,
                    sub_expression=sub.sub_string if sub else "*",
                    expression_type=sub.expression_type if sub else "TAG",
                    sub_version=0,
                    offset=pr.next_offset,
                    max_nums=cfg.pull_batch_size,
                    sys_flag=PullSysFlag.build_sys_flag(False, True, True, False),
                    commit_offset=0,
                    broker_suspend_max_time_millis=int(cfg.broker_suspend_max_time * 1000),
                    timeout=cfg.consumer_pull_timeout,
                )
            except TideMQError as exc:
                self.table.release_loop_claim(mq)
                log.warning("pull of %s failed: %s", mq, exc)
                await asyncio.sleep(cfg.pull_time_delay_when_exception)
                continue
            except BaseException:
                self.table.release_loop_claim(mq)
                raise
            try:
                if pq.dropped:
                    return
                # The body is decoded by poll(), on the poller's thread: this loop only moves bytes
                # (a blocking PullConsumer's thread and this loop then do not fight over the GIL).
                self.pulled(pr, result, sub, self.cache.put)
            finally:
                self.table.release_loop_claim(mq)

    def pulled(
        self,
        pr: PullRequest,
        result: PullResult,
        sub: SubscriptionData | None,
        put: Callable[[PulledBatch], None],
    ) -> None:
        """A pull's answer for ``pr``: move its offset on, remember the node and the backlog, and
        ``put`` a FOUND batch into the cache (counted as cached until polled)."""
        mq, pq = pr.message_queue, pr.process_queue
        self.pull_api.update_pull_from_which_node(mq, result.suggest_which_broker_id)
        verdict = pr.on_result(result)  # the kernel's status switch (pull_core.py)
        if verdict is PullVerdict.FOUND:
            if result.body:
                count = _count_records(result.body)
                with self._lock:
                    pq.msg_count += count  # counted as cached (flow control) until polled
                put((mq, pq, result, sub, count))
        elif verdict is PullVerdict.ILLEGAL:  # PullTaskImpl's policy: go on from the broker's offset
            log.warning("offset of %s illegal; continuing from %d", mq, pr.next_offset)

    @property
    def cache(self) -> ConsumeRequestCache[PulledBatch]:
        """Pulled batches waiting for :meth:`poll`, still encoded (created on the consumer's loop at
        first use)."""
        if self._cache is None:
            self._cache = ConsumeRequestCache()
        return self._cache

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """Messages pulled so far (waits up to ``timeout`` s, default ``poll_timeout``); [] on timeout.

        Polled messages count as consumed: ``commit_sync`` (or auto-commit) stores offsets after them.
        """
        timeout = self.config.poll_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            item = await self.cache.take(deadline - time.monotonic())
            if item is None:
                await self._maybe_auto_commit()
                return []
            msgs = self.consumed(item)
            if msgs:
                await self._maybe_auto_commit()
                return msgs

    def consumed(self, item: PulledBatch, decoded: list[MessageExt] | None = None) -> list[MessageExt]:
        """Decode a taken batch (tag filter, broker name, MIN/MAX_OFFSET; unless ``decoded``
        already) and count its messages as consumed: the queue's offset moves past them. [] when
        its queue was dropped meanwhile or the tag filter kept nothing."""
        mq, pq, result, sub, count = item
        if pq.dropped:
            return []
        msgs = decoded if decoded is not None else process_pull_result(mq, result, sub).msg_found_list
        with self._lock:
            pq.msg_count -= count
            if pq.dropped or not msgs:
                return []
            offset = pq.pass_through(msgs)
            if offset >= 0:
                self.offset_store.update_offset(mq, offset, False)
        if self._trace is not None:
            from tidemq.client.trace import record_polled

            record_polled(self._trace, self.group_name, msgs)
        return msgs

    async def _maybe_auto_commit(self) -> None:
        if (
            self.config.auto_commit
            and time.monotonic() - self.last_commit >= self.config.auto_commit_interval
        ):
            await self.commit_sync()

    async def commit_sync(self) -> None:
        """Send the consumed offsets to the brokers now. Mirrors ``commitSync``.

        Only queues whose offset changed since the last commit are sent: one UPDATE_CONSUMER_OFFSET
        each, all at once (to the group's master, or a slave while the master is gone). A commit
        with nothing new consumed sends nothing.
        """
        self.last_commit = time.monotonic()
        changed = self.changed_offsets()
        if changed:
            await self.commit_many(changed)

    def take_auto_commit(self) -> bool:
        """True when an auto-commit is due (the clock then restarts); any thread."""
        if not (self._running and self.config.auto_commit):
            return False
        if time.monotonic() - self.last_commit < self.config.auto_commit_interval:
            return False
        self.last_commit = time.monotonic()
        return True

    def spawn_commit(self) -> None:
        """On the loop: run :meth:`commit_sync` in the background (awaited by :meth:`shutdown`)."""
        if self._running:
            task = asyncio.ensure_future(self.commit_sync())
            self._tasks_bg.add(task)
            task.add_done_callback(self._tasks_bg.discard)

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`shutdown`."""
        return self._running and self._instance is not None

    def changed_offsets(self) -> list[tuple[MessageQueue, int]]:
        """``(queue, offset)`` of the owned queues whose offset changed since the last commit."""
        if self._store is None:
            return []
        with self._lock:
            owned = self.rebalancer.process_queue_table
            committed = self.table.committed
            changed = [(mq, off) for mq, off in self._store.offset_table.items() if committed.get(mq) != off]
            return sorted(item for item in changed if item[0] in owned) if changed else []

    async def commit_many(self, changed: list[tuple[MessageQueue, int]]) -> None:
        """UPDATE_CONSUMER_OFFSET (sync) of each ``(queue, offset)``, all at once; failures are
        logged and left to the next commit."""
        await asyncio.gather(*(self._commit_one(mq, off) for mq, off in changed))

    async def _commit_one(self, mq: MessageQueue, offset: int) -> None:
        assert self._store is not None
        if await self._store.update_consume_offset_to_broker(mq, offset, oneway=False):
            with self._lock:
                self.table.committed[mq] = offset

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
        with self._lock:
            pq.dropped = True
            self.rebalancer.process_queue_table[mq] = fresh
            self.offset_store.update_offset(mq, offset, False)
        self._start_task(PullRequest(self.group_name, mq, fresh, offset))

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
            self._run(core.commit_many(rest))

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
