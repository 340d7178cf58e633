"""ConsumeMessageConcurrentlyService: runs the listener and acknowledges results.

Mirrors RocketMQ's ``ConsumeMessageConcurrentlyService``. A pulled batch is cut into requests of
``consume_message_batch_max_size`` messages. Sync listeners run in a thread pool of
``consume_thread_max`` threads; coroutine listeners run on the loop; at most
``consume_thread_max`` requests run at once either way -- one code path for both.

A request for a plain-function listener goes straight from the pull's answer to the pool (no task,
no semaphore, no future chaining on the way in): the worker thread checks the queue, calls the
listener and hands the status back with one ``call_soon_threadsafe``; an all-success result is
acknowledged right there on the loop. The pool's size bounds the concurrency as the semaphore
does for coroutine listeners.

Result handling (``processConsumeResult``): on CONSUME_SUCCESS messages up to ``ack_index``
succeeded; on RECONSUME_LATER (or an exception) none did. In CLUSTERING every failed message is
sent back (CONSUMER_SEND_MSG_BACK, falling back to a direct send to ``%RETRY%<group>``); those
that cannot be sent back are re-consumed locally after 5 s and keep their offset uncommitted.
In BROADCASTING failed messages are dropped (logged). The queue offset is then advanced to
``ProcessQueue.remove_messages`` (the smallest unconsumed offset), unless the queue was dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tidemq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageListener,
)
from tidemq.client.consumer.offset_store import OffsetStore
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.protocol.message import MessageConst, MessageExt, MessageQueue
from tidemq.protocol.topic import retry_topic

__all__ = ["ConsumeMessageConcurrentlyService", "ConsumerHost", "ListenerRunner"]

log = logging.getLogger(__name__)


class ConsumerHost(Protocol):
    """What the consume service needs from its push consumer."""

    group_name: str

    @property
    def offset_store(self) -> OffsetStore: ...

    @property
    def is_broadcasting(self) -> bool: ...

    async def send_message_back(self, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK with fallback; True when the message is safely handed back."""
        ...


