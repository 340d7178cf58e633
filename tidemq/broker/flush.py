"""Commit-log flushing for the broker: group commit (SYNC_FLUSH) and a periodic flush (ASYNC_FLUSH).

Mirrors RocketMQ's ``CommitLog.GroupCommitService`` and ``FlushRealTimeService``, on asyncio.

SYNC_FLUSH: a send is answered only once the store is fsynced past the end of its message.
Waiting sends register ``(end_offset, future)``; one flush at a time (``store.flush_commit_log()``
-> flushed position) resolves every waiter it covers, so one fsync serves every send that arrived
while the previous one ran. It runs on the event loop at the end of the loop turn while the disk is
fast (as Redis's ``appendfsync always``), else in an executor thread. The consume queues, index and
checkpoint are flushed by the periodic service in both modes. A waiter not covered within
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
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidemq.remoting.busy_poll import IdlePoller

log = logging.getLogger(__name__)

FlushFn = Callable[[], int]


INLINE_FSYNC_MAX = 0.002
"""Seconds: while the commit log's fsync takes at most this (a moving average), the broker's group
commit runs it on the event loop at the end of the loop turn, as Redis's ``appendfsync always`` does;
a slower disk moves it to a thread so the loop keeps serving."""


class GroupCommitService:
    """Group commit for SYNC_FLUSH. Mirrors ``CommitLog.GroupCommitService``.

    Every send waiting when a flush starts is answered by that one fsync. Where the fsync runs: on
    the event loop, once per loop turn, while its moving average stays at or below
    ``inline_fsync_max`` seconds (no thread hop: what a single producer's latency needs), else in an
    executor thread, one flush at a time, looping until every waiter is covered.

    Args:
        flush: blocking ``() -> flushed_position`` (``MessageStore.flush_commit_log``).
        sync_flush_timeout: seconds a send waits for its fsync (RocketMQ ``syncFlushTimeout`` 5 s).
        inline_fsync_max: seconds; 0 (the default) always flushes in a thread. The broker passes
            :data:`INLINE_FSYNC_MAX`.
    """

    def __init__(
        self, flush: FlushFn, *, sync_flush_timeout: float = 5.0, inline_fsync_max: float = 0.0
    ) -> None:
        self._flush = flush
        self.sync_flush_timeout = sync_flush_timeout
        self.inline_fsync_max = inline_fsync_max
        self.flushed_position = 0
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self._flushing: asyncio.Task[None] | None = None
        self._inline_scheduled = False
        self.fsync_seconds = 0.0
        """Moving average of the flush's duration (s)."""
        self.flush_count = 0
        self._closed = False
        self.idle_poller: IdlePoller | None = None
        """The broker's loop poller (tidemq/remoting/busy_poll.py), paused while a flush runs in a
        thread so that thread gets the GIL back as soon as its fsync returns."""

    async def wait_for_flush(self, end_offset: int) -> bool:
        """Wait until the commit log is fsynced up to ``end_offset`` (exclusive end of a message).

        Returns True once durable, False on timeout (or if the service was shut down first).
        """
        if end_offset <= self.flushed_position:
            return True
        if self._closed:
            return False
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        timer = self.add_waiter(end_offset, fut)
        try:
            return await fut
        finally:
            if timer is not None:
                timer.cancel()

    def add_waiter(self, end_offset: int, fut: asyncio.Future[bool]) -> asyncio.TimerHandle | None:
        """:meth:`wait_for_flush` without a coroutine: ``fut`` (of the running loop) gets True once
        the commit log is fsynced up to ``end_offset``, False after ``sync_flush_timeout`` or at
        shutdown. Returns the timeout's timer (None when ``fut`` is done already), for the caller to
        cancel once ``fut`` is done."""
        if end_offset <= self.flushed_position:
            fut.set_result(True)
            return None
        if self._closed:
            fut.set_result(False)
            return None
        loop = fut.get_loop()
        heapq.heappush(self._waiters, (end_offset, next(self._seq), fut))
        self._kick(loop)
        return loop.call_later(self.sync_flush_timeout, self._time_out, fut, end_offset)

    def _time_out(self, fut: asyncio.Future[bool], end_offset: int) -> None:
        if not fut.done():
            log.warning("sync flush of offset %d timed out after %.1f s", end_offset, self.sync_flush_timeout)
            fut.set_result(False)

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._flushing is not None and not self._flushing.done():
            return  # the thread's flush loop runs until every waiter is covered
        if self.fsync_seconds <= self.inline_fsync_max and self.inline_fsync_max > 0:
            if not self._inline_scheduled:
                self._inline_scheduled = True
                loop.call_soon(self._flush_inline, loop)
        else:
            self._flushing = loop.create_task(self._flush_loop(), name="group-commit")

    def _timed_flush(self) -> int:
        start = time.perf_counter()
        pos = self._flush()
        elapsed = time.perf_counter() - start
        self.fsync_seconds = elapsed if not self.flush_count else 0.7 * self.fsync_seconds + 0.3 * elapsed
        self.flush_count += 1
        return pos

    def _flush_inline(self, loop: asyncio.AbstractEventLoop) -> None:
        self._inline_scheduled = False
        if not self._waiters or (self._flushing is not None and not self._flushing.done()):
            return
        try:
            pos = self._timed_flush()
        except Exception:
            log.exception("commit log flush failed; retrying in a thread")
            self.fsync_seconds = float("inf")  # a failing disk: keep the loop out of it
            self._flushing = loop.create_task(self._flush_loop(), name="group-commit")
            return
        self._resolve(pos)
        if self._waiters:
            self._kick(loop)

    def _resolve(self, pos: int) -> None:
        self.flushed_position = max(self.flushed_position, pos)
        while self._waiters and self._waiters[0][0] <= self.flushed_position:
            _, _, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(True)
        # drop waiters that already timed out
        if any(w[2].done() for w in self._waiters):
            self._waiters = [w for w in self._waiters if not w[2].done()]
            heapq.heapify(self._waiters)

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        poller = self.idle_poller
        if poller is not None:
            poller.pause()
        try:
            while self._waiters:
                try:
                    pos = await loop.run_in_executor(None, self._timed_flush)
                except Exception:
                    log.exception("commit log flush failed")
                    await asyncio.sleep(0.01)  # back off before retrying a failing disk
                    continue
                self._resolve(pos)
        finally:
            if poller is not None:
                poller.resume()

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
        needed: cheap ``() -> bool`` asked on the loop before each flush; False skips it (and its
            thread hop) when nothing is to be flushed. None: always flush.
    """

    def __init__(
        self, flush: FlushFn, *, interval: float = 0.5, needed: Callable[[], bool] | None = None
    ) -> None:
        self._flush = flush
        self._needed = needed
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
            if self._needed is not None and not self._needed():
                continue
            try:
                await loop.run_in_executor(None, self._flush)
            except Exception:
                log.exception("periodic commit log flush failed")
