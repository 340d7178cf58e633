"""Disk space of the store: df's ratio, and the guard that refuses writes on a full disk.

:func:`disk_usage` computes used space as ``df`` does (``used = f_blocks - f_bfree``,
``ratio = used / (used + f_bavail)``), so blocks the file system keeps back for root count neither
as used nor as available. (The old ``(f_blocks - f_bavail) / f_blocks`` counted them as used: 0.70
where ``df`` said 27% on an ext4 with reserved blocks.)

:class:`DiskSpaceGuard` is RocketMQ's ``RunningFlags`` disk-full bit as ``CleanCommitLogService``
sets it: above ``disk_space_warning_level_ratio`` percent the store refuses puts with
:attr:`~tidemq.store.results.PutMessageStatus.DISK_FULL` until the ratio is at or below it again.
The put path asks :meth:`DiskSpaceGuard.poll` on every put; it re-reads ``statvfs`` at most every
:data:`CHECK_INTERVAL_S` seconds or :data:`CHECK_BYTES` bytes written, whichever comes first. An
``ENOSPC`` from a write (the disk filled between two checks, or by another process) makes it full
at once. Each change of state is one WARNING line with figures; a refused put logs nothing.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 0.1
"""Seconds between two ``statvfs`` calls of :meth:`DiskSpaceGuard.poll` (at most)."""
CHECK_BYTES = 1 << 20
"""Bytes written to the commit log between two ``statvfs`` calls (at most)."""
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""An ``OSError`` with one of these is a full disk (an expected condition: no traceback)."""


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """One ``statvfs`` of the store's file system, in bytes, with df's definitions.

    Attributes:
        path: the path asked.
        total: ``f_blocks * f_frsize`` (df's "1K-blocks" column, in bytes).
        used: ``(f_blocks - f_bfree) * f_frsize`` (df's "Used").
        available: ``f_bavail * f_frsize`` (df's "Available": what a non-root writer can still use).
    """

    path: str
    total: int
    used: int
    available: int

    @property
    def ratio(self) -> float:
        """``used / (used + available)``, 0.0..1.0 (df's "Use%" before its rounding up); 0.0 when empty."""
        room = self.used + self.available
        return self.used / room if room > 0 else 0.0

    @property
    def percent(self) -> float:
        """:attr:`ratio` in percent."""
        return 100.0 * self.ratio

    def percent_after(self, extra: int) -> float:
        """The percent used once ``extra`` more bytes are written (a warm segment, say)."""
        room = self.used + self.available
        return 100.0 * (self.used + extra) / room if room > 0 else 100.0


def existing_dir(path: str | Path) -> str:
    """``path`` or its nearest existing parent (statvfs needs an existing path)."""
    p = Path(path)
    while not p.exists() and p.parent != p:
        p = p.parent
    return str(p)


def disk_usage(path: str | Path) -> DiskUsage:
    """df's figures for the file system holding ``path`` (or its nearest existing parent).

    Raises:
        OSError: ``statvfs`` failed.
    """
    where = existing_dir(path)
    st = os.statvfs(where)
    frsize = st.f_frsize or st.f_bsize
    return DiskUsage(
        where,
        st.f_blocks * frsize,
        max(0, st.f_blocks - st.f_bfree) * frsize,
        st.f_bavail * frsize,
    )


def disk_util_text(percent: float) -> str:
    """RocketMQ's ``diskUtil()`` text for the remark of a refused send: ``CL:  0.93 CQ:  0.93
    INDEX:  0.93`` (one file system holds all three here)."""
    r = percent / 100.0
    return f"CL: {r:5.2f} CQ: {r:5.2f} INDEX: {r:5.2f}"


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