class ConsumeMessageConcurrentlyService:
    """Concurrent consumption. Mirrors ``ConsumeMessageConcurrentlyService``.

    Args:
        host: the consumer (group, offset store, send-back).
        listener: ``listener(msgs, context)``, a function or a coroutine function.
        consume_thread_max: pool size and concurrency limit.
        consume_message_batch_max_size: messages per listener call.
    """

    def __init__(
        self,
        host: ConsumerHost,
        listener: MessageListener,
        *,
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
    ) -> None:
        self.host = host
        self.listener = listener
        self.batch_size = consume_message_batch_max_size
        self._runner = ListenerRunner(listener, consume_thread_max, f"consume-{host.group_name}")
        self.is_async = self._runner.is_async
        self._slots = asyncio.Semaphore(consume_thread_max)
        self._inflight: set[asyncio.Future[None]] = set()
        self._stopped = False
        self.consumed_ok = 0
        self.consumed_failed = 0
        self.consume_calls = 0
        self.consume_rt_ms = 0.0
        """Listener calls and their total duration (ms): ``consumeRT`` (consume_rates.py)."""
        self._count_lock = threading.Lock()  # consumed_ok is also counted on queue lanes' threads

    @property
    def inflight(self) -> int:
        """Consume requests submitted and not finished."""
        return len(self._inflight)

    def submit_consume_request(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch_to_consume: bool = True
    ) -> None:
        """Schedule ``msgs`` in chunks of ``consume_message_batch_max_size``. Mirrors ``submitConsumeRequest``
        (``dispatch_to_consume`` is for the orderly service; concurrent consumption always dispatches)."""
        size = self.batch_size
        if self.is_async:
            for i in range(0, len(msgs), size):
                self._spawn(self._consume(msgs[i : i + size], pq, mq))
            return
        self._submit_to_pool(asyncio.get_running_loop(), msgs, pq, mq)

    def consume_on_lane(
        self,
        loop: asyncio.AbstractEventLoop,
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
        inline: bool,
    ) -> None:
        """From a queue lane's thread (``queue_lane.py``; plain-function listeners only): consume
        ``msgs`` in one listener call right here when ``inline`` (the lane checked that they fit
        in one), else submit them to the pool in chunks, as :meth:`submit_consume_request` does on
        the loop. An inline call that consumed every message is acknowledged on this thread (out of
        the ProcessQueue, offset up: RocketMQ's ``ConsumeRequest`` runs ``processConsumeResult`` on
        its consume thread too), which saves a wake-up of the loop per batch; any other result, and
        every pool call, goes back to the loop as a pool thread's does."""
        if not inline:
            self._submit_to_pool(loop, msgs, pq, mq)
            return
        status, context = self._listen_in_thread(msgs, pq, mq)
        if (
            status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            and context is not None
            and context.ack_index >= len(msgs) - 1
            and (not pq.dropped or pq.handing_off)  # pq.commits_results, inline: per listener call
        ):  # the common case, acknowledged on this thread as RocketMQ's ConsumeRequest does
            self._ack_all(msgs, pq, mq)
            pq.end_listen()
            return
        self._to_loop(loop, asyncio.Future(loop=loop), status, context, msgs, pq, mq)

    def _to_loop(
        self,
        loop: asyncio.AbstractEventLoop,
        done: asyncio.Future[None],
        status: ConsumeConcurrentlyStatus | None,
        context: ConsumeConcurrentlyContext | None,
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> None:
        """Hand a listener call's outcome to the loop (:meth:`_consumed_in_thread`); any thread."""
        try:
            loop.call_soon_threadsafe(self._consumed_in_thread, done, status, context, msgs, pq, mq)
        except RuntimeError:  # the loop is closed: the consumer is gone
            if status is not None:
                pq.end_listen()

    def _ack_all(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        """Every message of ``msgs`` consumed: out of the ProcessQueue, the queue's offset moves up
        (any thread: the ProcessQueue and the offset store lock their tables)."""
        with self._count_lock:
            self.consumed_ok += len(msgs)
        offset = pq.remove_messages(msgs)
        if offset >= 0:
            self.host.offset_store.update_offset(mq, offset, True)

    def _submit_to_pool(
        self, loop: asyncio.AbstractEventLoop, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        """Plain-function listener: ``msgs`` to the pool in chunks of ``consume_message_batch_max_size``,
        each tracked in :attr:`_inflight` until the loop has its result. Any thread (from a queue
        lane's, the ``set.add`` is atomic under the GIL)."""
        size = self.batch_size
        for i in range(0, len(msgs), size):
            done: asyncio.Future[None] = asyncio.Future(loop=loop)
            self._inflight.add(done)
            done.add_done_callback(self._inflight.discard)
            self._runner.submit(self._consume_in_thread, loop, done, msgs[i : i + size], pq, mq)

    def _consume_in_thread(
        self,
        loop: asyncio.AbstractEventLoop,
        done: asyncio.Future[None],
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> None:
        """On a pool thread: :meth:`_consume` for a plain-function listener; the status goes back
        to the loop (:meth:`_consumed_in_thread`)."""
        status, context = self._listen_in_thread(msgs, pq, mq)
        self._to_loop(loop, done, status, context, msgs, pq, mq)

    def _listen_in_thread(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue
    ) -> tuple[ConsumeConcurrentlyStatus | None, ConsumeConcurrentlyContext | None]:
        """The plain-function listener on ``msgs`` (on the calling thread): ``(status, context)``,
        both None when the queue was dropped first (nothing consumed). Otherwise the call is
        counted in ``pq.listening`` until its outcome is acknowledged."""
        if not pq.begin_listen():
            log.info("queue %s dropped, %d message(s) not consumed here", mq, len(msgs))
            return None, None
        reset_retry_topic(msgs, self.host.group_name)
        now = str(int(time.time() * 1000))
        for m in msgs:
            m.put_property(MessageConst.PROPERTY_CONSUME_START_TIMESTAMP, now)
        context = ConsumeConcurrentlyContext(mq)
        began = time.monotonic()
        try:
            result = self._runner.listener(msgs, context)
        except Exception:
            log.exception("listener of group %s raised; messages will be retried", self.host.group_name)
            result = ConsumeConcurrentlyStatus.RECONSUME_LATER
        self._timed(began)
        return self._status_of(result), context

    def _timed(self, began: float) -> None:
        """Count one listener call that began at monotonic ``began`` (any thread)."""
        ms = (time.monotonic() - began) * 1000.0
        with self._count_lock:
            self.consume_calls += 1
            self.consume_rt_ms += ms

    def _consumed_in_thread(
        self,
        done: asyncio.Future[None],
        status: ConsumeConcurrentlyStatus | None,
        context: ConsumeConcurrentlyContext | None,
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> None:
        """On the loop: acknowledge what a pool thread consumed (an all-success batch at once)."""
        if status is None or context is None:
            if not done.done():
                done.set_result(None)
            return
        if done.done() or (pq.dropped and not pq.handing_off):  # cancelled by shutdown, or dropped
            if not done.done():
                log.info("queue %s dropped while consuming; %d message(s) not committed", mq, len(msgs))
                done.set_result(None)
            pq.end_listen()
            return
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS and context.ack_index >= len(msgs) - 1:
            self._ack_all(msgs, pq, mq)
            pq.end_listen()
            done.set_result(None)
            return
        task = asyncio.ensure_future(self.process_consume_result(status, context, msgs, pq, mq))

        def finished(_task: asyncio.Task[None]) -> None:
            pq.end_listen()
            if not done.done():
                done.set_result(None)

        task.add_done_callback(finished)

    def submit_consume_request_later(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, delay: float = 5.0
    ) -> None:
        """Re-consume ``msgs`` after ``delay`` seconds. Mirrors ``submitConsumeRequestLater``."""

        async def later() -> None:
            await asyncio.sleep(delay)
            if not pq.dropped and not self._stopped:
                await self._consume(msgs, pq, mq)

        self._spawn(later())

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        async with self._slots:
            if not pq.begin_listen():
                log.info("queue %s dropped, %d message(s) not consumed here", mq, len(msgs))
                return
            try:
                reset_retry_topic(msgs, self.host.group_name)
                now = str(int(time.time() * 1000))
                for m in msgs:
                    m.put_property(MessageConst.PROPERTY_CONSUME_START_TIMESTAMP, now)
                context = ConsumeConcurrentlyContext(mq)
                status = await self._call_listener(msgs, context)
            except BaseException:
                pq.end_listen()
                raise
        try:
            if not pq.commits_results:
                log.info("queue %s dropped while consuming; %d message(s) not committed", mq, len(msgs))
                return
            await self.process_consume_result(status, context, msgs, pq, mq)
        finally:
            pq.end_listen()

    async def _call_listener(
        self, msgs: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        began = time.monotonic()
        try:
            result = await self._runner(msgs, context)
        except Exception:
            log.exception("listener of group %s raised; messages will be retried", self.host.group_name)
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        finally:
            self._timed(began)
        return self._status_of(result)

    @staticmethod
    def _status_of(result: object) -> ConsumeConcurrentlyStatus:
        """A listener's return value as a status (None counts as success)."""
        if result is None or result == ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        if result == ConsumeConcurrentlyStatus.RECONSUME_LATER:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        log.warning("listener returned %r; treating it as RECONSUME_LATER", result)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    async def process_consume_result(
        self,
        status: ConsumeConcurrentlyStatus,
        context: ConsumeConcurrentlyContext,
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> None:
        """Acknowledge, send back failures, advance the offset. Mirrors ``processConsumeResult``."""
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            ack_index = min(context.ack_index, len(msgs) - 1)
        else:
            ack_index = -1
        with self._count_lock:
            self.consumed_ok += ack_index + 1
        self.consumed_failed += len(msgs) - ack_index - 1
        failed = msgs[ack_index + 1 :]
        not_sent_back: list[MessageExt] = []
        if self.host.is_broadcasting:
            for m in failed:
                log.warning("BROADCASTING, the message %s consume failed, drop it", m.msg_id)
        else:
            for m in failed:
                if not await self.host.send_message_back(m, context.delay_level_when_next_consume):
                    m.reconsume_times += 1
                    not_sent_back.append(m)
        keep = {id(m) for m in not_sent_back}
        done = [m for m in msgs if id(m) not in keep]
        if not_sent_back:
            self.submit_consume_request_later(not_sent_back, pq, mq)
        offset = pq.remove_messages(done)
        if offset >= 0 and pq.commits_results:
            self.host.offset_store.update_offset(mq, offset, True)

    async def shutdown(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for in-flight requests; returns True when all finished."""
        self._stopped = True
        finished = await wait_or_cancel(self._inflight, timeout)
        self._runner.shutdown()
        return finished


async def wait_or_cancel(tasks: set[asyncio.Task[None]] | set[asyncio.Future[None]], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for (a snapshot of) ``tasks``, cancel those still running;
    True when all had finished. Shared by both consume services' ``shutdown``."""
    pending = set(tasks)
    if not pending:
        return True
    _, still = await asyncio.wait(pending, timeout=timeout)
    for task in still:
        task.cancel()
    return not still


def _unwrap(listener: Any) -> Any:
    return getattr(listener, "fn", listener)


class ListenerRunner:
    """Calls a user listener the same way for both consume services: a coroutine function is
    awaited on the loop, a plain function runs in a pool of ``thread_max`` threads.

    A :class:`~tidemq.client.consumer.listener.MessageListenerOrderly` wrapper is unwrapped first.
    Exceptions raised by the listener propagate to the caller.
    """

    def __init__(self, listener: Any, thread_max: int, thread_name_prefix: str) -> None:
        self.listener = _unwrap(listener)
        fn = self.listener
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004
        )
        self._executor: concurrent.futures.ThreadPoolExecutor | None = (
            None
            if self.is_async
            else concurrent.futures.ThreadPoolExecutor(thread_max, thread_name_prefix=thread_name_prefix)
        )

    async def __call__(self, msgs: list[MessageExt], context: Any) -> Any:
        """The listener's result for ``msgs`` (awaited, or run in the pool)."""
        if self._executor is None:
            return await self.listener(msgs, context)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, _call_sync, self.listener, msgs, context)

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on a pool thread (plain-function listeners only); ``fn`` reports its
        own outcome. Silently dropped after :meth:`shutdown`."""
        assert self._executor is not None
        try:
            self._executor.submit(fn, *args)
        except RuntimeError:  # the pool is shut down
            pass

    def shutdown(self) -> None:
        """Stop the pool (queued calls are cancelled, running ones finish in the background)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


def _call_sync(listener: Callable[..., Any], msgs: list[MessageExt], context: Any) -> Any:
    return listener(msgs, context)


def reset_retry_topic(msgs: list[MessageExt], group: str) -> None:
    """Messages re-consumed from ``%RETRY%<group>`` get their original topic back. Mirrors ``resetRetryAndNamespace``."""
    rt = retry_topic(group)
    for m in msgs:
        if m.topic != rt:  # most messages: their properties stay unparsed
            continue
        original = m.properties.get(MessageConst.PROPERTY_RETRY_TOPIC)
        if original:
            m.topic = original
