"""Offset commits of a lite pull consumer: ``commit_sync`` and auto-commit.

:class:`LiteCommitter` sends the consumed offsets of the owned queues whose offset changed since
their last commit (``PullTable.committed``), one UPDATE_CONSUMER_OFFSET each, all at once (to the
group's master, or a slave while the master is gone). Auto-commit runs ``auto_commit_interval``
seconds after the previous commit, from ``poll`` (on the loop, or handed to the loop by a blocking
poller, see ``pull_caller.py``). Mirrors ``DefaultLitePullConsumerImpl.commitSync`` and its
auto-commit in ``poll``.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from tidemq.client.consumer.offset_store import RemoteBrokerOffsetStore
from tidemq.protocol.message import MessageQueue

if TYPE_CHECKING:
    from tidemq.client.consumer.pull import AsyncPullConsumer

__all__ = ["LiteCommitter"]


class LiteCommitter:
    """The commits of one :class:`~tidemq.client.consumer.pull.AsyncPullConsumer` (module docstring).
    Reads the consumer's public ``config``, ``running``, ``rebalancer`` and
    ``pulls.table``.

    Args:
        core: the consumer.

    Attributes:
        store: the consumer's offset store, from its ``start`` on (None before: nothing to commit).
        last_commit: ``time.monotonic()`` of the last commit (auto-commit runs
            ``auto_commit_interval`` after).
    """

    def __init__(self, core: AsyncPullConsumer) -> None:
        self.core = core
        self.last_commit = time.monotonic()
        self.store: RemoteBrokerOffsetStore | None = None
        self._background: set[asyncio.Task[None]] = set()

    async def commit_sync(self) -> None:
        """Send the consumed offsets that changed since the last commit (nothing when none did)."""
        self.last_commit = time.monotonic()
        changed = self.changed_offsets()
        if changed:
            await self.commit_many(changed)

    def changed_offsets(self) -> list[tuple[MessageQueue, int]]:
        """``(queue, offset)`` of the owned queues whose offset changed since the last commit; any
        thread."""
        core, store = self.core, self.store
        if store is None:
            return []
        table = core.pulls.table
        with table.lock:
            owned = core.rebalancer.process_queue_table
            committed = table.committed
            changed = [(mq, off) for mq, off in store.offset_table.items() if committed.get(mq) != off]
            return sorted(item for item in changed if item[0] in owned) if changed else []

    async def commit_many(self, changed: list[tuple[MessageQueue, int]]) -> None:
        """UPDATE_CONSUMER_OFFSET (sync) of each ``(queue, offset)``, all at once; failures are
        logged and left to the next commit."""
        await asyncio.gather(*(self._commit_one(mq, off) for mq, off in changed))

    async def _commit_one(self, mq: MessageQueue, offset: int) -> None:
        assert self.store is not None
        if await self.store.update_consume_offset_to_broker(mq, offset, oneway=False):
            table = self.core.pulls.table
            with table.lock:
                table.committed[mq] = offset

    async def maybe_auto_commit(self) -> None:
        """On the loop: :meth:`commit_sync` when auto-commit is on and due."""
        cfg = self.core.config
        if cfg.auto_commit and time.monotonic() - self.last_commit >= cfg.auto_commit_interval:
            await self.commit_sync()

    def take_auto_commit(self) -> bool:
        """True when an auto-commit is due (the clock then restarts); any thread."""
        cfg = self.core.config
        if not (self.core.running and cfg.auto_commit):
            return False
        if time.monotonic() - self.last_commit < cfg.auto_commit_interval:
            return False
        self.last_commit = time.monotonic()
        return True

    def spawn_commit(self) -> None:
        """On the loop: run :meth:`commit_sync` in the background (awaited by :meth:`shutdown`)."""
        if self.core.running:
            task = asyncio.ensure_future(self.commit_sync())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def shutdown(self) -> None:
        """Wait for the background commits to end."""
        await asyncio.gather(*self._background, return_exceptions=True)
