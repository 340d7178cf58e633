"""The sans-I/O pull kernel (pull_core.QueuePull): the status switch, bounded reads, pipelining."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.client.api import PullResult, PullStatus
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_core import PullRequest, PullVerdict, QueuePull, run_pipelined
from tidemq.protocol.message import MessageQueue

MQ = MessageQueue("T", "b", 0)


def answer(status: PullStatus, nxt: int, lo: int = 0, hi: int = 100, suggest: int = 0) -> PullResult:
    return PullResult(status, nxt, lo, hi, suggest_which_broker_id=suggest)


def test_unbounded_status_switch() -> None:
    q: QueuePull[object] = QueuePull(MQ, 10)
    assert q.on_result(answer(PullStatus.FOUND, 42, hi=50, suggest=1)) is PullVerdict.FOUND
    assert (q.next_offset, q.max_offset, q.suggest_which_broker_id) == (42, 50, 1)
    assert q.on_result(answer(PullStatus.NO_NEW_MSG, 50, hi=50)) is PullVerdict.EMPTY
    assert q.next_offset == 50
    assert q.on_result(answer(PullStatus.NO_MATCHED_MSG, 60)) is PullVerdict.EMPTY
    assert q.next_offset == 60
    # the broker's correction is taken, both ways; never LOST without an end
    assert q.on_result(answer(PullStatus.OFFSET_ILLEGAL, 7)) is PullVerdict.ILLEGAL
    assert q.next_offset == 7
    assert not q.done


def test_found_always_moves_forward() -> None:
    q: QueuePull[object] = QueuePull(MQ, 10, end=20)
    assert q.on_result(answer(PullStatus.FOUND, 10)) is PullVerdict.FOUND
    assert q.next_offset == 11


@pytest.mark.parametrize(
    ("status", "nxt", "lo", "hi", "verdict", "next_offset", "lost"),
    [
        (PullStatus.NO_MATCHED_MSG, 15, 0, 30, PullVerdict.EMPTY, 15, None),
        (PullStatus.NO_MATCHED_MSG, 10, 0, 30, PullVerdict.EMPTY, 20, None),  # nothing more matches
        (PullStatus.OFFSET_ILLEGAL, 14, 14, 30, PullVerdict.LOST, 14, (10, 14)),  # deleted head
        (PullStatus.OFFSET_ILLEGAL, 25, 25, 30, PullVerdict.LOST, 20, (10, 20)),  # all of it deleted
        (PullStatus.OFFSET_ILLEGAL, 5, 0, 5, PullVerdict.LOST, 20, (10, 20)),  # queue truncated
        (PullStatus.NO_NEW_MSG, 12, 0, 12, PullVerdict.LOST, 20, (10, 20)),  # shorter than planned
    ],
)
def test_bounded_read(
    status: PullStatus,
    nxt: int,
    lo: int,
    hi: int,
    verdict: PullVerdict,
    next_offset: int,
    lost: tuple[int, int] | None,
) -> None:
    q: QueuePull[object] = QueuePull(MQ, 10, end=20)
    assert q.on_result(answer(status, nxt, lo, hi)) is verdict
    assert q.next_offset == next_offset
    if lost is not None:
        assert q.lost == lost


def test_window_fill_take_stale_clear() -> None:
    q: QueuePull[str] = QueuePull(MQ, 0, end=100, depth=3, step=32)
    q.fill(lambda off: f"t{off}")
    assert list(q.window) == [(0, "t0"), (32, "t32"), (64, "t64")]
    assert q.take() == (0, "t0")
    q.on_result(answer(PullStatus.FOUND, 32, hi=200))
    assert q.stale() == []  # a full batch: the next pull in flight starts right there
    q.fill(lambda off: f"t{off}")
    assert [off for off, _ in q.window] == [32, 64, 96]  # none at or past the end (100)
    assert q.take() == (32, "t32")
    q.on_result(answer(PullStatus.FOUND, 40, hi=200))  # a short answer
    assert q.stale() == ["t64", "t96"]
    with pytest.raises(LookupError):
        q.take()
    q.fill(lambda off: f"u{off}")
    assert [off for off, _ in q.window] == [40, 72]
    assert q.clear() == ["u40", "u72"] and not q.window


def test_pull_request_is_the_kernel_state() -> None:
    pr = PullRequest("g", MQ, ProcessQueue(), 5)
    assert pr.on_result(answer(PullStatus.FOUND, 9, hi=9, suggest=1)) is PullVerdict.FOUND
    assert (pr.next_offset, pr.max_offset, pr.suggest_which_broker_id) == (9, 9, 1)
    assert pr.consumer_group == "g" and not pr.previously_locked and "next_offset=9" in repr(pr)


class FakeQueue:
    """A queue holding offsets [lo, hi), ``filtered`` ones not matching the subscription; answers
    pulls of up to ``batch`` offsets as a broker does, cut short before a filtered one."""

    def __init__(self, lo: int, hi: int, filtered: set[int], batch: int) -> None:
        self.lo, self.hi, self.filtered, self.batch = lo, hi, filtered, batch
        self.sent: dict[int, int] = {}
        self.tokens = 0

    def send(self, offset: int) -> int:
        self.tokens += 1
        self.sent[self.tokens] = offset
        return self.tokens

    def receive(self, token: int, offset: int) -> tuple[PullResult, list[int]]:
        assert self.sent[token] == offset
        return self.read(token)

    def read(self, token: int) -> tuple[PullResult, list[int]]:
        offset = self.sent.pop(token)
        if offset < self.lo or offset > self.hi:
            nxt = self.lo if offset < self.lo else self.hi
            return answer(PullStatus.OFFSET_ILLEGAL, nxt, self.lo, self.hi), []
        if offset == self.hi:
            return answer(PullStatus.NO_NEW_MSG, self.hi, self.lo, self.hi), []
        stop = min(offset + self.batch, self.hi)
        got: list[int] = []
        for o in range(offset, stop):
            if o in self.filtered:
                if got:  # a short answer (as a byte cap makes): it ends before the filtered one
                    stop = o
                    break
                continue
            got.append(o)
        status = PullStatus.FOUND if got else PullStatus.NO_MATCHED_MSG
        return answer(status, stop, self.lo, self.hi), got


@settings(max_examples=60, deadline=None)
@given(
    lo=st.integers(0, 40),
    size=st.integers(0, 120),
    start=st.integers(0, 60),
    length=st.integers(1, 120),
    filtered=st.sets(st.integers(0, 160), max_size=12),
    depth=st.integers(1, 4),
)
def test_blocking_runner_reads_every_offset_once_in_order(
    lo: int, size: int, start: int, length: int, filtered: set[int], depth: int
) -> None:
    """run_pipelined over a fake queue: every offset of the range is read once, in order, or
    reported lost (never both), and the read ends."""
    end = start + length
    queue = FakeQueue(lo, lo + size, filtered, batch=8)
    q: QueuePull[int] = QueuePull(MQ, start, end=end, depth=depth, step=8)
    read: list[int] = []
    lost: list[int] = []
    for verdict, _, got in run_pipelined(q, queue.send, queue.receive, queue.read):
        if verdict is PullVerdict.LOST:
            lost.extend(range(*q.lost))
        elif verdict is PullVerdict.FOUND:
            read.extend(o for o in got if o < end)
    assert q.done
    assert read == sorted(set(read)) and not set(read) & set(lost)
    expected = [o for o in range(start, end) if lo <= o < lo + size and o not in filtered]
    assert read == expected
    assert set(lost) == set(range(start, end)) - set(range(lo, lo + size))


def test_run_pipelined_goes_on_after_a_transport_error() -> None:
    """An error while refilling still yields the answer received; a new run (after clear())
    continues from there, nothing read twice or skipped."""
    queue = FakeQueue(0, 40, set(), batch=8)
    q: QueuePull[int] = QueuePull(MQ, 0, end=40, depth=3, step=8)
    sends = 0

    def flaky_send(offset: int) -> int:
        nonlocal sends
        sends += 1
        if sends == 5:
            raise ConnectionError("broken")
        return queue.send(offset)

    read: list[int] = []
    with pytest.raises(ConnectionError):
        for _, _, got in run_pipelined(q, flaky_send, queue.receive, queue.read):
            read.extend(got)
    q.clear()
    for _, _, got in run_pipelined(q, flaky_send, queue.receive, queue.read):
        read.extend(got)
    assert read == list(range(40))
