"""ProcessQueue bookkeeping: commit offset = smallest unconsumed offset; flow-control numbers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_core import FlowLimits
from tidemq.protocol.message import MessageExt


def msg(offset: int, size: int = 10) -> MessageExt:
    return MessageExt("T", b"x" * size, queue_offset=offset)


def test_commit_offset_is_smallest_unconsumed() -> None:
    """Acking a later message does not move the offset past an earlier unconsumed one."""
    pq = ProcessQueue(now=0)
    msgs = [msg(o) for o in range(10, 15)]
    pq.put_messages(msgs)
    assert pq.msg_count == 5 and pq.msg_size == 50
    assert pq.remove_messages([msgs[3]], now=1) == 10
    assert pq.remove_messages([msgs[0]], now=1) == 11
    assert pq.remove_messages([msgs[1], msgs[2], msgs[4]], now=1) == 15
    assert pq.msg_count == 0 and pq.msg_size == 0
    assert pq.remove_messages([msgs[0]], now=1) == -1


def test_duplicates_are_ignored_and_span_reported() -> None:
    """Re-putting an offset does not double count; span is max minus min cached offset."""
    pq = ProcessQueue(now=0)
    pq.put_messages([msg(0), msg(1), msg(2000)])
    pq.put_messages([msg(1)])
    assert pq.msg_count == 3
    assert pq.get_max_span() == 2000
    assert FlowLimits(1000, 100, 2000).check(pq) is None
    pq.put_messages([msg(2001)])
    fc = FlowLimits(1000, 100, 2000).check(pq)
    assert fc is not None and "span" in fc.reason and fc.delay == 0.05
    assert FlowLimits(1000, 100, None).check(pq) is None


def test_flow_control_on_count_and_size() -> None:
    """More than the threshold of messages or MiB postpones the pull."""
    pq = ProcessQueue(now=0)
    pq.put_messages([msg(i, 1) for i in range(4)])
    fc = FlowLimits(3, 100, 2000).check(pq)
    assert fc is not None and "count" in fc.reason
    big = ProcessQueue(now=0)
    big.put_messages([msg(0, 3 * 1024 * 1024)])
    fc = FlowLimits(1000, 2, 2000).check(big)
    assert fc is not None and "MiB" in fc.reason


def test_orderly_take_commit_and_consume_again() -> None:
    """Orderly: commit returns last taken + 1; messages put back are taken again first."""
    pq = ProcessQueue(now=0)
    assert pq.put_messages([msg(o) for o in range(5)]) is True
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [0, 1]
    pq.make_message_to_consume_again(taken[1:])
    assert pq.commit() == 1
    assert [m.queue_offset for m in pq.take_messages(10)] == [1, 2, 3, 4]
    assert pq.commit() == 5 and pq.msg_count == 0
    assert pq.take_messages(1) == [] and pq.consuming is False


def test_pull_expiry() -> None:
    """A queue not pulled for 120 s counts as expired."""
    pq = ProcessQueue(now=1000)
    assert not pq.is_pull_expired(now=1000 + 120_000)
    assert pq.is_pull_expired(now=1000 + 120_001)


@given(st.lists(st.integers(0, 200), unique=True, min_size=1), st.data())
def test_commit_never_passes_an_unconsumed_message(offsets: list[int], data: st.DataObject) -> None:
    """Whatever order acks arrive in, the commit offset is <= every still-cached offset."""
    pq = ProcessQueue(now=0)
    msgs = {o: msg(o) for o in offsets}
    pq.put_messages([msgs[o] for o in offsets])
    remaining = set(offsets)
    for o in data.draw(st.permutations(offsets)):
        commit = pq.remove_messages([msgs[o]], now=0)
        remaining.discard(o)
        assert commit == (min(remaining) if remaining else max(offsets) + 1)


@given(
    st.lists(st.integers(min_value=0, max_value=50), max_size=5),
    st.lists(st.integers(min_value=0, max_value=50), max_size=5),
    st.lists(st.integers(min_value=0, max_value=50), max_size=5),
)
def test_pass_through_is_put_then_remove(cached: list[int], batch: list[int], later: list[int]) -> None:
    """The lite pull consumer's one-step put + remove leaves the queue as the two steps do and
    returns the same commit offset, whether or not other messages are cached."""
    a, b = ProcessQueue(now=0), ProcessQueue(now=0)
    for pq in (a, b):
        pq.put_messages([msg(o) for o in cached])
        pq.remove_messages([msg(o) for o in cached[: len(cached) // 2]], now=1)
    for step in (batch, later):
        msgs = [msg(o) for o in step]
        for m in msgs:
            m.properties["MAX_OFFSET"] = "60"
        a.put_messages(msgs)
        expected = a.remove_messages(msgs, now=2)
        assert b.pass_through(msgs, now=2) == expected
        assert (b.msg_count, b.msg_size, b.queue_offset_max, b.msg_acc_cnt, b.min_offset()) == (
            a.msg_count,
            a.msg_size,
            a.queue_offset_max,
            a.msg_acc_cnt,
            a.min_offset(),
        )
