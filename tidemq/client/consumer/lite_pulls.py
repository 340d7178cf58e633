"""The pull tasks of a lite pull consumer: the client loop's runner of the pull kernel.

:class:`LitePulls` runs one asyncio task per pulled queue (RocketMQ's
``DefaultLitePullConsumerImpl.PullTaskImpl``): wait out flow control, pull the queue's
:class:`~tidemq.client.consumer.pull_core.PullRequest` (the kernel's state), let the kernel judge
the answer (:meth:`~tidemq.client.consumer.pull_core.QueuePull.on_result`) and put a FOUND batch,
still encoded, into the consumer's poll buffer. The pulls a blocking ``commit_sync`` sends along
(``pull_caller.py``) are the other runner: they build their request with :meth:`LitePulls.pull_fields`
and hand their answer to :meth:`LitePulls.pulled`, so both go through the same code. One pull per
queue is in flight at a time (the kernel state's in-flight entry, see ``pull_table.py``), so a queue's batches reach the buffer in queue
order.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemq.client.api import PullResult
from tidemq.client.consumer.pull_api import PullKernelFields
from tidemq.client.consumer.pull_core import FLOW_CONTROL_DELAY_S, FlowLimits, PullRequest, PullVerdict
from tidemq.client.consumer.pull_table import PullTable
from tidemq.errors import TideMQError
from tidemq.protocol.body import SubscriptionData
from tidemq.protocol.headers import PullSysFlag
from tidemq.protocol.message import MessageQueue

if TYPE_CHECKING:
    from tidemq.client.consumer.lite_poll import PulledBatch
    from tidemq.client.consumer.pull import AsyncPullConsumer

__all__ = ["LitePulls", "count_records"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_LITE_SYS_FLAG = PullSysFlag.build_sys_flag(False, True, True, False)
"""Lite pulls: no offset commit along (commits are ``commit_sync``'s), long polling, subscription sent."""


def count_records(body: bytes) -> int:
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


class LitePulls:
    """The pull tasks of one :class:`~tidemq.client.consumer.pull.AsyncPullConsumer` (module docstring).

    Reads the consumer's public ``config``, ``running``, ``pull_api``, ``rebalancer`` and
    ``buffer`` (the poll buffer).

    Args:
        core: the consumer.

    Attributes:
        table: the per-queue pull state shared with a blocking caller's thread (``pull_table.py``);
            its ``lock`` also guards the consumer's ProcessQueues and offset table.
    """

    def __init__(self, core: AsyncPullConsumer) -> None:
        self.core = core
        self.table = PullTable(core.config.consumer_pull_timeout)
        self.limits = FlowLimits.of(core.config, span=False)
        """Per-queue flow control (no offset span: a lite ProcessQueue keeps counts and sizes only)."""
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}

    def start(self, pr: PullRequest) -> None:
        """Pull ``pr`` from now on (on the loop), instead of any earlier request of its queue (a
        caller's pull for that one is dropped)."""
        old = self._tasks.pop(pr.message_queue, None)
        if old is not None:
            old.cancel()
        self.table.set_request(pr)
        self._tasks[pr.message_queue] = asyncio.ensure_future(self._pull_loop(pr))

    def stop(self, mq: MessageQueue) -> None:
        """Stop pulling ``mq`` (on the loop): its task ends, a caller's pull in flight is dropped."""
        task = self._tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        with self.table.lock:
            self.table.forget(mq)

    async def shutdown(self) -> None:
        """Cancel every pull task and wait for them to end."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def pull_fields(self, pr: PullRequest, sub: SubscriptionData | None) -> PullKernelFields:
        """The fields of ``pr``'s next pull with subscription ``sub`` (``pullKernelImpl``'s
        parameters as ``PullTaskImpl`` passes them): any thread."""
        cfg = self.core.config
        return PullKernelFields(
            sub_expression=sub.sub_string if sub else "*",
            expression_type=sub.expression_type if sub else "TAG",
            sub_version=0,
            offset=pr.next_offset,
            max_nums=cfg.pull_batch_size,
            sys_flag=_LITE_SYS_FLAG,
            commit_offset=0,
            broker_suspend_max_time_millis=int(cfg.broker_suspend_max_time * 1000),
            suggest_which_broker_id=pr.suggest_which_broker_id,
        )

    async def _pull_loop(self, pr: PullRequest) -> None:
        """Mirrors ``DefaultLitePullConsumerImpl.PullTaskImpl``: pull, buffer, repeat."""
        core, mq, pq, table = self.core, pr.message_queue, pr.process_queue, self.table
        cfg = core.config
        api, limits, cache = core.pull_api, self.limits, core.buffer.cache
        while core.running and not pq.dropped:
            if (  # flow control: the queue's cached messages, or the whole poll buffer
                limits.check(pq) is not None
                or len(cache) * cfg.pull_batch_size > cfg.pull_threshold_for_all
                or not table.claim_for_loop(pr)
            ):
                await asyncio.sleep(FLOW_CONTROL_DELAY_S)
                continue
            sub = core.rebalancer.subscription_inner.get(mq.topic)
            try:
                result = await api.pull_kernel_impl(
                    mq, timeout=cfg.consumer_pull_timeout, **self.pull_fields(pr, sub)
                )
            except TideMQError as exc:
                table.release_loop_claim(pr)
                log.warning("pull of %s failed: %s", mq, exc)
                await asyncio.sleep(cfg.pull_time_delay_when_exception)
                continue
            except BaseException:
                table.release_loop_claim(pr)
                raise
            try:
                if pq.dropped:
                    return
                # The body is decoded by poll(), on the poller's thread: this loop only moves bytes
                # (a blocking PullConsumer's thread and this loop then do not fight over the GIL).
                self.pulled(pr, result, sub, cache.put)
            finally:
                table.release_loop_claim(pr)

    def pulled(
        self,
        pr: PullRequest,
        result: PullResult,
        sub: SubscriptionData | None,
        put: Callable[[PulledBatch], None],
    ) -> None:
        """A pull's answer for ``pr``, from either runner: let the kernel move the offset on (and
        remember the suggested node), and ``put`` a FOUND batch into the poll buffer (counted as cached
        until polled). OFFSET_ILLEGAL goes on from the broker's offset (``PullTaskImpl``'s policy)."""
        mq, pq = pr.message_queue, pr.process_queue
        verdict = pr.on_result(result)
        if verdict is PullVerdict.FOUND:
            body = result.body
            if body:
                count, size = count_records(body), len(body)
                with self.table.lock:
                    pq.msg_count += count  # counted as cached (flow control) until polled
                    pq.msg_size += size
                put((mq, pq, result, sub, count, size))
        elif verdict is PullVerdict.ILLEGAL:
            log.warning("offset of %s illegal; continuing from %d", mq, pr.next_offset)
