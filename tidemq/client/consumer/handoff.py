"""Clean hand-off of a queue between live members of a consumer group (tidemq; DESIGN.md,
"Rebalance without its hazards").

RocketMQ's client-side rebalance moves a queue with three hazards: the new owner starts from an
offset the old owner committed asynchronously (messages consumed after that commit are consumed
again), the listener calls still running on the old owner are not committed at all, and the queue
pauses until both sides happen to rebalance. tidemq's consumers use the broker's queue locks
(LOCK_BATCH_MQ / UNLOCK_BATCH_MQ, as orderly consumption does) as the hand-off signal:

* a member locks every queue it owns (when it adds it, and every :data:`LOCK_RENEW_INTERVAL_S`,
  since the broker frees a lock not renewed for 60 s);
* when rebalance takes a queue away, the old owner stops pulling it, lets the listener calls
  already running finish (:meth:`QueueHandoff.drain`: bounded; calls not yet started are skipped
  and stay uncommitted), commits the queue's offset synchronously and only then unlocks it;
* the new owner locks the queue before it reads the committed offset, retrying a refused lock
  for up to ``handoff_timeout`` seconds (``Rebalancer.lock_wait``); after that it goes on as
  RocketMQ does (the old owner is hung, or the broker is one that keeps a dead client's lock).

A member that shuts down drains, commits and unlocks all its queues before it unregisters.
Members that never lock (RocketMQ's C++ client, ali-ons, a tidemq consumer with
``clean_handoff=False``) leave their queues unlocked, so a tidemq member taking a queue from them
starts at once, exactly as RocketMQ does; one handing a queue to them still commits before it lets
go. A crash stays at-least-once: the tidemq broker frees a client's locks when its connection
closes, and the new owner starts from the last commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.errors import TideMQError
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.topic import MASTER_ID

if TYPE_CHECKING:
    from tidemq.client.instance import ClientInstance

__all__ = ["LOCK_RENEW_INTERVAL_S", "InstanceLocks", "LockHost", "QueueHandoff"]

log = logging.getLogger(__name__)

LOCK_RENEW_INTERVAL_S = 20.0
"""Seconds between two renewals of every owned queue's lock (RocketMQ's ``lockInterval``)."""

LOCK_TIMEOUT_S = 1.0
"""Timeout of one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ call, seconds."""

DRAIN_POLL_S = 0.002
"""Seconds between two looks at a draining queue's running listener calls."""


class LockHost(Protocol):
    """The lock RPCs of a consumer (``AsyncPushConsumer`` / ``AsyncPullConsumer``)."""

    group_name: str

    async def find_broker_addr_for_lock(self, broker_name: str) -> str | None:
        """Master address of ``broker_name`` (locks live on masters), or None."""
        ...

    async def lock_batch_mq(self, addr: str, mqs: set[MessageQueue], timeout: float) -> set[MessageQueue]:
        """LOCK_BATCH_MQ (41) for this client id; the queues it holds afterwards."""
        ...

    async def unlock_batch_mq(
        self, addr: str, mqs: set[MessageQueue], timeout: float, *, oneway: bool
    ) -> None:
        """UNLOCK_BATCH_MQ (42) for this client id."""
        ...


class InstanceLocks:
    """:class:`LockHost` over a ClientInstance: the lock RPCs of ``client_id`` in ``group``."""

    def __init__(self, instance: ClientInstance, group: str, client_id: str) -> None:
        self.instance = instance
        self.group_name = group
        self.client_id = client_id

    async def find_broker_addr_for_lock(self, broker_name: str) -> str | None:
        """Master address of ``broker_name`` (from the routes, else the name server), or None."""
        addr = self.instance.find_broker_address_in_subscribe(broker_name, MASTER_ID)
        if addr is None:
            try:
                addr = await self.instance.find_broker_addr(broker_name)
            except TideMQError:
                return None
        return addr

    async def lock_batch_mq(self, addr: str, mqs: set[MessageQueue], timeout: float) -> set[MessageQueue]:
        """LOCK_BATCH_MQ (41) for this client id; the queues it holds afterwards."""
        return await self.instance.api.lock_batch_mq(addr, self.group_name, self.client_id, mqs, timeout)

    async def unlock_batch_mq(
        self, addr: str, mqs: set[MessageQueue], timeout: float, *, oneway: bool
    ) -> None:
        """UNLOCK_BATCH_MQ (42) for this client id."""
        await self.instance.api.unlock_batch_mq(
            addr, self.group_name, self.client_id, mqs, timeout, oneway=oneway
        )


