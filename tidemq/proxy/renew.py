"""Invisible-time renewal for ``auto_renew`` receives (the PushConsumers').

Mirrors RocketMQ 5's ``DefaultReceiptHandleManager``: a PushConsumer receives with ``auto_renew``
and no invisible duration, and may take its time to consume; the proxy keeps each such message
invisible (``default_invisible_ms`` at a time, renewed ``renew_ahead_ms`` before it would expire,
checked every ``renew_interval_ms``) until the client acks it, changes its invisible duration, or
goes away, at most ``renew_max_ms`` (3 h). The client keeps the handle it received; an ack or a
change with it is mapped to the latest handle here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidemq.clock import now_ms
from tidemq.proxy import codes

if TYPE_CHECKING:
    from tidemq.proxy.backend import Backend

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Renewing:
    """One message kept invisible for a client."""

    client: str
    broker_name: str
    group: str
    topic: str
    handle: str
    """The latest receipt handle (the broker's)."""
    visible_at: int
    """When the latest handle expires (ms)."""
    started: int


class HandleRenewer:
    """Keeps ``auto_renew`` messages invisible until acked.

    Args:
        backend: the broker(s) (``change_invisible_time``).
        invisible_ms: each renewal's invisible time (``defaultInvisibleTimeMills``, 60 s).
        renew_ahead_ms: renew this long before expiry (``renewAheadTimeMillis``, 10 s).
        renew_max_ms: stop renewing after this long (``renewMaxTimeMillis``, 3 h).
        renew_interval_ms: how often expiring handles are looked for (1 s).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        invisible_ms: int = 60_000,
        renew_ahead_ms: int = 10_000,
        renew_max_ms: int = 3 * 3600 * 1000,
        renew_interval_ms: int = 1000,
    ) -> None:
        self.backend = backend
        self.invisible_ms = invisible_ms
        self.renew_ahead_ms = renew_ahead_ms
        self.renew_max_ms = renew_max_ms
        self.renew_interval_ms = renew_interval_ms
        self.entries: dict[str, Renewing] = {}
        """Keyed by the handle the client holds (the first one)."""
        self._task: asyncio.Task[None] | None = None

    def add(
        self, client: str, broker_name: str, group: str, topic: str, handle: str, visible_at: int
    ) -> None:
        """Keep the message of ``handle`` invisible for ``client`` (starts the renewal task)."""
        self.entries[handle] = Renewing(client, broker_name, group, topic, handle, visible_at, now_ms())
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="grpc-handle-renewer")

    def take(self, handle: str) -> str:
        """Stop renewing the message the client knows by ``handle``; the handle to ack or change it
        with (the latest one; ``handle`` itself when it is not renewed here)."""
        entry = self.entries.pop(handle, None)
        return handle if entry is None else entry.handle

    def forget_client(self, client: str) -> None:
        """The client went away: its messages become visible when their current handles expire."""
        for key in [k for k, e in self.entries.items() if e.client == client]:
            del self.entries[key]

    async def renew_due(self) -> int:
        """Renew every handle expiring within ``renew_ahead_ms``; returns how many were renewed."""
        now = now_ms()
        renewed = 0
        for key, entry in list(self.entries.items()):
            if entry.visible_at - now > self.renew_ahead_ms:
                continue
            if now - entry.started >= self.renew_max_ms or entry.visible_at <= now:
                self.entries.pop(key, None)  # too old, or already expired: it comes back as it should
                continue
            try:
                handle = await self.backend.change_invisible_time(
                    entry.broker_name, entry.group, entry.topic, entry.handle, self.invisible_ms
                )
            except codes.ProxyError as exc:
                log.info(
                    "cannot renew a receipt handle of %s on %s: %s", entry.group, entry.topic, exc.message
                )
                self.entries.pop(key, None)
                continue
            if key in self.entries:  # not acked meanwhile
                entry.handle, entry.visible_at = handle, now_ms() + self.invisible_ms
                renewed += 1
        return renewed

    async def _run(self) -> None:
        while self.entries:
            await asyncio.sleep(self.renew_interval_ms / 1000)
            try:
                await self.renew_due()
            except Exception:
                log.exception("receipt handle renewal failed")

    async def stop(self) -> None:
        """Stop the renewal task (messages then expire as their handles say)."""
        self.entries.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
