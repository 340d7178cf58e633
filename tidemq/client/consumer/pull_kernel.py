"""The pull kernel of a push consumer: every owned queue's pulls, in one place.

RocketMQ spreads this over ``PullMessageService`` (the thread that runs PullRequests),
``DefaultMQPushConsumerImpl.pullMessage`` (the checks before a pull: dropped, paused, flow control,
orderly lock; the pull itself) and its ``PullCallback`` (what an answer does: cache and dispatch
FOUND messages, move the offset on NO_NEW_MSG, drop the queue on OFFSET_ILLEGAL, schedule the next
pull); the queue's pull state and the answer's status switch are the sans-I/O kernel's
(:class:`~tidemq.client.consumer.pull_core.QueuePull`, which a PullRequest is). :class:`PushPullKernel` holds all of it for one :class:`~tidemq.client.consumer.push.AsyncPushConsumer`,
and its two ways of running a queue's pulls: the loop's :class:`PullMessageService`, and a
:class:`~tidemq.client.consumer.queue_lane.QueueLane` thread for a queue that is caught up (the
kernel is the lanes' :class:`~tidemq.client.consumer.queue_lane.LaneHost`; the ``lane_*`` methods run
on a lane's thread, the others on the loop).

The consumer keeps what is not pulling: subscriptions, rebalance, offsets, consumption. The kernel
reads them through the consumer's public attributes (``config``, ``rebalancer``, ``offset_store``,
``pull_api``, ``consume_service``, ``running``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from tidemq.client.api import PullResult
from tidemq.client.consumer.consume_service import ConsumeMessageConcurrentlyService
from tidemq.client.consumer.offset_store import ReadOffsetType
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_api import PullKernelFields, process_pull_result
from tidemq.client.consumer.pull_core import FlowLimits, PullRequest, PullVerdict
from tidemq.client.consumer.pull_service import PullMessageService
from tidemq.client.consumer.queue_lane import QueueLane
from tidemq.errors import TideMQError
from tidemq.protocol.body import SubscriptionData
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import PullSysFlag
from tidemq.protocol.message import MessageExt, MessageQueue

if TYPE_CHECKING:
    from tidemq.client.consumer.push import AsyncPushConsumer

__all__ = ["ORDERLY_UNLOCKED_PULL_DELAY_S", "PushPullKernel"]

log = logging.getLogger(__name__)

ORDERLY_UNLOCKED_PULL_DELAY_S = 3.0
"""An orderly queue not (yet) locked is pulled again after this long (Java: 3 s)."""


class PushPullKernel:
    """The pulls of one push consumer's queues (module docstring).

    Args:
        consumer: the push consumer whose queues are pulled.

    Attributes:
        service: the loop's :class:`PullMessageService` (RocketMQ's ``PullMessageService``).
        lanes: queues pulled and consumed by a thread of their own (``queue_lane.py``); loop only.
        lanes_enabled: whether new lanes may start (set by :meth:`start`).
        limits: the flow limits of every owned queue (set by :meth:`start`).
        paused: pulls wait while set (``suspend`` / ``resume``).
        loop: the client loop while the consumer runs (lanes hand results to it), else None.
    """

    def __init__(self, consumer: AsyncPushConsumer) -> None:
        self.consumer = consumer
        self.service = PullMessageService(self.pull_message)
        self.lanes: dict[MessageQueue, QueueLane] = {}
        self.lanes_enabled = False
        self.limits = FlowLimits.of(consumer.config, span=True)
        self.paused = False
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self, consume: object) -> None:
        """At the consumer's start: fix the flow limits (no span check when orderly) and turn lanes
        on when they fit: ``queue_lanes`` set, no ACL signing (a lane's connection does not sign
        requests), concurrent consumption with a plain-function listener, no pull interval."""
        cfg = self.consumer.config
        self.limits = FlowLimits.of(cfg, span=not self.consumer.consume_orderly)
        self.lanes_enabled = (
            cfg.queue_lanes
            and not (cfg.access_key and cfg.secret_key)
            and isinstance(consume, ConsumeMessageConcurrentlyService)
            and not consume.is_async
            and cfg.pull_interval <= 0
        )

    def dispatch(self, requests: list[PullRequest]) -> None:
        """Start pulling newly assigned queues (their first pull may be a lane's, see :meth:`_pull_next`)."""
        for pr in requests:
            self._pull_next(pr, caught_up=True)

    def stop_lane(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Stop the lane of ``mq`` when it pulls for ``pq`` (the queue is being dropped)."""
        lane = self.lanes.get(mq)
        if lane is not None and lane.pr.process_queue is pq:
            lane.stop()

    async def shutdown(self, timeout: float) -> None:
        """Stop every pull; wait up to ``timeout`` s for lanes running the listener to finish that call."""
        lanes = list(self.lanes.values())
        for lane in lanes:
            lane.stop()
        await self.service.shutdown()
        if lanes:  # a lane may be running the listener: it finishes that call first
            await asyncio.get_running_loop().run_in_executor(None, _join_lanes, lanes, timeout)

    async def pull_message(self, pr: PullRequest) -> None:
        """One pull of one queue, then schedule the next. Mirrors ``DefaultMQPushConsumerImpl.pullMessage``."""
        pq, mq, cfg = pr.process_queue, pr.message_queue, self.consumer.config
        delay = self.lane_pull_delay(pr)
        if delay is not None:
            if delay >= 0:
                self.service.execute_pull_request_later(pr, delay)
            return
        if self.consumer.consume_orderly and not self.consumer.is_broadcasting:
            if not pq.locked:  # wait for the lock (renewed every 20 s)
                self.service.execute_pull_request_later(pr, ORDERLY_UNLOCKED_PULL_DELAY_S)
                return
            if not pr.previously_locked:  # first pull since locking: the broker's offset is the truth
                stored = await self.consumer.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
                if stored < -1:
                    self.service.execute_pull_request_later(pr, cfg.pull_time_delay_when_exception)
                    return
                pr.previously_locked = True
                if stored >= 0:
                    pr.next_offset = stored
        sub = self.consumer.rebalancer.subscription_inner.get(mq.topic)
        if sub is None:
            self.service.execute_pull_request_later(pr, cfg.pull_time_delay_when_exception)
            return
        try:
            result = await self.consumer.pull_api.pull_kernel_impl(
                mq, timeout=cfg.consumer_pull_timeout, **self._pull_fields(pr, sub)
            )
        except TideMQError as exc:
            if self.consumer.running and not pq.dropped:
                log.warning(
                    "pull of %s failed: %s; retrying in %gs", mq, exc, cfg.pull_time_delay_when_exception
                )
            self.service.execute_pull_request_later(pr, cfg.pull_time_delay_when_exception)
            return
        if pq.dropped or not self.consumer.running:
            return
        process_pull_result(mq, result, sub)
        self._on_pull_result(pr, result)

    def _on_pull_result(self, pr: PullRequest, result: PullResult) -> None:
        """The ``PullCallback``: the kernel's verdict (``pull_core.py``), then hand FOUND messages
        to the ProcessQueue and the consume service and schedule the next pull."""
        pq, mq = pr.process_queue, pr.message_queue
        verdict = pr.on_result(result)
        if verdict is PullVerdict.FOUND:
            msgs: list[MessageExt] = result.msg_found_list
            if msgs:
                dispatch = pq.put_messages(msgs)
                consume = self.consumer.consume_service
                assert consume is not None
                consume.submit_consume_request(msgs, pq, mq, dispatch)
            elif pq.msg_count == 0:
                self.consumer.offset_store.update_offset(mq, pr.next_offset, True)
            if self.consumer.config.pull_interval > 0:
                self.service.execute_pull_request_later(pr, self.consumer.config.pull_interval)
            else:
                self._pull_next(pr, caught_up=result.max_offset <= pr.next_offset)
        elif verdict is PullVerdict.EMPTY:
            if pq.msg_count == 0:  # correctTagsOffset
                self.consumer.offset_store.update_offset(mq, pr.next_offset, True)
            self._pull_next(pr, caught_up=True)
        else:
            self._offset_illegal(pr)

    def _offset_illegal(self, pr: PullRequest) -> None:
        """The push consumer's OFFSET_ILLEGAL policy (``PullCallback``): drop the queue; after 10 s
        store and persist the broker's corrected offset, forget the queue and rebalance."""
        mq = pr.message_queue
        log.warning("the pull request offset illegal, %s next offset %d", mq, pr.next_offset)
        pr.process_queue.dropped = True

        async def fix() -> None:
            self.consumer.offset_store.update_offset(mq, pr.next_offset, False)
            await self.consumer.offset_store.persist(mq)
            self.consumer.rebalancer.process_queue_table.pop(mq, None)
            self.consumer.instance.rebalance_immediately()

        self.service.execute_task_later(fix, 10.0)

    def _pull_fields(self, pr: PullRequest, sub: SubscriptionData) -> PullKernelFields:
        """The fields of ``pr``'s next pull (``pullMessage``'s call of ``pullKernelImpl``): the
        offset to commit along is the in-memory one (0: none; never in BROADCASTING). Any thread."""
        cfg, mq = self.consumer.config, pr.message_queue
        commit_offset = (
            0
            if self.consumer.is_broadcasting
            else max(0, self.consumer.offset_store.read_offset_in_memory(mq))
        )
        post_sub = cfg.post_subscription_when_pull
        return PullKernelFields(
            sub_expression=sub.sub_string if post_sub else None,
            expression_type=sub.expression_type,
            sub_version=sub.sub_version,
            offset=pr.next_offset,
            max_nums=cfg.pull_batch_size,
            sys_flag=PullSysFlag.build_sys_flag(commit_offset > 0, True, post_sub, False),
            commit_offset=commit_offset,
            broker_suspend_max_time_millis=int(cfg.broker_suspend_max_time * 1000),
            suggest_which_broker_id=pr.suggest_which_broker_id,
        )

    def _pull_next(self, pr: PullRequest, *, caught_up: bool) -> None:
        """After a good pull on the loop, or for a new queue's first pull: the next one goes to a
        queue lane of its own when lanes are on, the queue is ``caught_up`` (the broker had nothing
        past this answer; assumed for a first pull) and a lane is free (at most
        ``consume_thread_max``), else to the loop's pull service."""
        mq = pr.message_queue
        if (
            caught_up
            and self.lanes_enabled
            and mq not in self.lanes
            and len(self.lanes) < self.consumer.config.consume_thread_max
            and self.consumer.running
        ):
            lane = QueueLane(
                self,
                pr,
                asyncio.get_running_loop(),
                retry_delay=self.consumer.config.pull_time_delay_when_exception,
                batch_size=self.consumer.config.consume_message_batch_max_size,
                pull_timeout=self.consumer.config.consumer_pull_timeout,
            )
            self.lanes[mq] = lane
            lane.start()
            return
        self.service.execute_pull_request_immediately(pr)

    # -- LaneHost (queue_lane.py) -----------------------------------------------------------------

    def lane_pull_delay(self, pr: PullRequest) -> float | None:
        """The checks before a pull that need no I/O, on any thread: None to pull now, else the
        seconds to wait (suspended, flow control), or -1.0 when the queue is no longer pulled."""
        pq = pr.process_queue
        if pq.dropped or not self.consumer.running:
            return -1.0
        pq.last_pull_timestamp = int(time.time() * 1000)
        if self.paused:
            return 1.0
        fc = self.limits.check(pq)
        return None if fc is None else fc.delay

    def lane_pull_request(self, pr: PullRequest) -> tuple[str, RemotingCommand, SubscriptionData] | None:
        sub = self.consumer.rebalancer.subscription_inner.get(pr.message_queue.topic)
        if sub is None:
            return None
        built = self.consumer.pull_api.build_pull_request(pr.message_queue, **self._pull_fields(pr, sub))
        return None if built is None else (built[0].broker_addr, built[1], sub)

    def lane_process_pull_result(
        self, mq: MessageQueue, result: PullResult, sub: SubscriptionData
    ) -> PullResult:
        return process_pull_result(mq, result, sub)

    def lane_consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, inline: bool) -> None:
        consume, loop = self.consumer.consume_service, self.loop
        assert isinstance(consume, ConsumeMessageConcurrentlyService)
        if loop is not None:  # else shut down meanwhile: the messages stay unconsumed (uncommitted)
            consume.consume_on_lane(loop, msgs, pq, mq, inline)

    def lane_handed_back(self, pr: PullRequest, delay: float) -> None:
        if not self.consumer.running or pr.process_queue.dropped:
            return
        if delay > 0:
            self.service.execute_pull_request_later(pr, delay)
        else:
            self.service.execute_pull_request_immediately(pr)

    def lane_offset_illegal(self, pr: PullRequest) -> None:
        """See :meth:`LaneHost.lane_offset_illegal <tidemq.client.consumer.queue_lane.LaneHost>`."""
        if self.consumer.running and not pr.process_queue.dropped:
            self._offset_illegal(pr)

    def lane_empty_pull(self, mq: MessageQueue, offset: int) -> None:
        if self.consumer.running:
            self.consumer.offset_store.update_offset(mq, offset, True)

    def lane_exited(self, lane: QueueLane) -> None:
        mq = lane.pr.message_queue
        if self.lanes.get(mq) is lane:
            del self.lanes[mq]


def _join_lanes(lanes: list[QueueLane], timeout: float) -> None:
    """Wait up to ``timeout`` seconds in all for the lanes' threads to end."""
    deadline = time.monotonic() + timeout
    for lane in lanes:
        lane.thread.join(max(0.0, deadline - time.monotonic()))