class DiskSpaceGuard:
    """Whether the store takes writes: RocketMQ's disk-full running flag.

    Args:
        path: the commit-log directory (its file system is the one watched).
        warning_ratio: ``disk_space_warning_level_ratio``, percent: full above it, writable again at
            or below it; a callable is read at each check (the store passes its config's value, so
            ``updateBrokerConfig`` takes effect at once).
        min_free_bytes: also full while fewer bytes than this are available (one largest message
            must always fit; matters on small file systems).
        usage: how to measure (tests pass a fake); default :func:`disk_usage`.

    Attributes:
        full: True while puts are refused.
        refused: puts refused since the disk became full (reset when it becomes writable).
        full_count: times the disk became full since start.
        listeners: called with the new ``full`` value on each change of state (from the putting or
            checking thread; keep them short and thread-safe).
    """

    def __init__(
        self,
        path: str | Path,
        warning_ratio: float | Callable[[], float],
        *,
        min_free_bytes: int = 0,
        usage: Callable[[str | Path], DiskUsage] = disk_usage,
    ) -> None:
        self.path = path
        self._warning_ratio = warning_ratio
        self.min_free_bytes = min_free_bytes
        self._usage = usage
        self.full = False
        self.refused = 0
        self.full_count = 0
        self.last: DiskUsage | None = None
        self.listeners: list[Callable[[bool], None]] = []
        self._next_time = 0.0
        self._next_offset = 0
        self._since = 0.0
        self._lock = threading.Lock()

    @property
    def warning_ratio(self) -> float:
        """The level in percent (``disk_space_warning_level_ratio``)."""
        level = self._warning_ratio
        return float(level() if callable(level) else level)

    def poll(self, written_offset: int) -> bool:
        """The put path's question: True when the put must be refused (counted in :attr:`refused`).

        ``written_offset`` is the commit log's max offset: a new ``statvfs`` is read once
        :data:`CHECK_BYTES` were written since the last one, or :data:`CHECK_INTERVAL_S` passed.
        """
        if written_offset >= self._next_offset or time.monotonic() >= self._next_time:
            self.check(written_offset)
        if self.full:
            self.refused += 1
            return True
        return False

    def check(self, written_offset: int = 0) -> DiskUsage | None:
        """Read ``statvfs`` now and update :attr:`full`; the usage read (None if statvfs failed)."""
        self._next_time = time.monotonic() + CHECK_INTERVAL_S
        self._next_offset = written_offset + CHECK_BYTES
        try:
            usage = self._usage(self.path)
        except OSError as exc:
            log.debug("statvfs of %s failed: %s", self.path, exc)
            return None
        self.last = usage
        full = usage.percent > self.warning_ratio or usage.available < self.min_free_bytes
        if full != self.full:
            self._change(full, usage, None)
        return usage

    def no_space(self, exc: OSError) -> None:
        """A write failed with ``ENOSPC`` / ``EDQUOT``: full now (the next check may clear it)."""
        if not self.full:
            self._change(True, self.last, exc)
        self._next_time = time.monotonic() + CHECK_INTERVAL_S

    def _change(self, full: bool, usage: DiskUsage | None, exc: OSError | None) -> None:
        with self._lock:
            if full == self.full:
                return
            self.full = full
            now = time.monotonic()
            figures = (
                f"{usage.percent:.1f}% used ({_mib(usage.used)} used, {_mib(usage.available)} available)"
                if usage is not None
                else "usage unknown"
            )
            where = usage.path if usage is not None else str(self.path)
            if full:
                self.full_count += 1
                self.refused = 0
                self._since = now
                cause = (
                    f"and a write failed ({exc.strerror})"
                    if exc is not None
                    else f"above diskSpaceWarningLevelRatio {self.warning_ratio:g}%"
                    if usage is not None and usage.percent > self.warning_ratio
                    else f"under {_mib(self.min_free_bytes)} available"
                )
                log.warning(
                    "disk full: the file system of %s is %s, %s: puts are refused (SERVICE_NOT_AVAILABLE) "
                    "until it is at or below diskSpaceWarningLevelRatio %g%%; reads and offset commits "
                    "go on, no message is deleted for space",
                    where,
                    figures,
                    cause,
                    self.warning_ratio,
                )
            else:
                log.warning(
                    "disk writable again: the file system of %s is %s, at or below "
                    "diskSpaceWarningLevelRatio %g%%; %d put(s) were refused in %.1f s of full disk",
                    where,
                    figures,
                    self.warning_ratio,
                    self.refused,
                    now - self._since,
                )
        for listener in list(self.listeners):
            try:
                listener(full)
            except Exception:
                log.exception("disk state listener failed")