class QueueHandoff:
    """The locks and the drain of a clean hand-off for one consumer.

    Args:
        host: the consumer's lock RPCs.
        timeout: seconds the old owner waits for running listener calls, and the new owner for
            the old owner's release (``handoff_timeout``).
    """

    def __init__(self, host: LockHost, timeout: float) -> None:
        self.host = host
        self.timeout = timeout
        self._renewal: asyncio.Task[None] | None = None

    async def lock(self, mq: MessageQueue) -> bool:
        """Try once to lock ``mq``; True when this client holds it (errors count as refused)."""
        return mq in await self.lock_all([mq])

    async def lock_all(self, mqs: Iterable[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ for ``mqs``, one call per broker; the queues this client holds now."""
        held: set[MessageQueue] = set()
        for broker_name, group in _by_broker(mqs).items():
            addr = await self.host.find_broker_addr_for_lock(broker_name)
            if addr is None:
                continue
            try:
                held |= await self.host.lock_batch_mq(addr, group, LOCK_TIMEOUT_S)
            except TideMQError as exc:
                log.debug("lock of %d queue(s) on %s failed: %s", len(group), broker_name, exc)
        return held

    async def unlock_all(self, mqs: Iterable[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ (sync) for ``mqs``, one call per broker; failures are logged (the broker
        frees the locks when this client unregisters, disconnects, or stops renewing them)."""
        for broker_name, group in _by_broker(mqs).items():
            addr = await self.host.find_broker_addr_for_lock(broker_name)
            if addr is None:
                continue
            try:
                await self.host.unlock_batch_mq(addr, group, LOCK_TIMEOUT_S, oneway=False)
            except TideMQError as exc:
                log.warning("unlock of %d queue(s) on %s failed: %s", len(group), broker_name, exc)

    async def drain(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Stop ``pq`` (no pulls, no new listener calls) and wait up to :attr:`timeout` seconds for
        its running listener calls to be acknowledged. True when none is left; afterwards late
        results no longer move the offset."""
        pq.start_hand_off()
        deadline = time.monotonic() + self.timeout
        while pq.listening > 0:  # counted on pool and lane threads: looked at, not awaited
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(DRAIN_POLL_S)
        finished = pq.listening <= 0
        pq.handing_off = False
        if not finished:
            log.warning(
                "%s: %d listener call(s) of %s still running after %gs; their messages stay uncommitted",
                self.host.group_name,
                pq.listening,
                mq,
                self.timeout,
            )
        return finished

    def start_renewal(self, owned: Callable[[], Iterable[MessageQueue]]) -> None:
        """Renew the locks of ``owned()`` every :data:`LOCK_RENEW_INTERVAL_S` seconds (on the loop)."""
        if self._renewal is None:
            self._renewal = asyncio.ensure_future(self._renew(owned))

    async def _renew(self, owned: Callable[[], Iterable[MessageQueue]]) -> None:
        while True:
            await asyncio.sleep(LOCK_RENEW_INTERVAL_S)
            try:
                await self.lock_all(list(owned()))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("renewing the queue locks of %s failed", self.host.group_name)

    async def stop_renewal(self) -> None:
        """Stop the periodic renewal."""
        task, self._renewal = self._renewal, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _by_broker(mqs: Iterable[MessageQueue]) -> dict[str, set[MessageQueue]]:
    groups: dict[str, set[MessageQueue]] = defaultdict(set)
    for mq in mqs:
        groups[mq.broker_name].add(mq)
    return groups
