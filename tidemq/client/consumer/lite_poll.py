"""The poll buffer of a lite pull consumer: pulled batches waiting for ``poll``.

:class:`PollBuffer` holds the batches the pull tasks (``lite_pulls.py``) put, still encoded, and
hands them to ``poll``: on the loop (:meth:`PollBuffer.poll`, the asyncio consumer) or on a blocking
poller's thread (``pull_caller.py``, through :meth:`PollBuffer.consumed`). Taking a batch decodes it
(tag filter, broker name, MIN/MAX_OFFSET) and counts its messages as consumed: the queue's offset
to commit moves past them (the ProcessQueue's minimum). Mirrors ``DefaultLitePullConsumerImpl``'s
``consumeRequestCache`` and the bookkeeping half of its ``poll``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tidemq.client.api import PullResult
from tidemq.client.consumer.consume_cache import ConsumeRequestCache
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_api import process_pull_result
from tidemq.protocol.body import SubscriptionData
from tidemq.protocol.message import MessageExt, MessageQueue

if TYPE_CHECKING:
    from tidemq.client.consumer.pull import AsyncPullConsumer

__all__ = ["PollBuffer", "PulledBatch"]

PulledBatch = tuple[MessageQueue, ProcessQueue, PullResult, "SubscriptionData | None", int, int]
"""A pull answer waiting in the buffer, not decoded yet: ``(queue, its ProcessQueue, the FOUND result
with its raw body, the subscription it was pulled with, records in the body, body bytes)``; its
records and bytes count as cached in the ProcessQueue (flow control) until taken."""


class PollBuffer:
    """Pulled batches of one :class:`~tidemq.client.consumer.pull.AsyncPullConsumer` waiting for
    ``poll`` (module docstring). Reads the consumer's public ``config``, ``offset_store``,
    ``group_name``, ``committer`` and ``pulls.table.lock``.

    Args:
        core: the consumer.

    Attributes:
        cache: the batches, oldest first (``put`` on the loop, taken on any thread).
        trace: the message-trace dispatcher while ``enable_msg_trace`` (polled messages are traced
            as consumed), else None.
    """

    def __init__(self, core: AsyncPullConsumer) -> None:
        self.core = core
        self.cache: ConsumeRequestCache[PulledBatch] = ConsumeRequestCache()
        self.trace: Any = None

    async def poll(self, timeout: float) -> list[MessageExt]:
        """Messages pulled so far, waiting up to ``timeout`` s on the loop; [] on timeout. They count
        as consumed; a due auto-commit runs before returning."""
        committer = self.core.committer
        deadline = time.monotonic() + timeout
        while True:
            item = await self.cache.take(deadline - time.monotonic())
            if item is None:
                await committer.maybe_auto_commit()
                return []
            msgs = self.consumed(item)
            if msgs:
                await committer.maybe_auto_commit()
                return msgs

    def consumed(self, item: PulledBatch, decoded: list[MessageExt] | None = None) -> list[MessageExt]:
        """Decode a taken batch (unless ``decoded`` already) and count its messages as consumed: the
        queue's offset moves past them. [] when its queue was dropped meanwhile or the tag filter
        kept nothing. Any thread."""
        mq, pq, result, sub, count, size = item
        if pq.dropped:
            return []
        msgs = decoded if decoded is not None else process_pull_result(mq, result, sub).msg_found_list
        core = self.core
        with core.pulls.table.lock:
            pq.msg_count -= count
            pq.msg_size -= size
            if pq.dropped or not msgs:
                return []
            offset = pq.pass_through(msgs)
            if offset >= 0:
                core.offset_store.update_offset(mq, offset, False)
        if self.trace is not None:
            from tidemq.client.trace import record_polled

            record_polled(self.trace, core.group_name, msgs)
        return msgs
