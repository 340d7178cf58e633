"""Polling instead of sleeping for a short while after each read: ``IdlePoller``.

A server that answers a request and goes straight back to ``epoll_wait`` puts its CPU to sleep. The
next request then has to wake that CPU, and on a virtual machine this is slow: the sender's system
call makes the hypervisor deliver an interrupt to a halted virtual CPU. On the 2-vCPU VM tidemq is
benchmarked on (``haltpoll`` with ``guest_halt_poll_ns=0``, nested virtualisation), a loopback
round trip between two idle processes takes 120-150 µs at the median, against 22-27 µs when both
CPUs are kept awake. A producer pays this on every send and a push consumer on every pull.

``IdlePoller`` keeps the event loop polling its sockets (zero-timeout polls, with a
``sched_yield`` between them so any other runnable thread on that CPU goes first) for ``window_us``
after the last read, then lets it sleep as usual. A request that arrives within the window is read
at once and its sender's ``send`` does not have to wake a sleeping CPU. This is the idle polling of
Seastar's reactor (ScyllaDB, Redpanda: ``--idle-poll-time-us``, 200 µs by default) and of Linux's
``net.core.busy_poll``, done at the level of the event loop.

It polls only while most reads come within the window of the one before (see :class:`IdlePoller`):
then the wait is short and the poll likely to catch the next request. Cost: while it polls, up to
one CPU core (the broker used most of one in that regime already); nothing while the server is
idle or its requests come further apart. A broker that shares its process (and GIL) with clients
must not poll, so :class:`~tidemq.broker.config.BrokerConfig` leaves it off (``idle_poll_us = 0``)
and the ``tidemq serve`` / ``tidemq broker`` commands, which own their process, turn it on
(``--idle-poll-us``, default :data:`SERVE_IDLE_POLL_US`).
"""

from __future__ import annotations

import asyncio
import os
import time

__all__ = ["SERVE_IDLE_POLL_US", "IdlePoller"]

SERVE_IDLE_POLL_US = 500
"""The window (µs) ``tidemq serve`` and ``tidemq broker`` poll for after each read, unless told
otherwise: a little more than the gap between requests of one client sending 2,000 messages a
second, once the broker has spent its ~250 µs on each."""

POLL_WHEN_HIT = 0.75
"""Poll while at least this share of recent reads came within the window of the read before."""

_monotonic = time.monotonic
_sched_yield = getattr(os, "sched_yield", None)


class IdlePoller:
    """Keeps ``loop`` polling, not sleeping, for ``window_us`` µs after each :meth:`touch`, while
    most reads come within ``window_us`` of the one before.

    Polling pays only if the next read is likely to come within the window. The poller keeps a
    moving average (weight 1/8) of how often a read came within ``window_us`` of the previous one
    and polls only while that share is at least :data:`POLL_WHEN_HIT`: a client sending 2,000
    messages a second (a send and a pull every 500 µs), or one-at-a-time sends back to back, get
    it; one sending every 1 or 2 ms, whose send comes long after the pull before it, does not
    (polling there cost half a core or more and its consumer 0.05 to 0.2 ms on the test VM). After
    an idle spell, 12 reads in quick succession (11 short gaps) start it again.

    Args:
        window_us: how long to keep polling after the last :meth:`touch` (µs, > 0).
        loop: the event loop (default: the running one). Any asyncio loop works (uvloop too): a
            callback scheduled with ``call_soon`` makes the loop poll with a zero timeout.

    Attributes:
        polls: zero-timeout loop iterations made so far (for tests and profiling).

    Raises:
        ValueError: ``window_us`` is not positive.
        RuntimeError: no ``loop`` given and none is running.
    """

    def __init__(self, window_us: int, loop: asyncio.AbstractEventLoop | None = None) -> None:
        if window_us <= 0:
            raise ValueError(f"idle poll window must be > 0 µs, got {window_us}")
        self.window_us = window_us
        self._window_s = window_us / 1_000_000
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._last = 0.0
        self._hits = 0.0
        self._polling = False
        self._closed = False
        self._paused = 0
        self.polls = 0

    @property
    def polling(self) -> bool:
        """True while the loop is kept polling."""
        return self._polling

    @property
    def hit_ratio(self) -> float:
        """The moving average share of reads that came within ``window_us`` of the one before."""
        return self._hits

    @property
    def paused(self) -> bool:
        """True between :meth:`pause` and its :meth:`resume`."""
        return self._paused > 0

    def touch(self) -> None:
        """Note a read now: while reads are dense enough, the loop keeps polling until ``window_us``
        after the latest touch. Call it on the loop's thread (from ``data_received``)."""
        now = _monotonic()
        hit = 1.0 if now - self._last <= self._window_s else 0.0
        self._last = now
        self._hits += (hit - self._hits) * 0.125
        if self._hits >= POLL_WHEN_HIT and not self._polling and not self._closed and not self._paused:
            self._polling = True
            self._loop.call_soon(self._poll)

    def pause(self) -> None:
        """Stop polling until the matching :meth:`resume` (calls nest). For while the loop waits on
        another thread of the process: that thread needs the GIL back when its system call returns,
        and a polling loop, which gives it up only inside its short system calls, can delay it by up
        to the interpreter's switch interval (5 ms). The SYNC_FLUSH group commit pauses polling
        while its fsync runs in a thread."""
        self._paused += 1

    def resume(self) -> None:
        """Undo one :meth:`pause`; polling starts again at the next read."""
        self._paused = max(0, self._paused - 1)

    def close(self) -> None:
        """Stop polling (at the loop's next iteration) and ignore later touches."""
        self._closed = True

    def _poll(self) -> None:
        if self._closed or self._paused or _monotonic() - self._last >= self._window_s:
            self._polling = False
            return
        self.polls += 1
        if _sched_yield is not None:
            _sched_yield()  # releases the GIL too: the process's other threads get their turn
        self._loop.call_soon(self._poll)
