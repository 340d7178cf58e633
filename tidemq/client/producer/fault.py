"""Send-latency fault tolerance: keep producers away from a broker that failed or answered slowly.

Mirrors RocketMQ 4.9's ``MQFaultStrategy`` + ``LatencyFaultToleranceImpl`` (sans-I/O; the clock is
injectable for tests). After every send attempt the producer reports the broker name, the
attempt's latency (ms) and whether it failed (``isolation``: a failure counts as 30,000 ms). With
``send_latency_fault_enable`` the latency is mapped through ``latency_max`` /
``not_available_duration`` (ms) to a period during which the broker is skipped when choosing a
queue::

    latency  >= 50   100   550    1000   2000    3000    15000 ms
    skipped    0     0     30 s   60 s   120 s   180 s   600 s

so a failed broker (30,000 ms) is avoided for 600 s, or until a later attempt on it succeeds
quickly. When every broker is being avoided, the least bad one is used
(``pickOneAtLeast``). Without ``send_latency_fault_enable`` (RocketMQ's default) a retry only
avoids the broker of the previous attempt (``selectOneMessageQueue(lastBrokerName)``).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tidemq.client.route import TopicPublishInfo
from tidemq.protocol.message import MessageQueue

__all__ = [
    "ISOLATION_LATENCY_MS",
    "LATENCY_MAX_MS",
    "NOT_AVAILABLE_DURATION_MS",
    "FaultItem",
    "LatencyFaultTolerance",
    "MQFaultStrategy",
]

LATENCY_MAX_MS: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
"""``MQFaultStrategy.latencyMax``, ms."""
NOT_AVAILABLE_DURATION_MS: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
"""``MQFaultStrategy.notAvailableDuration``, ms (same index as :data:`LATENCY_MAX_MS`)."""
ISOLATION_LATENCY_MS = 30000
"""The latency a failed attempt counts as (``updateFaultItem(..., isolation=true)``)."""


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(slots=True)
class FaultItem:
    """One broker's last report. Mirrors ``LatencyFaultToleranceImpl.FaultItem``.

    Attributes:
        name: broker name.
        current_latency: latency of the last attempt, ms.
        start_timestamp: clock value (ms) from which the broker is available again.
    """

    name: str
    current_latency: int
    start_timestamp: int

    def is_available(self, now: int) -> bool:
        """True once ``now`` reached :attr:`start_timestamp`."""
        return now >= self.start_timestamp


class LatencyFaultTolerance:
    """Brokers to avoid and until when. Mirrors ``LatencyFaultToleranceImpl``.

    Args:
        clock: milliseconds, monotonic (default ``time.monotonic() * 1000``).
        rng: randomness for :meth:`pick_one_at_least` (shuffle before sorting, as Java).
    """

    def __init__(self, clock: Callable[[], int] = _now_ms, rng: random.Random | None = None) -> None:
        self.clock = clock
        self.fault_item_table: dict[str, FaultItem] = {}
        self._rng = rng or random.Random()
        self._which_item_worst = 0
        self._lock = threading.Lock()

    def update_fault_item(self, name: str, current_latency: int, not_available_duration: int) -> None:
        """Record ``name``'s latency (ms); skip it for ``not_available_duration`` ms from now."""
        item = FaultItem(name, current_latency, self.clock() + not_available_duration)
        self.fault_item_table[name] = item

    def is_available(self, name: str) -> bool:
        """True when ``name`` has no report or its not-available period is over."""
        item = self.fault_item_table.get(name)
        return item is None or item.is_available(self.clock())

    def remove(self, name: str) -> None:
        """Forget ``name``."""
        self.fault_item_table.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """A broker to use when all are being avoided: one of the better half (available first, then
        lower latency, then sooner available), rotating. None when nothing was reported.
        Mirrors ``pickOneAtLeast``."""
        items = list(self.fault_item_table.values())
        if not items:
            return None
        now = self.clock()
        self._rng.shuffle(items)
        items.sort(key=lambda it: (not it.is_available(now), it.current_latency, it.start_timestamp))
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        with self._lock:
            self._which_item_worst += 1
            i = self._which_item_worst % half
        return items[i].name


class MQFaultStrategy:
    """Queue choice with latency fault tolerance. Mirrors ``MQFaultStrategy``.

    Args:
        send_latency_fault_enable: avoid slow/failed brokers (False, as RocketMQ).
        latency_max: latency thresholds, ms (:data:`LATENCY_MAX_MS`).
        not_available_duration: matching avoidance periods, ms (:data:`NOT_AVAILABLE_DURATION_MS`).
        tolerance: the table (a fresh :class:`LatencyFaultTolerance` by default).
    """

    def __init__(
        self,
        *,
        send_latency_fault_enable: bool = False,
        latency_max: Sequence[int] = LATENCY_MAX_MS,
        not_available_duration: Sequence[int] = NOT_AVAILABLE_DURATION_MS,
        tolerance: LatencyFaultTolerance | None = None,
    ) -> None:
        if len(latency_max) != len(not_available_duration):
            raise ValueError("latency_max and not_available_duration must have the same length")
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_max = tuple(latency_max)
        self.not_available_duration = tuple(not_available_duration)
        self.tolerance = tolerance or LatencyFaultTolerance()

    def select_one_message_queue(self, info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        """The queue for the next attempt. Mirrors ``selectOneMessageQueue``.

        Raises:
            NoRouteError: ``info`` has no writable queue.
        """
        if not self.send_latency_fault_enable:
            return info.select_one_message_queue(last_broker_name)
        mqs = info.message_queue_list
        n = len(mqs)
        if n:
            tolerance = self.tolerance
            for _ in range(n):
                mq = mqs[info.next_index() % n]
                if tolerance.is_available(mq.broker_name):
                    return mq
            not_best = tolerance.pick_one_at_least()
            if not_best is not None:
                write_queue_nums = info.queue_nums_of_broker(not_best)
                if write_queue_nums > 0:
                    return MessageQueue(info.topic, not_best, info.next_index() % write_queue_nums)
                tolerance.remove(not_best)
        return info.select_one_message_queue()

    def update_fault_item(self, broker_name: str, current_latency_ms: int, isolation: bool) -> None:
        """Report an attempt on ``broker_name``: its latency (ms), ``isolation`` when it failed.
        Mirrors ``updateFaultItem`` (a no-op unless ``send_latency_fault_enable``)."""
        if not self.send_latency_fault_enable:
            return
        latency = ISOLATION_LATENCY_MS if isolation else current_latency_ms
        self.tolerance.update_fault_item(
            broker_name, current_latency_ms, self.compute_not_available_duration(latency)
        )

    def compute_not_available_duration(self, current_latency_ms: int) -> int:
        """The avoidance period (ms) for a latency (ms). Mirrors ``computeNotAvailableDuration``."""
        for limit, duration in zip(
            reversed(self.latency_max), reversed(self.not_available_duration), strict=True
        ):
            if current_latency_ms >= limit:
                return duration
        return 0
