"""The lite pull consumer's cache of pulled batches. Mirrors ``DefaultLitePullConsumerImpl``'s
``consumeRequestCache`` (a ``BlockingQueue<ConsumeRequest>``).

Batches are put by the pull tasks on the client's event loop and taken by ``poll``: on the loop
(:meth:`ConsumeRequestCache.take`, for the asyncio consumer) or directly on the caller's thread
(:meth:`ConsumeRequestCache.take_blocking`, for the blocking ``PullConsumer``: ``poll()`` returns
from memory without a hop to the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from typing import Generic, TypeVar

__all__ = ["ConsumeRequestCache"]

T = TypeVar("T")


class ConsumeRequestCache(Generic[T]):
    """A FIFO of pulled batches, thread-safe for takers. ``put`` must run on the event loop that
    created the cache (it wakes asyncio takers through an ``asyncio.Event``)."""

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None  # of the asyncio takers
        self._async_takers = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T) -> None:
        """Append ``item`` and wake one taker (loop thread only)."""
        with self._cond:
            self._items.append(item)
            self._cond.notify()
        self._event.set()

    def put_from_thread(self, item: T) -> None:
        """:meth:`put` from any thread (a blocking consumer's own pulls): wakes a blocking taker at
        once, and an asyncio taker through the loop."""
        with self._cond:
            self._items.append(item)
            self._cond.notify()
        if self._async_takers and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._event.set)
            except RuntimeError:  # the loop is closed: shutting down
                pass

    def take_nowait(self) -> T | None:
        """The oldest item, or None when empty (any thread)."""
        with self._cond:
            return self._items.popleft() if self._items else None

    def take_blocking(self, timeout: float) -> T | None:
        """The oldest item, waiting up to ``timeout`` seconds on this thread; None on timeout.
        Must not be called on the event loop's thread (it would block the loop)."""
        with self._cond:
            if not self._items and not self._cond.wait_for(lambda: bool(self._items), max(0.0, timeout)):
                return None
            return self._items.popleft()

    async def take(self, timeout: float) -> T | None:
        """The oldest item, waiting up to ``timeout`` seconds on the loop; None on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            item = self.take_nowait()
            if item is not None:
                return item
            self._event.clear()
            item = self.take_nowait()  # put between the first check and clear()
            if item is not None:
                return item
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._loop = asyncio.get_running_loop()
            self._async_takers += 1
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._event.wait(), remaining)
            finally:
                self._async_takers -= 1
