"""Consume rates a push consumer reports in GET_CONSUMER_RUNNING_INFO's ``statusTable``.

RocketMQ's ``ConsumerStatsManager`` keeps per-topic minute and hour windows; tidemq derives the
same figures from the consume services' running totals (``consumed_ok`` / ``consumed_failed``,
over every topic of the consumer) each time it is asked: ``consumeOKTPS`` and ``consumeFailedTPS``
over about the last minute, ``consumeFailedMsgs`` over about the last hour. rocketmq-exporter turns
them into ``rocketmq_client_consume_ok_msg_tps`` / ``_fail_msg_tps`` / ``_fail_msg_count``.
"""

from __future__ import annotations

import threading
import time
from collections import deque

__all__ = ["ConsumeRates"]

MINUTE_S = 60.0
HOUR_S = 3600.0


class ConsumeRates:
    """Samples of ``(monotonic s, ok total, failed total)``; rates between now and a past sample.

    Args:
        start: monotonic seconds when the consumer started (the implicit first sample, totals 0).
    """

    def __init__(self, start: float | None = None) -> None:
        self._samples: deque[tuple[float, int, int]] = deque(
            [(time.monotonic() if start is None else start, 0, 0)]
        )
        self._lock = threading.Lock()

    def figures(self, ok: int, failed: int, now: float | None = None) -> tuple[float, float, int]:
        """``(ok per s, failed per s, failed in the last hour)`` given the current totals."""
        now = time.monotonic() if now is None else now
        with self._lock:
            samples = self._samples
            while len(samples) > 1 and now - samples[1][0] >= HOUR_S:
                samples.popleft()
            hour_base = samples[0]
            minute_base = next((s for s in samples if now - s[0] <= MINUTE_S), samples[-1])
            if now - samples[-1][0] >= 1.0:
                samples.append((now, ok, failed))
        elapsed = max(now - minute_base[0], 1.0)
        return (ok - minute_base[1]) / elapsed, (failed - minute_base[2]) / elapsed, failed - hour_base[2]
