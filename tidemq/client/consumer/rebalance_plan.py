"""The rebalance diff (pure): which owned queues to drop, which allocated queues to add.

Mirrors the decision part of RocketMQ's ``RebalanceImpl.updateProcessQueueTableInRebalance``:
owned queues no longer allocated are dropped; owned queues still allocated but not pulled for
``PULL_MAX_IDLE_TIME_MS`` are dropped *and* re-added with a fresh ProcessQueue (push
consumers only); allocated queues not owned are added. The I/O around it (persist offsets,
unlock, compute the start offset, dispatch PullRequests) lives in ``rebalance.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tidemq.protocol.message import MessageQueue

__all__ = ["RebalancePlan", "plan_rebalance"]


@dataclass(frozen=True, slots=True)
class RebalancePlan:
    """Queues to drop and to add, each sorted (topic, broker name, queue id)."""

    drop: list[MessageQueue] = field(default_factory=list)
    add: list[MessageQueue] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when anything is dropped or added."""
        return bool(self.drop or self.add)


def plan_rebalance(
    owned: Iterable[MessageQueue],
    allocated: Iterable[MessageQueue],
    *,
    expired: Iterable[MessageQueue] = (),
) -> RebalancePlan:
    """Compute the change from ``owned`` to ``allocated`` for one topic.

    Args:
        owned: queues that currently have a ProcessQueue.
        allocated: the strategy's answer for this client.
        expired: owned queues whose ProcessQueue is pull-expired (dropped and recreated).

    Returns:
        A :class:`RebalancePlan`; after applying it the owned set equals ``allocated``.
    """
    owned_set, allocated_set = set(owned), set(allocated)
    drop = (owned_set - allocated_set) | (owned_set & allocated_set & set(expired))
    add = allocated_set - (owned_set - drop)
    return RebalancePlan(drop=sorted(drop), add=sorted(add))
