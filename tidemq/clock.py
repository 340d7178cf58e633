"""The wall clock as the wire and the store count it."""

from __future__ import annotations

import time

__all__ = ["now_ms"]


def now_ms() -> int:
    """Milliseconds since the Unix epoch (``System.currentTimeMillis()``): what RocketMQ's headers,
    check-points, timers and stored timestamps hold. Wall-clock time, so it can step back."""
    return time.time_ns() // 1_000_000
