"""Commit-log flushing for the broker: group commit (SYNC_FLUSH) and a periodic flush (ASYNC_FLUSH).

Mirrors RocketMQ's ``CommitLog.GroupCommitService`` and ``FlushRealTimeService``, on asyncio.

SYNC_FLUSH: a send is answered only once the store is fsynced past the end of its message.
Waiting sends register ``(end_offset, future)``; one flush at a time runs in an executor thread
(``store.flush_commit_log()`` -> flushed position; the consume queues and checkpoint are flushed by the periodic service in both modes) and resolves every waiter it covers, so one fsync serves
every send that arrived while the previous one ran. A waiter not covered within
``sync_flush_timeout`` seconds gets ``False`` (the broker answers FLUSH_DISK_TIMEOUT: the message is
stored but not known to be on disk).

ASYNC_FLUSH: :class:`FlushRealTimeService` calls ``store.flush()`` every ``interval`` seconds
(``flushIntervalCommitLog``, 500 ms) in an executor thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

FlushFn = Callable[[], int]


class GroupCommitService:
    """Group commit for SYNC_FLUSH. Mirrors ``CommitLog.GroupCommitService``.

    Args:
        flush: blocking ``() -> flushed_position`` (``MessageStore.flush``); runs in a thread.
        sync_flush_timeout: seconds a send waits for its fsync (RocketMQ ``syncFlushTimeout`` 5 s).
    """

    def __init__(self, flush: FlushFn, *, sync_flush_timeout: float = 5.0) -> None:
        self._flush = flush
        self.sync_flush_timeout = sync_flush_timeout
        self.flushed_position = 0
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self._flushing: asyncio.Task[None] | None = None
        self.flush_count = 0
        self._closed = False

    async def wait_for_flush(self, end_offset: int) -> bool:
        """Wait until the commit log is fsynced up to ``end_offset`` (exclusive end of a message).

        Returns True once durable, False on timeout (or if the service was shut down first).
        """
        if end_offset <= self.flushed_position:
            return True
        if self._closed:
            return False
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (end_offset, next(self._seq), fut))
        self._kick()
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.sync_flush_timeout)
        except TimeoutError:
            log.warning("sync flush of offset %d timed out after %.1f s", end_offset, self.sync_flush_timeout)
            return False

    def _kick(self) -> None:
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush_loop(), name="group-commit")

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiters:
            try:
                pos = await loop.run_in_executor(None, self._flush)
            except Exception:
                log.exception("commit log flush failed")
                await asyncio.sleep(0.01)  # back off before retrying a failing disk
                continue
            self.flush_count += 1
            self.flushed_position = max(self.flushed_position, pos)
            while self._waiters and self._waiters[0][0] <= self.flushed_position:
                _, _, fut = heapq.heappop(self._waiters)
                if not fut.done():
                    fut.set_result(True)
            # drop waiters that already timed out
            self._waiters = [w for w in self._waiters if not w[2].done()]
            heapq.heapify(self._waiters)

    async def shutdown(self) -> None:
        """Finish the running flush; waiters still uncovered get False."""
        self._closed = True
        if self._flushing is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._flushing, self.sync_flush_timeout)
        for _, _, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()


class FlushRealTimeService:
    """Periodic flush for ASYNC_FLUSH. Mirrors ``CommitLog.FlushRealTimeService``.

    Args:
        flush: blocking ``() -> flushed_position``; runs in a thread.
        interval: seconds between flushes (``flushIntervalCommitLog`` 500 ms).
    """

    def __init__(self, flush: FlushFn, *, interval: float = 0.5) -> None:
        self._flush = flush
        self.interval = interval
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._stop.clear()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="flush-real-time")

    async def shutdown(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval)
            if self._stop.is_set():
                break
            try:
                await loop.run_in_executor(None, self._flush)
            except Exception:
                log.exception("periodic commit log flush failed")
