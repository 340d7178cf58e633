"""ProcessQueue: messages pulled from one queue but not yet consumed (pure bookkeeping).

Mirrors RocketMQ's ``ProcessQueue``. One per owned ``MessageQueue``; touched on the
ClientInstance's event-loop thread (listener threads hand results back to the loop). Two
exceptions: the blocking lite ``PullConsumer``, whose ``poll()`` does its bookkeeping on the
caller's thread, guards every access with the consumer's lock; a push consumer's queue lane
(``queue_lane.py``) caches what it pulls on its own thread, so :meth:`put_messages`,
:meth:`remove_messages`, :meth:`get_max_span` and :meth:`clear` take :attr:`ProcessQueue.lock`
(RocketMQ's ``treeMapLock``).

Rule 1 (the one that keeps "nothing lost"): the offset a consumer may commit for a queue is
the smallest queue offset still cached here (pulled, not yet acknowledged), or
``queue_offset_max + 1`` once the cache is empty. An offset is never committed past an
unconsumed message, so a restart re-delivers rather than skips.

Flow control (``pull_core.FlowLimits``) reads ``msg_count``, ``msg_size`` (body bytes) and :meth:`get_max_span`.
Timestamps are milliseconds (``now_ms``), passed in so tests need no clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from tidemq.protocol.message import MessageConst, MessageExt

__all__ = [
    "PULL_MAX_IDLE_TIME_MS",
    "REBALANCE_LOCK_MAX_LIVE_TIME_MS",
    "ProcessQueue",
    "now_ms",
]

PULL_MAX_IDLE_TIME_MS = 120_000
"""A queue not pulled for this long is dropped by rebalance (``rocketmq.client.pull.pullMaxIdleTime``)."""

REBALANCE_LOCK_MAX_LIVE_TIME_MS = 30_000
"""Client-side validity of an orderly lock (``rocketmq.client.rebalance.lockMaxLiveTime``)."""


def now_ms() -> int:
    """Wall clock in milliseconds (RocketMQ's ``System.currentTimeMillis()``)."""
    return time.time_ns() // 1_000_000


class ProcessQueue:
    """Cached messages of one queue, ordered by queue offset. Mirrors ``ProcessQueue``.

    Attributes:
        msg_count: number of cached messages (including those taken by an orderly consumer).
        msg_size: total body bytes of the cached messages.
        queue_offset_max: largest queue offset ever cached (-1 before the first put).
        dropped: set when the queue is no longer ours; pulls and consumption stop.
        handing_off: set with ``dropped`` while a clean hand-off drains the queue
            (``handoff.py``): no new pulls or listener calls, but the results of listener calls
            already running are still acknowledged and committed.
        listening: listener calls of this queue started and not yet acknowledged.
        locked: orderly lock held (orderly consumption only).
        last_pull_timestamp / last_consume_timestamp / last_lock_timestamp: milliseconds.
    """

    def __init__(self, now: int | None = None) -> None:
        start = now_ms() if now is None else now
        self._tree: dict[int, MessageExt] = {}  # kept sorted by offset
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not yet committed
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.handing_off = False
        self.listening = 0
        self.locked = False
        self.consuming = False
        self.last_pull_timestamp = start
        self.last_consume_timestamp = start
        self.last_lock_timestamp = start
        self.msg_acc_cnt = 0
        self.try_unlock_times = 0
        self.lock = threading.Lock()
        """Guards the cache against a queue lane's thread (see the module docstring)."""

    # -- listener calls and the hand-off ------------------------------------------------------

    def begin_listen(self) -> bool:
        """Count a listener call about to start; False (nothing counted) when the queue is dropped.

        Any thread. Atomic with :meth:`start_hand_off`, so a hand-off that saw ``listening == 0``
        after it began never misses a call that starts later."""
        with self.lock:
            if self.dropped:
                return False
            self.listening += 1
            return True

    def end_listen(self) -> None:
        """A listener call counted by :meth:`begin_listen` was acknowledged (or given up). Any thread."""
        with self.lock:
            self.listening -= 1

    def start_hand_off(self) -> None:
        """Stop pulls and new listener calls; results of running calls still commit."""
        with self.lock:
            self.dropped = True
            self.handing_off = True

    @property
    def commits_results(self) -> bool:
        """True when a finished listener call may still move the queue's offset: the queue is ours,
        or it is being handed off and this call started before."""
        return not self.dropped or self.handing_off

    # -- concurrent consumption -------------------------------------------------------------

    def put_messages(self, msgs: Iterable[MessageExt]) -> bool:
        """Cache pulled messages (duplicates by offset are ignored). Mirrors ``putMessage``.

        Returns:
            True when an orderly consumer should start a consume task (cache non-empty and no
            task running); concurrent consumers dispatch every batch anyway.
        """
        with self.lock:
            return self._put_messages(msgs)

    def _put_messages(self, msgs: Iterable[MessageExt]) -> bool:
        tree = self._tree
        added = size = 0
        top = self.queue_offset_max
        last: MessageExt | None = None
        resort = False
        for msg in msgs:  # per message: locals only (this runs for every pulled message)
            off = msg.queue_offset
            if off in tree:
                continue
            if off < top and tree:
                resort = True
            tree[off] = msg
            added += 1
            size += len(msg.body)
            if off > top:
                top = off
            last = msg
        self.queue_offset_max = top
        self.msg_size += size
        if resort:
            self._tree = dict(sorted(tree.items()))
        self.msg_count += added
        dispatch = False
        if self._tree and not self.consuming:
            dispatch = True
            self.consuming = True
        if last is not None:
            self._count_behind(last)
        return dispatch

    def _count_behind(self, last: MessageExt) -> None:
        """``msg_acc_cnt``: how far the queue's end on the broker (the ``MAX_OFFSET`` property the
        pull added) is past ``last``, the newest message cached; read without parsing properties."""
        max_offset = last.get_property(MessageConst.PROPERTY_MAX_OFFSET)
        if max_offset and max_offset.isdigit():
            self.msg_acc_cnt = max(0, int(max_offset) - last.queue_offset)

    def remove_messages(self, msgs: Iterable[MessageExt], now: int | None = None) -> int:
        """Forget consumed (or sent-back) messages and return the offset that may be committed.

        Mirrors ``removeMessage``: the smallest offset still cached, ``queue_offset_max + 1``
        when the cache became empty, or -1 when it was already empty.
        """
        with self.lock:
            return self._remove_messages(msgs, now)

    def _remove_messages(self, msgs: Iterable[MessageExt], now: int | None) -> int:
        self.last_consume_timestamp = now_ms() if now is None else now
        if not self._tree:
            return -1
        result = self.queue_offset_max + 1
        for msg in msgs:
            prev = self._tree.pop(msg.queue_offset, None)
            if prev is not None:
                self.msg_count -= 1
                self.msg_size -= len(prev.body)
        if self._tree:
            result = next(iter(self._tree))
        return result

    def pass_through(self, msgs: list[MessageExt], now: int | None = None) -> int:
        """``put_messages(msgs)`` then ``remove_messages(msgs)``, returning what the latter returns:
        for the lite pull consumer, whose ``poll`` consumes messages as it caches them. With
        nothing else cached and ``msgs`` in offset order (its case) the messages are not stored and
        removed one by one."""
        prev = -1
        for msg in msgs:
            if msg.queue_offset <= prev:  # not in offset order (never from a pull): the long way
                prev = -2
                break
            prev = msg.queue_offset
        if self._tree or prev == -2:
            self.put_messages(msgs)
            return self.remove_messages(msgs, now)
        self.last_consume_timestamp = now_ms() if now is None else now
        if not msgs:
            return -1
        self.queue_offset_max = top = max(self.queue_offset_max, prev)
        self._count_behind(msgs[-1])
        return top + 1

    def get_max_span(self) -> int:
        """Largest minus smallest cached offset (0 when empty). Mirrors ``getMaxSpan``."""
        with self.lock:
            if not self._tree:
                return 0
            return next(reversed(self._tree)) - next(iter(self._tree))

    def min_offset(self) -> int | None:
        """Smallest cached (unconsumed) offset, or None."""
        return next(iter(self._tree)) if self._tree else None

    def messages(self) -> list[MessageExt]:
        """The cached messages in offset order (not including ones an orderly consumer took)."""
        return list(self._tree.values())

    def has_temp_message(self) -> bool:
        """True while messages are cached. Mirrors ``hasTempMessage``."""
        return bool(self._tree)

    def clear(self) -> None:
        """Drop all cached messages (queue offset bookkeeping is kept). Mirrors ``clear``."""
        with self.lock:
            self._tree.clear()
            self._consuming.clear()
            self.msg_count = 0
            self.msg_size = 0

    # -- orderly consumption ----------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` of the oldest messages to the consuming set. Mirrors ``takeMessages``."""
        self.last_consume_timestamp = now_ms()
        taken: list[MessageExt] = []
        while self._tree and len(taken) < batch_size:
            off = next(iter(self._tree))
            msg = self._tree.pop(off)
            self._consuming[off] = msg
            taken.append(msg)
        if not taken:
            self.consuming = False
        return taken

    def commit(self) -> int:
        """Acknowledge the consuming set; return last consumed offset + 1, or -1. Mirrors ``commit``."""
        if not self._consuming:
            return -1
        offset = max(self._consuming)
        self.msg_count -= len(self._consuming)
        self.msg_size -= sum(len(m.body) for m in self._consuming.values())
        self._consuming.clear()
        return offset + 1

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Put taken messages back in the cache. Mirrors ``makeMessageToConsumeAgain``."""
        for msg in msgs:
            self._consuming.pop(msg.queue_offset, None)
            self._tree[msg.queue_offset] = msg
        self._tree = dict(sorted(self._tree.items()))

    def rollback(self) -> None:
        """Put the whole consuming set back. Mirrors ``rollback``."""
        self.make_message_to_consume_again(list(self._consuming.values()))

    # -- expiry ------------------------------------------------------------------------------

    def is_pull_expired(self, now: int | None = None) -> bool:
        """Not pulled for ``PULL_MAX_IDLE_TIME_MS``. Mirrors ``isPullExpired``."""
        return (now_ms() if now is None else now) - self.last_pull_timestamp > PULL_MAX_IDLE_TIME_MS

    def is_lock_expired(self, now: int | None = None) -> bool:
        """Orderly lock older than ``REBALANCE_LOCK_MAX_LIVE_TIME_MS``. Mirrors ``isLockExpired``."""
        return (now_ms() if now is None else now) - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME_MS

    def __repr__(self) -> str:
        return (
            f"ProcessQueue(count={self.msg_count}, size={self.msg_size}, max={self.queue_offset_max}, "
            f"span={self.get_max_span()}, dropped={self.dropped})"
        )
