"""Consume rates a push consumer reports in GET_CONSUMER_RUNNING_INFO's ``statusTable``.

RocketMQ's ``ConsumerStatsManager`` keeps per-topic minute and hour windows; tidemq derives the
same figures from the consume services' running totals (``consumed_ok``, ``consumed_failed``,
``consume_calls``, ``consume_rt_ms``; over every topic of the consumer) each time it is asked:
``consumeOKTPS`` and ``consumeFailedTPS`` over about the last minute, ``consumeRT`` (ms per
listener call) over the same minute, ``consumeFailedMsgs`` over about the last hour.
rocketmq-exporter turns them into ``rocketmq_client_consume_ok_msg_tps`` / ``_fail_msg_tps`` /
``_consume_rt`` / ``_fail_msg_count``.
"""

from __future__ import annotations

import threading
import time
from collections import deque

__all__ = ["ConsumeRates", "Totals"]

MINUTE_S = 60.0
HOUR_S = 3600.0

Totals = tuple[int, int, int, float]
"""``(ok, failed, listener calls, listener ms)`` since the consumer started."""


class ConsumeRates:
    """Samples of ``(monotonic s, Totals)``; figures between now and a past sample.

    Args:
        start: monotonic seconds when the consumer started (the implicit first sample, all 0).
    """

    def __init__(self, start: float | None = None) -> None:
        first = time.monotonic() if start is None else start
        self._samples: deque[tuple[float, Totals]] = deque([(first, (0, 0, 0, 0.0))])
        self._lock = threading.Lock()

    def figures(self, totals: Totals, now: float | None = None) -> dict[str, float | int]:
        """``consumeOKTPS``, ``consumeFailedTPS``, ``consumeRT`` (ms) and ``consumeFailedMsgs``."""
        now = time.monotonic() if now is None else now
        with self._lock:
            samples = self._samples
            while len(samples) > 1 and now - samples[1][0] >= HOUR_S:
                samples.popleft()
            hour = samples[0][1]
            since, minute = next((s for s in samples if now - s[0] <= MINUTE_S), samples[-1])
            if now - samples[-1][0] >= 1.0:
                samples.append((now, totals))
        elapsed = max(now - since, 1.0)
        ok, failed, calls, ms = totals
        d_calls = calls - minute[2]
        return {
            "consumeOKTPS": round((ok - minute[0]) / elapsed, 2),
            "consumeFailedTPS": round((failed - minute[1]) / elapsed, 2),
            "consumeRT": round((ms - minute[3]) / d_calls, 2) if d_calls > 0 else 0.0,
            "consumeFailedMsgs": failed - hour[1],
        }
