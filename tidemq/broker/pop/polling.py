"""Long polling for pops: an empty pop waits until a message may be there for it.

Mirrors the role of RocketMQ 5's ``PopLongPollingService`` (the broker's ``PollingHeader`` queue
per topic, ``popPollingSize``). A waiting pop registers under the topics it reads (the topic and
its pop retry topic) and is woken by :meth:`PopLongPolling.notify` when a message arrives on one of
them (the store's arrival listener), when a revive re-puts messages into the retry topic (an
arrival too) or when an order (FIFO) batch's invisible time ends. No sleeping loop: each waiter is
a future with its own deadline; the pop is simply run again when it wakes.
"""

from __future__ import annotations

import asyncio
import contextlib


class PollingFullError(Exception):
    """More than ``max_per_topic`` pops are already waiting on a topic (POLLING_FULL)."""


class PopLongPolling:
    """Waiting pops keyed by topic.

    Args:
        max_per_topic: waiters allowed per topic (``popPollingSize``, 1024).

    Must be used on one event loop (the broker's).
    """

    def __init__(self, max_per_topic: int = 1024) -> None:
        self.max_per_topic = max_per_topic
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}

    @property
    def waiting(self) -> int:
        """Number of pops waiting (a pop on two topics counts twice)."""
        return sum(len(v) for v in self._waiters.values())

    async def wait(self, topics: list[str], timeout_s: float) -> bool:
        """Wait until :meth:`notify` names one of ``topics`` or ``timeout_s`` passes.

        Returns True when notified, False on timeout.

        Raises:
            PollingFullError: a topic already has ``max_per_topic`` waiters.
        """
        for topic in topics:
            if len(self._waiters.get(topic, ())) >= self.max_per_topic:
                raise PollingFullError(f"the pop polling queue of {topic} is full ({self.max_per_topic})")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for topic in topics:
            self._waiters.setdefault(topic, set()).add(fut)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return fut.done()
        finally:
            for topic in topics:
                waiters = self._waiters.get(topic)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[topic]
            if not fut.done():
                fut.cancel()

    def notify(self, topic: str) -> None:
        """Wake every pop waiting on ``topic``."""
        waiters = self._waiters.pop(topic, None)
        if not waiters:
            return
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def wake_all(self) -> None:
        """Wake every waiting pop (shutdown)."""
        for topic in list(self._waiters):
            self.notify(topic)
