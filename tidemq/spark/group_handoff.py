"""Hand-off of a consumer group's committed offsets between streaming queries (issue 29's clean
hand-off, Spark side).

A query's :class:`~tidemq.spark.listener.OffsetCommitter` writes each batch's end offsets to the
group from Spark's listener bus, which runs behind the query: ``query.stop()`` returns before the
last batch's offsets are written, and a query started right after with ``startingOffsets=group``
would read the offsets of the batch before (and read that batch again). So the committer holds the
broker's queue locks of the group (LOCK_BATCH_MQ, as a tidemq consumer owning the queues does)
from its first commit of a query until it has written that query's last one, and a source
resolving ``startingOffsets=group`` first waits for those locks to be free (bounded: after
:data:`GROUP_RELEASE_WAIT_S` it reads the offsets as they are, as before). A tidemq consumer of
the group waits for the same release before it starts where Spark stopped.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tidemq.errors import TideMQError
from tidemq.protocol.message import MessageQueue

if TYPE_CHECKING:
    from tidemq.admin.client import AdminClient

__all__ = ["GROUP_RELEASE_WAIT_S", "lock_queues", "unlock_queues", "wait_group_released"]

log = logging.getLogger(__name__)

GROUP_RELEASE_WAIT_S = 5.0
"""Seconds ``startingOffsets=group`` waits for a stopped query's committer to write its last offsets."""

LOCK_TIMEOUT_S = 1.0
"""Timeout of one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ call, seconds."""


def client_id(role: str) -> str:
    """A client id for the lock table: ``host@spark-<role>-<pid>-<time>`` (unique per caller)."""
    return f"{socket.gethostname()}@spark-{role}-{os.getpid()}-{time.monotonic_ns()}"


def lock_queues(admin: AdminClient, group: str, cid: str, mqs: Iterable[MessageQueue]) -> set[MessageQueue]:
    """LOCK_BATCH_MQ for ``mqs`` of ``group`` as ``cid``, one call per broker: the queues ``cid``
    holds now (a broker that cannot be reached counts as refused)."""
    core = admin.core

    async def run() -> set[MessageQueue]:
        held: set[MessageQueue] = set()
        for broker_name, queues in _by_broker(mqs).items():
            try:
                addr = await core.broker_addr(broker_name)
                held |= await core.api.lock_batch_mq(addr, group, cid, queues, LOCK_TIMEOUT_S)
            except TideMQError as exc:
                log.debug("lock of %d queue(s) of %s on %s failed: %s", len(queues), group, broker_name, exc)
        return held

    return admin.loop_thread.run(run(), LOCK_TIMEOUT_S * 10)


def unlock_queues(admin: AdminClient, group: str, cid: str, mqs: Iterable[MessageQueue]) -> None:
    """UNLOCK_BATCH_MQ (sync) for ``mqs`` of ``group`` held by ``cid``; failures are logged (the
    broker frees a lock not renewed within 60 s)."""
    core = admin.core

    async def run() -> None:
        for broker_name, queues in _by_broker(mqs).items():
            try:
                addr = await core.broker_addr(broker_name)
                await core.api.unlock_batch_mq(addr, group, cid, queues, LOCK_TIMEOUT_S)
            except TideMQError as exc:
                log.warning(
                    "unlock of %d queue(s) of %s on %s failed: %s", len(queues), group, broker_name, exc
                )

    admin.loop_thread.run(run(), LOCK_TIMEOUT_S * 10)


def wait_group_released(
    admin: AdminClient, group: str, mqs: Iterable[MessageQueue], timeout: float = GROUP_RELEASE_WAIT_S
) -> bool:
    """Wait up to ``timeout`` s until no one holds ``group``'s locks of ``mqs`` (a committer still
    writing a stopped query's offsets). True when released; False when the wait ran out."""
    wanted = set(mqs)
    if not wanted:
        return True
    cid = client_id("source")
    deadline = time.monotonic() + timeout
    while True:
        held = lock_queues(admin, group, cid, wanted)
        if held:
            unlock_queues(admin, group, cid, held)
        if held >= wanted:
            return True
        if time.monotonic() >= deadline:
            log.warning(
                "the offsets of %d queue(s) of group %s are still being written (locked) after %gs; "
                "reading them as they are",
                len(wanted - held),
                group,
                timeout,
            )
            return False
        time.sleep(0.05)


def _by_broker(mqs: Iterable[MessageQueue]) -> dict[str, set[MessageQueue]]:
    groups: dict[str, set[MessageQueue]] = defaultdict(set)
    for mq in mqs:
        groups[mq.broker_name].add(mq)
    return groups
