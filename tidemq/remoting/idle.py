"""Closing idle and stuck connections of a :class:`~tidemq.remoting.server.RemotingServer`.

Mirrors the ``IdleStateHandler`` + ``NettyConnectManageHandler`` pair of RocketMQ's
``NettyRemotingServer`` (``serverChannelMaxIdleTimeSeconds``, 120 s): a connection that has sent
nothing for ``idle_timeout`` seconds is closed. One more case Netty covers by itself: a peer that
sends requests but never reads our responses has its reads paused (backpressure), so we would
never see it go away (a half-open connection); it is aborted once its writes have been blocked for
``idle_timeout`` seconds. Every scan also writes the pending summaries of the rate-limited warnings
(:mod:`tidemq.remoting.log_limit`) and, when the last connection has gone, hands freed memory back
to the OS (``malloc_trim``) so RSS returns to its baseline when clients leave.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tidemq.remoting.log_limit import bad_frame_log, bad_request_log

if TYPE_CHECKING:
    from tidemq.remoting.channel import Channel

__all__ = ["IdleChannelReaper", "release_free_memory"]

log = logging.getLogger(__name__)

_trim: list[Any] = []
"""``[malloc_trim or None]`` once looked up. Looked up on first use, not at import: every process
that imports tidemq.remoting (clients, each Spark query's source runner) would otherwise run
``ctypes.util.find_library("c")``, which starts ``/sbin/ldconfig -p``."""


def _malloc_trim() -> Any:
    if not _trim:
        trim = None
        with contextlib.suppress(Exception):
            import ctypes
            import ctypes.util

            name = ctypes.util.find_library("c")
            trim = getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
        _trim.append(trim)
    return _trim[0]


def release_free_memory() -> None:
    """Collect garbage and return free heap pages to the OS (glibc ``malloc_trim(0)``; no-op elsewhere)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        with contextlib.suppress(Exception):
            trim(0)


class IdleChannelReaper:
    """Periodically closes idle or write-blocked channels.

    Args:
        channels: returns the channels to check (the server's open connections).
        idle_timeout: seconds without incoming data (or with writes blocked) before a close.
        interval: seconds between scans (default ``min(idle_timeout / 4, 5)``).
        clock: the event loop's clock (``loop.time``), the same one channels stamp reads with.
    """

    def __init__(
        self,
        channels: Callable[[], Iterable[Channel]],
        idle_timeout: float,
        *,
        interval: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.channels = channels
        self.idle_timeout = idle_timeout
        self.interval = interval if interval is not None else max(0.05, min(idle_timeout / 4, 5.0))
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._had_channels = False
        self.closed_idle = 0
        """Channels closed for being idle or stuck (for tests and stats)."""

    def start(self) -> None:
        """Start scanning on the running loop."""
        loop = asyncio.get_running_loop()
        if self._clock is None:
            self._clock = loop.time
        if self._task is None:
            self._task = loop.create_task(self._run(), name="idle-channel-reaper")

    async def stop(self) -> None:
        """Stop scanning."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.scan()
            except Exception:  # pragma: no cover - never let the reaper die
                log.exception("idle channel scan failed")

    def scan(self) -> int:
        """Close every channel idle (or write-blocked) for ``idle_timeout``; return how many."""
        assert self._clock is not None
        now = self._clock()
        closed = 0
        channels = list(self.channels())
        for channel in channels:
            blocked_since = channel.attrs.get("write_blocked_since")
            if channel.write_paused:
                if blocked_since is None:
                    channel.attrs["write_blocked_since"] = now
                elif now - blocked_since >= self.idle_timeout:
                    log.info(
                        "closing %s: not reading our responses for %.0f s",
                        channel.remote_addr,
                        now - blocked_since,
                    )
                    channel.abort()
                    closed += 1
                    continue
            elif blocked_since is not None:
                del channel.attrs["write_blocked_since"]
            if now - channel.last_read_time >= self.idle_timeout:
                log.info("closing %s: idle for %.0f s", channel.remote_addr, now - channel.last_read_time)
                if channel.write_paused:
                    channel.abort()
                else:
                    channel.close("idle")
                closed += 1
        self.closed_idle += closed
        bad_frame_log.flush_expired()
        bad_request_log.flush_expired()
        if channels:
            self._had_channels = True
        elif self._had_channels:
            self._had_channels = False
            release_free_memory()
        return closed
