"""One log line per broker per state change for a failing periodic task (offset persistence).

During a broker outage a consumer persists its offsets every ``persist_consumer_offset_interval``
(5 s) for each queue of that broker; logging each failure floods the log (RocketMQ's client does).
:class:`FailureLog` logs the first failure of a broker as a WARNING, counts the following ones
silently and logs one INFO line with the count when the broker answers again.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["FailureLog"]


class FailureLog:
    """Per-key (broker) failure state of one task, logged on state changes only.

    Args:
        logger: where the lines go.
        what: the task in words, e.g. ``"persisting offsets of group G"``.

    Thread-safe. ``failed(key, exc)`` returns whether it logged (the first failure since the last
    success); ``succeeded(key)`` returns the number of failures it ended (0: nothing logged).
    """

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()

    def failed(self, key: str, exc: BaseException | str) -> bool:
        with self._lock:
            count = self._failures.get(key, 0) + 1
            self._failures[key] = count
        if count == 1:
            self.logger.warning(
                "%s on broker %s failed: %s (further failures are counted until it works again)",
                self.what,
                key,
                exc,
            )
        return count == 1

    def succeeded(self, key: str) -> int:
        with self._lock:
            count = self._failures.pop(key, 0)
        if count:
            self.logger.info("%s on broker %s works again after %d failed attempt(s)", self.what, key, count)
        return count

    def failures(self, key: str) -> int:
        """Failures of ``key`` since its last success."""
        with self._lock:
            return self._failures.get(key, 0)
