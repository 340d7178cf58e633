"""Rebalance diff: drop what is no longer ours, add what is new, recreate expired queues."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.client.consumer.rebalance_plan import plan_rebalance
from tidemq.protocol.message import MessageQueue


def mq(i: int) -> MessageQueue:
    return MessageQueue("T", "b", i)


def test_plan_drops_adds_and_recreates_expired() -> None:
    """Owned {0,1,2}, allocated {1,2,3}, 2 expired -> drop [0,2], add [2,3]."""
    plan = plan_rebalance([mq(0), mq(1), mq(2)], [mq(3), mq(2), mq(1)], expired=[mq(2)])
    assert plan.drop == [mq(0), mq(2)]
    assert plan.add == [mq(2), mq(3)]
    assert plan.changed
    assert not plan_rebalance([mq(1)], [mq(1)]).changed


@given(st.sets(st.integers(0, 20)), st.sets(st.integers(0, 20)), st.sets(st.integers(0, 20)))
def test_applying_the_plan_yields_the_allocation(
    owned: set[int], allocated: set[int], expired: set[int]
) -> None:
    """owned - drop + add == allocated, and only owned queues are dropped."""
    o, a = {mq(i) for i in owned}, {mq(i) for i in allocated}
    plan = plan_rebalance(o, a, expired={mq(i) for i in expired & owned})
    assert set(plan.drop) <= o
    assert (o - set(plan.drop)) | set(plan.add) == a
