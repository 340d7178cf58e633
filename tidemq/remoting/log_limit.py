"""Rate-limited, summarised warnings about misbehaving peers.

One client sending garbage must not fill the disk with log lines (a fuzzer produced 58,332 warnings,
51 MB, in 7.5 minutes before this existed). :class:`PeerLogLimiter` lets the first ``burst``
lines per peer host per ``interval`` through and counts the rest; the next line for that host after
the interval (or :meth:`PeerLogLimiter.flush`) writes one summary: ``N more ... from HOST in the
last 60 s (suppressed: code 34 failures 812, other 77)``. The peer is keyed by host without port,
since a fuzzer opens many connections, and the budget is the host's as a whole: the ``kind`` of a
line (e.g. which request code failed) only splits the summary's count, so a fuzzer hitting every
request code still gets ``burst`` lines and one summary per interval, not that many per code. Text
arguments are clipped to :data:`MAX_ARG_CHARS`, so a 70 KB name in a request costs a line, not 70 KB.

Pure bookkeeping plus ``logging``; the clock is injectable for tests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["MAX_ARG_CHARS", "PeerLogLimiter", "bad_frame_log", "bad_request_log", "clip", "peer_host"]

MAX_PEERS = 4096
"""Most peers tracked at once; beyond that the oldest entries are summarised and dropped."""

MAX_ARG_CHARS = 200
"""Longest text of one argument of a limited line (peer-supplied names, exception messages)."""

MAX_KINDS = 5
"""Kinds named in one summary; the rest are counted as ``other``."""


def clip(value: object, limit: int = MAX_ARG_CHARS) -> str:
    """``str(value)``, cut to ``limit`` characters with ``...(N chars)`` appended when longer.

    For peer-supplied text in log lines (a fuzzed client id of 70,000 characters)."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({len(text)} chars)"


def peer_host(remote_addr: str) -> str:
    """``"10.0.0.5:4711"`` -> ``"10.0.0.5"``, ``"[::1]:4711"`` -> ``"[::1]"``."""
    host, sep, _ = remote_addr.rpartition(":")
    return host if sep else remote_addr


@dataclass(slots=True)
class _Window:
    start: float
    logged: int = 0
    suppressed: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


class PeerLogLimiter:
    """At most ``burst`` log lines per peer host per ``interval`` seconds, then one summary line.

    Args:
        logger: where lines go.
        what: the kind of event, used in the summary (``"bad frames"``).
        burst: lines let through per host per interval (default 5).
        interval: window length in seconds (default 60).
        clock: monotonic seconds (tests may replace it).
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        burst: int = 5,
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.burst = burst
        self.interval = interval
        self.clock = clock
        self._windows: dict[str, _Window] = {}
        self.total_suppressed = 0
        """Lines suppressed since creation (for tests and stats)."""

    def log(
        self, level: int, remote_addr: str, msg: str, *args: object, exc_info: bool = False, kind: str = ""
    ) -> bool:
        """Log ``msg % args`` about ``remote_addr`` unless its host is over budget; True if logged.

        ``exc_info`` adds the current traceback (only to the lines let through). ``kind`` names
        what went wrong (e.g. ``"code 34 failures"``): suppressed lines are counted per kind in the
        host's summary, so one bug cannot hide another, but all kinds share the host's budget.
        ``str`` and exception arguments are clipped to :data:`MAX_ARG_CHARS`."""
        host = peer_host(remote_addr)
        now = self.clock()
        window = self._windows.get(host)
        if window is not None and now - window.start >= self.interval:
            self._summarise(host, window, now)
            window = None
        if window is None:
            if len(self._windows) >= MAX_PEERS:
                self.flush()
            window = self._windows[host] = _Window(now)
        if window.logged < self.burst:
            window.logged += 1
            clipped = tuple(clip(a) if isinstance(a, (str, BaseException)) else a for a in args)
            self.logger.log(level, msg, *clipped, exc_info=exc_info)
            return True
        window.suppressed += 1
        label = kind or "other"
        if label in window.kinds or len(window.kinds) < MAX_KINDS:
            window.kinds[label] = window.kinds.get(label, 0) + 1
        else:
            window.kinds["other"] = window.kinds.get("other", 0) + 1
        self.total_suppressed += 1
        return False

    def warning(self, remote_addr: str, msg: str, *args: object) -> bool:
        """:meth:`log` at WARNING."""
        return self.log(logging.WARNING, remote_addr, msg, *args)

    def flush(self) -> None:
        """Write the pending summaries and forget every window."""
        now = self.clock()
        for host, window in list(self._windows.items()):
            self._summarise(host, window, now)
        self._windows.clear()

    def flush_expired(self) -> None:
        """Write the summaries of windows older than ``interval`` (called periodically)."""
        now = self.clock()
        for host, window in list(self._windows.items()):
            if now - window.start >= self.interval:
                self._summarise(host, window, now)

    def _summarise(self, host: str, window: _Window, now: float) -> None:
        if window.suppressed:
            named = [k for k in window.kinds if k != "other"]
            detail = ", ".join(f"{k} {window.kinds[k]}" for k in named)
            if named and "other" in window.kinds:
                detail += f", other {window.kinds['other']}"
            self.logger.warning(
                "%d more %s from %s in the last %.0f s (suppressed%s)",
                window.suppressed,
                self.what,
                host,
                now - window.start,
                f": {detail}" if detail else "",
            )
        self._windows.pop(host, None)


bad_frame_log = PeerLogLimiter(logging.getLogger("tidemq.remoting.channel"), "bad frames")
"""The limiter of "closing connection from ...: malformed frame" warnings (all channels)."""

bad_request_log = PeerLogLimiter(logging.getLogger("tidemq.remoting.processor"), "bad requests")
"""The limiter of per-request complaints (bad headers, failed processors, unencodable responses)."""
