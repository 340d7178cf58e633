"""Broker-side queue locks for orderly consumption.

Mirrors RocketMQ's ``RebalanceLockManager`` (``broker/client/rebalance``): a consumer group's
member asks LOCK_BATCH_MQ (41) for the queues it wants to consume in order; a queue is granted when
it is free, expired, or already held by the same client (then renewed). UNLOCK_BATCH_MQ (42)
releases only the caller's locks. Pure state: every method takes ``now_ms`` (or none when time does
not matter); nothing here sleeps or reads the clock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from tidemq.protocol.message import MessageQueue

#: Java's ``rocketmq.broker.rebalance.lockMaxLiveTime`` default, milliseconds.
REBALANCE_LOCK_MAX_LIVE_TIME_MS = 60_000


@dataclass(slots=True)
class LockEntry:
    """Who holds a queue and when they last (re)locked it. Mirrors ``LockEntry``.

    Attributes:
        client_id: the holder's client id (opaque string, e.g. ``"10.0.0.9@1234#DEFAULT"``).
        last_update_timestamp: milliseconds since the epoch of the last lock/renew.
    """

    client_id: str
    last_update_timestamp: int

    def is_expired(self, now_ms: int, max_live_ms: int) -> bool:
        """True when the lock was not renewed for more than ``max_live_ms`` milliseconds."""
        return now_ms - self.last_update_timestamp > max_live_ms

    def is_locked(self, client_id: str, now_ms: int, max_live_ms: int) -> bool:
        """True when ``client_id`` holds this lock and it has not expired."""
        return self.client_id == client_id and not self.is_expired(now_ms, max_live_ms)


class RebalanceLockManager:
    """Per-group table ``MessageQueue -> LockEntry``. Mirrors RocketMQ's ``RebalanceLockManager``.

    Args:
        lock_max_live_time_ms: a lock not renewed for this many milliseconds is free for anyone
            (default 60 000, RocketMQ's ``lockMaxLiveTime``).

    Thread-safe (one internal lock); all times are milliseconds since the epoch passed by the caller.
    """

    def __init__(self, lock_max_live_time_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS) -> None:
        self.lock_max_live_time_ms = lock_max_live_time_ms
        self._table: dict[str, dict[MessageQueue, LockEntry]] = {}
        self._mutex = threading.Lock()

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now_ms: int) -> bool:
        """True when ``client_id`` holds an unexpired lock on ``mq`` in ``group``."""
        with self._mutex:
            entry = self._table.get(group, {}).get(mq)
            return entry is not None and entry.is_locked(client_id, now_ms, self.lock_max_live_time_ms)

    def try_lock(self, group: str, mq: MessageQueue, client_id: str, now_ms: int) -> bool:
        """Lock (or renew) one queue; True when ``client_id`` holds it afterwards."""
        return mq in self.try_lock_batch(group, [mq], client_id, now_ms)

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str, now_ms: int
    ) -> set[MessageQueue]:
        """Lock every queue of ``mqs`` that is free, expired or already ours (renewing ours).

        Returns the set of queues ``client_id`` now holds among ``mqs`` (renewals included), i.e.
        the ``lockOKMQSet`` of the LOCK_BATCH_MQ response. Queues held by another live client are
        left out. Mirrors ``RebalanceLockManager.tryLockBatch``.
        """
        locked: set[MessageQueue] = set()
        with self._mutex:
            table = self._table.setdefault(group, {})
            for mq in mqs:
                entry = table.get(mq)
                if (
                    entry is None
                    or entry.client_id == client_id
                    or entry.is_expired(now_ms, self.lock_max_live_time_ms)
                ):
                    table[mq] = LockEntry(client_id, now_ms)
                    locked.add(mq)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Release the locks on ``mqs`` that ``client_id`` holds; others' locks are untouched.

        Mirrors ``RebalanceLockManager.unlockBatch`` (UNLOCK_BATCH_MQ).
        """
        with self._mutex:
            table = self._table.get(group)
            if table is None:
                return
            for mq in mqs:
                entry = table.get(mq)
                if entry is not None and entry.client_id == client_id:
                    del table[mq]
            if not table:
                del self._table[group]

    def unlock_all(self, group: str, client_id: str) -> None:
        """Release every lock ``client_id`` holds in ``group`` (e.g. when its channel closes)."""
        with self._mutex:
            table = self._table.get(group)
            if table is None:
                return
            for mq in [mq for mq, e in table.items() if e.client_id == client_id]:
                del table[mq]
            if not table:
                del self._table[group]

    def lock_table(self) -> dict[str, dict[MessageQueue, LockEntry]]:
        """A snapshot copy ``group -> {queue: LockEntry}`` for tests and admin tools."""
        with self._mutex:
            return {
                g: {mq: LockEntry(e.client_id, e.last_update_timestamp) for mq, e in t.items()}
                for g, t in self._table.items()
            }
