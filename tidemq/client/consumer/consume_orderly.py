"""ConsumeMessageOrderlyService: per-queue, in-order consumption under the broker's queue lock.

Mirrors RocketMQ's ``ConsumeMessageOrderlyService`` plus the lock half of ``RebalanceImpl``
(``lock``, ``lockAll``, ``unlock``, ``unlockAll``); protocol.md §7.8.

* A newly assigned queue is locked on its broker (LOCK_BATCH_MQ, 1 s timeout) before it gets a
  ProcessQueue (the rebalancer calls :meth:`ConsumeMessageOrderlyService.lock`); every
  ``REBALANCE_LOCK_INTERVAL_S`` (20 s) all owned queues are re-locked per broker and those missing
  from ``lockOKMQSet`` are marked unlocked. A local lock is valid 30 s after the last success.
* One consume task per queue at a time (``MessageQueueLock``), taking messages in queue-offset
  order; it runs only while the queue is locked and the local lock has not expired (else it
  re-locks after 10-100 ms and resumes 10 ms later, or 3 s later when the lock was refused), and
  yields after 60 s of continuous consumption.
* ``SUCCESS`` commits (offset = last consumed + 1). ``SUSPEND_CURRENT_QUEUE_A_MOMENT`` (or a
  listener exception) puts the messages back and re-delivers them after
  ``suspend_current_queue_time_millis`` (clamped to 10 ms - 30 s), each with ``reconsume_times + 1``;
  a message that already failed ``max_reconsume_times`` times (-1 = 16: unlike RocketMQ, orderly
  consumers do not retry forever) goes to ``%DLQ%<group>`` (CONSUMER_SEND_MSG_BACK with delay level
  -1, falling back to a ``%RETRY%`` send the broker redirects) and the queue goes on.
* A dropped queue is unlocked once its running listener call finished (at most 1 s wait, else the
  next rebalance retries) and its offset was persisted; at shutdown all queues are unlocked (sync)
  after the offsets were persisted.

Everything runs on the ClientInstance's event loop; a sync listener runs in the consume thread pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tidemq.client.consumer.consume_service import ListenerRunner, reset_retry_topic, wait_or_cancel
from tidemq.client.consumer.handoff import LockHost
from tidemq.client.consumer.listener import ConsumeOrderlyContext, ConsumeOrderlyStatus
from tidemq.client.consumer.offset_store import OffsetStore
from tidemq.client.consumer.process_queue import ProcessQueue, now_ms
from tidemq.errors import TideMQError
from tidemq.protocol.message import MessageConst, MessageExt, MessageQueue

__all__ = [
    "MAX_TIME_CONSUME_CONTINUOUSLY_S",
    "REBALANCE_LOCK_INTERVAL_S",
    "ConsumeMessageOrderlyService",
    "OrderlyConsumerHost",
    "clamp_suspend_millis",
]

log = logging.getLogger(__name__)

REBALANCE_LOCK_INTERVAL_S = 20.0
"""Period of the lock renewal (``rocketmq.client.rebalance.lockInterval``)."""
MAX_TIME_CONSUME_CONTINUOUSLY_S = 60.0
"""One consume task keeps a queue at most this long (``rocketmq.client.maxTimeConsumeContinuously``)."""
LOCK_TIMEOUT_S = 1.0
"""RPC timeout of LOCK_BATCH_MQ / UNLOCK_BATCH_MQ."""
UNLOCK_WAIT_S = 1.0
"""How long a queue drop waits for the running listener call before trying again next rebalance."""


def clamp_suspend_millis(value: int) -> int:
    """``suspendCurrentQueueTimeMillis`` clamped to 10 ms .. 30 s (``ConsumeMessageOrderlyService``)."""
    return max(10, min(30_000, value))


class OrderlyConsumerHost(Protocol):
    """What the orderly service needs from its push consumer."""

    group_name: str
    client_id: str

    @property
    def offset_store(self) -> OffsetStore: ...

    @property
    def is_broadcasting(self) -> bool: ...

    def owned_process_queues(self) -> dict[MessageQueue, ProcessQueue]:
        """The rebalancer's live ``{queue: ProcessQueue}`` table."""
        ...

    async def send_message_back(self, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK with fallback; True when the message is safely handed back."""
        ...


class ConsumeMessageOrderlyService:
    """Orderly consumption. Mirrors ``ConsumeMessageOrderlyService``.

    Args:
        host: the consumer (group, client id, offsets, queue table, send-back).
        listener: ``listener(msgs, ConsumeOrderlyContext)`` (function, coroutine function or
            :class:`~tidemq.client.consumer.listener.MessageListenerOrderly`).
        locks: the LOCK_BATCH_MQ / UNLOCK_BATCH_MQ calls of this client (``handoff.InstanceLocks``).
        consume_thread_max: pool size (sync listeners) and the number of queues consumed at once.
        consume_message_batch_max_size: messages per listener call.
        suspend_current_queue_time_millis: default pause after SUSPEND (ms).
        max_reconsume_times: failures before a message goes to the DLQ (-1 = 16).
    """

    def __init__(
        self,
        host: OrderlyConsumerHost,
        listener: Any,
        locks: LockHost,
        *,
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
        suspend_current_queue_time_millis: int = 1000,
        max_reconsume_times: int = -1,
    ) -> None:
        self.host = host
        self.locks = locks
        self.batch_size = consume_message_batch_max_size
        self.suspend_current_queue_time_millis = suspend_current_queue_time_millis
        self.max_reconsume_times = 16 if max_reconsume_times == -1 else max_reconsume_times
        self._runner = ListenerRunner(listener, consume_thread_max, f"consume-orderly-{host.group_name}")
        self.is_async = self._runner.is_async
        self._slots = asyncio.Semaphore(consume_thread_max)
        self._mq_locks: dict[MessageQueue, asyncio.Lock] = defaultdict(asyncio.Lock)
        """``MessageQueueLock``: one consume task per queue."""
        self._consume_locks: dict[MessageQueue, asyncio.Lock] = defaultdict(asyncio.Lock)
        """``ProcessQueue.consumeLock``: held during one listener call (a drop waits for it)."""
        self._inflight: set[asyncio.Task[None]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._lock_task: asyncio.Task[None] | None = None
        self._stopped = False
        self.consumed_ok = 0
        self.consumed_failed = 0
        self.consume_calls = 0
        self.consume_rt_ms = 0.0
        """Listener calls and their total duration (ms): ``consumeRT`` (consume_rates.py)."""
        self.sent_to_dlq = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the periodic re-lock (CLUSTERING only). Mirrors ``start``."""
        if not self.host.is_broadcasting and self._lock_task is None:
            self._lock_task = asyncio.ensure_future(self._lock_periodically())

    async def _lock_periodically(self) -> None:
        while True:
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL_S)
            try:
                await self.lock_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("periodic lock of %s failed", self.host.group_name)

    async def shutdown(self, timeout: float) -> bool:
        """Stop consuming: wait up to ``timeout`` s for running listener calls. True when all finished.

        Unlocking is separate (:meth:`unlock_all`), so the consumer can persist offsets first.
        """
        self._stopped = True
        if self._lock_task is not None:
            self._lock_task.cancel()
            with contextlib.suppress(BaseException):
                await self._lock_task
            self._lock_task = None
        for handle in list(self._timers):
            handle.cancel()
        self._timers.clear()
        finished = await wait_or_cancel(self._inflight, timeout)
        self._runner.shutdown()
        return finished

    # -- locks (RebalanceImpl) -----------------------------------------------------------------

    async def lock(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for one queue (1 s timeout); True when this client holds it. Mirrors ``lock``."""
        if self._stopped:
            return False
        addr = await self.locks.find_broker_addr_for_lock(mq.broker_name)
        if addr is None:
            return False
        try:
            locked = await self.locks.lock_batch_mq(addr, {mq}, LOCK_TIMEOUT_S)
        except TideMQError as exc:
            log.warning("lock of %s failed: %s", mq, exc)
            return False
        if self._stopped:  # shutdown began while the lock was in flight: give it back at once
            if locked:
                await self.unlock_all(locked)
            return False
        self._mark_locked(locked)
        ok = mq in locked
        log.log(
            logging.INFO if ok else logging.DEBUG,
            "%s: lock %s %s",
            self.host.group_name,
            mq,
            "OK" if ok else "refused",
        )
        return ok

    def _mark_locked(self, locked: set[MessageQueue]) -> None:
        table = self.host.owned_process_queues()
        now = now_ms()
        for m in locked:
            pq = table.get(m)
            if pq is not None:
                pq.locked = True
                pq.last_lock_timestamp = now

    async def lock_all(self) -> None:
        """Re-lock every owned queue, per broker; queues refused are marked unlocked. Mirrors ``lockAll``."""
        if self._stopped:
            return
        by_broker: dict[str, set[MessageQueue]] = defaultdict(set)
        table = self.host.owned_process_queues()
        for mq, pq in table.items():
            if not pq.dropped:
                by_broker[mq.broker_name].add(mq)
        for broker_name, mqs in by_broker.items():
            addr = await self.locks.find_broker_addr_for_lock(broker_name)
            if addr is None:
                continue
            try:
                locked = await self.locks.lock_batch_mq(addr, mqs, LOCK_TIMEOUT_S)
            except TideMQError as exc:
                log.warning("lock of %d queue(s) on %s failed: %s", len(mqs), broker_name, exc)
                continue
            if self._stopped:
                await self.unlock_all(locked)
                return
            self._mark_locked(locked)
            for mq in mqs - locked:
                lost = table.get(mq)
                if lost is not None and lost.locked:
                    lost.locked = False
                    log.info("%s: the lock of %s was lost", self.host.group_name, mq)

    async def unlock(self, mq: MessageQueue, *, oneway: bool) -> None:
        """UNLOCK_BATCH_MQ for one queue. Mirrors ``unlock``."""
        addr = await self.locks.find_broker_addr_for_lock(mq.broker_name)
        if addr is None:
            return
        try:
            await self.locks.unlock_batch_mq(addr, {mq}, LOCK_TIMEOUT_S, oneway=oneway)
        except TideMQError as exc:
            log.warning("unlock of %s failed: %s", mq, exc)

    async def unlock_all(self, mqs: set[MessageQueue], *, oneway: bool = False) -> None:
        """UNLOCK_BATCH_MQ for ``mqs``, per broker. Mirrors ``unlockAll``."""
        by_broker: dict[str, set[MessageQueue]] = defaultdict(set)
        for mq in mqs:
            by_broker[mq.broker_name].add(mq)
        for broker_name, group in by_broker.items():
            addr = await self.locks.find_broker_addr_for_lock(broker_name)
            if addr is None:
                continue
            try:
                await self.locks.unlock_batch_mq(addr, group, LOCK_TIMEOUT_S, oneway=oneway)
            except TideMQError as exc:
                log.warning("unlock of %d queue(s) on %s failed: %s", len(group), broker_name, exc)

    async def remove_process_queue(
        self, mq: MessageQueue, pq: ProcessQueue, persist: Callable[[], Awaitable[None]]
    ) -> bool:
        """A queue is no longer ours: wait for its running listener call (up to 1 s), ``persist()``
        its offset, then unlock it. False when the call did not finish (the next rebalance retries).

        Mirrors ``RebalancePushImpl.removeUnnecessaryMessageQueue`` for orderly CLUSTERING; unlike
        RocketMQ the unlock is not delayed by 20 s, because the offset is persisted only after the
        last listener call of the queue finished.
        """
        lock = self._consume_locks[mq]
        try:
            await asyncio.wait_for(lock.acquire(), UNLOCK_WAIT_S)
        except TimeoutError:
            pq.try_unlock_times += 1
            log.info("%s: %s is still being consumed; unlock retried later", self.host.group_name, mq)
            return False
        try:
            await persist()
            await self.unlock(mq, oneway=False)
            pq.locked = False
        finally:
            lock.release()
        self._mq_locks.pop(mq, None)
        self._consume_locks.pop(mq, None)
        return True

    # -- consumption ---------------------------------------------------------------------------

    def submit_consume_request(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch_to_consume: bool = True
    ) -> None:
        """Start the queue's consume task if ``dispatch_to_consume`` (``ProcessQueue.put_messages``
        said no task is running); the task takes the cached messages itself. Mirrors ``submitConsumeRequest``."""
        if dispatch_to_consume:
            self._spawn(self._consume_request(pq, mq))

    def submit_consume_request_later(self, pq: ProcessQueue, mq: MessageQueue, delay: float) -> None:
        """Run the queue's consume task after ``delay`` seconds. Mirrors ``submitConsumeRequestLater``."""
        self._later(delay, lambda: self._spawn(self._consume_request(pq, mq)))

    def try_lock_later_and_reconsume(self, mq: MessageQueue, pq: ProcessQueue, delay: float) -> None:
        """Re-lock ``mq`` after ``delay`` s; resume 10 ms later if locked, 3 s later if not."""

        async def relock() -> None:
            ok = await self.lock(mq)
            self.submit_consume_request_later(pq, mq, 0.01 if ok else 3.0)

        self._later(delay, lambda: self._spawn(relock()))

    def _later(self, delay: float, fn: Callable[[], None]) -> None:
        if self._stopped:
            return
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            if not self._stopped:
                fn()

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    def _spawn(self, coro: Awaitable[None]) -> None:
        if self._stopped:
            if asyncio.iscoroutine(coro):
                coro.close()
            return
        task = asyncio.ensure_future(coro)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    def _lock_valid(self, pq: ProcessQueue) -> bool:
        return self.host.is_broadcasting or (pq.locked and not pq.is_lock_expired())

    async def _consume_request(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        """One consume task of a queue. Mirrors ``ConsumeMessageOrderlyService.ConsumeRequest.run``."""
        if pq.dropped:
            return
        async with self._mq_locks[mq]:
            if not self._lock_valid(pq):
                if not pq.dropped:
                    self.try_lock_later_and_reconsume(mq, pq, 0.1)
                return
            begin = time.monotonic()
            while not self._stopped and not pq.dropped:
                if not self._lock_valid(pq):
                    self.try_lock_later_and_reconsume(mq, pq, 0.01)
                    return
                if time.monotonic() - begin > MAX_TIME_CONSUME_CONTINUOUSLY_S:
                    self.submit_consume_request_later(pq, mq, 0.01)
                    return
                msgs = pq.take_messages(self.batch_size)
                if not msgs:
                    return  # take_messages cleared pq.consuming: the next pull dispatches again
                reset_retry_topic(msgs, self.host.group_name)
                stamp = str(now_ms())
                for m in msgs:
                    m.put_property(MessageConst.PROPERTY_CONSUME_START_TIMESTAMP, stamp)
                context = ConsumeOrderlyContext(mq)
                async with self._consume_locks[mq]:
                    if pq.dropped:
                        pq.make_message_to_consume_again(msgs)
                        return
                    async with self._slots:
                        status = await self._call_listener(msgs, context)
                if not await self.process_consume_result(msgs, status, context, pq, mq):
                    return

    async def _call_listener(
        self, msgs: list[MessageExt], context: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus:
        began = time.monotonic()
        try:
            result = await self._runner(msgs, context)
        except Exception:
            log.exception(
                "orderly listener of group %s raised; suspending %s",
                self.host.group_name,
                context.message_queue,
            )
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        finally:
            self.consume_calls += 1  # on the loop: no lock
            self.consume_rt_ms += (time.monotonic() - began) * 1000.0
        if result is None or result == ConsumeOrderlyStatus.SUCCESS:
            return ConsumeOrderlyStatus.SUCCESS
        if result != ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
            log.warning("orderly listener returned %r; treating it as SUSPEND_CURRENT_QUEUE_A_MOMENT", result)
        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT

    async def process_consume_result(
        self,
        msgs: list[MessageExt],
        status: ConsumeOrderlyStatus,
        context: ConsumeOrderlyContext,
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> bool:
        """Commit or suspend; True to go on consuming this queue. Mirrors ``processConsumeResult``
        (``auto_commit`` is always honoured as True)."""
        commit_offset = -1
        go_on = True
        if status is ConsumeOrderlyStatus.SUCCESS:
            self.consumed_ok += len(msgs)
            commit_offset = pq.commit()
        else:
            self.consumed_failed += len(msgs)
            if await self.check_reconsume_times(msgs):
                pq.make_message_to_consume_again(msgs)
                millis = context.suspend_current_queue_time_millis
                if millis < 0:
                    millis = self.suspend_current_queue_time_millis
                self.submit_consume_request_later(pq, mq, clamp_suspend_millis(millis) / 1000.0)
                go_on = False
            else:
                commit_offset = pq.commit()
        if commit_offset >= 0 and not pq.dropped:
            self.host.offset_store.update_offset(mq, commit_offset, False)
        return go_on

    async def check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """Count one more failure per message; those past ``max_reconsume_times`` go to the DLQ.

        Returns True when the batch must be suspended and re-consumed (some message is retried,
        or could not be handed to the DLQ). Mirrors ``checkReconsumeTimes``.
        """
        suspend = False
        for msg in msgs:
            if msg.reconsume_times >= self.max_reconsume_times and not self.host.is_broadcasting:
                msg.properties[MessageConst.PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times)
                if await self.host.send_message_back(msg, -1):
                    self.sent_to_dlq += 1
                    log.warning(
                        "%s: message %s failed %d times in orderly mode; sent to the dead-letter queue",
                        self.host.group_name,
                        msg.msg_id,
                        msg.reconsume_times + 1,
                    )
                else:
                    suspend = True
                    msg.reconsume_times += 1
            elif msg.reconsume_times >= self.max_reconsume_times:
                log.warning("BROADCASTING, the message %s consume failed too often, drop it", msg.msg_id)
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend

    @property
    def inflight(self) -> int:
        """Consume tasks running or scheduled."""
        return len(self._inflight)
