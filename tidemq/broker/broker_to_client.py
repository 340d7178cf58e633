"""Requests the broker sends to its clients. Mirrors RocketMQ's ``Broker2Client``.

Only NOTIFY_CONSUMER_IDS_CHANGED (40, oneway, header ``consumerGroup``) is needed for rebalancing;
a dead channel never raises into the caller (it is logged and skipped).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.broker.consumer_manager import ClientChannel

log = logging.getLogger(__name__)


class Broker2Client:
    """Broker-initiated requests to client channels. Mirrors ``Broker2Client``.

    Args:
        broker: the owning ``Broker`` (its ``loop`` is used to schedule notifications from
            synchronous code); may be None in tests, then the running loop is used.
    """

    def __init__(self, broker: Broker | None = None) -> None:
        self.broker = broker
        self._tasks: set[asyncio.Task[None]] = set()

    async def notify_consumer_ids_changed(self, channel: ClientChannel, group: str) -> None:
        """Send NOTIFY_CONSUMER_IDS_CHANGED (40) oneway to ``channel``; never raises.

        The client then rebalances ``group`` at once instead of waiting for its 10-20 s timer.
        """
        if not group:
            log.error("notify_consumer_ids_changed: empty consumer group")
            return
        if not channel.is_active:
            return
        request = RemotingCommand.create_request(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, b"", oneway=True
        )
        try:
            await channel.invoke_oneway(request)
        except Exception as exc:  # dead or closing channel: the close event cleans up
            log.warning(
                "notify consumer ids changed of group %s to %s failed: %s",
                group,
                channel.remote_addr,
                exc,
            )

    def notify_consumer_ids_changed_soon(self, channel: ClientChannel, group: str) -> None:
        """Schedule ``notify_consumer_ids_changed`` without waiting; callable from any thread.

        On the broker's loop thread a task is created; from another thread it is handed over with
        ``call_soon_threadsafe``. Without any loop it is dropped with a log line.
        """
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        target = self._loop() or running
        if target is None:
            log.warning("no event loop to notify %s of group %s", channel.remote_addr, group)
            return
        if running is target:
            self._spawn(channel, group)
        elif not target.is_closed():
            target.call_soon_threadsafe(self._spawn, channel, group)

    def _loop(self) -> asyncio.AbstractEventLoop | None:
        loop = getattr(self.broker, "loop", None) if self.broker is not None else None
        return loop if isinstance(loop, asyncio.AbstractEventLoop) else None

    def _spawn(self, channel: ClientChannel, group: str) -> None:
        task = asyncio.get_running_loop().create_task(self.notify_consumer_ids_changed(channel, group))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
