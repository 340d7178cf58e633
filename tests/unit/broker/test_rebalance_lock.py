"""RebalanceLockManager: the broker's orderly-consumption queue locks (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.rebalance_lock import RebalanceLockManager
from tidemq.protocol.message import MessageQueue

T0 = 1_700_000_000_000
Q = [MessageQueue("T", "broker-a", i) for i in range(4)]


def test_free_queues_are_granted_and_listed() -> None:
    lm = RebalanceLockManager()
    assert lm.try_lock_batch("G", Q[:2], "c1", T0) == set(Q[:2])
    assert lm.is_locked("G", Q[0], "c1", T0)
    assert not lm.is_locked("G", Q[0], "c2", T0)
    assert not lm.is_locked("G", Q[2], "c1", T0)


def test_queue_held_by_live_client_is_refused_to_another() -> None:
    lm = RebalanceLockManager()
    lm.try_lock_batch("G", Q[:2], "c1", T0)
    assert lm.try_lock_batch("G", Q[1:3], "c2", T0 + 1000) == {Q[2]}
    assert lm.is_locked("G", Q[1], "c1", T0 + 1000)


def test_renewal_is_included_and_extends_lifetime() -> None:
    lm = RebalanceLockManager(lock_max_live_time_ms=60_000)
    lm.try_lock_batch("G", [Q[0]], "c1", T0)
    assert lm.try_lock_batch("G", [Q[0], Q[1]], "c1", T0 + 50_000) == {Q[0], Q[1]}
    # 100 s after the first lock but only 50 s after the renewal: still ours
    assert lm.is_locked("G", Q[0], "c1", T0 + 100_000)
    assert lm.try_lock_batch("G", [Q[0]], "c2", T0 + 100_000) == set()


def test_expired_lock_goes_to_the_next_asker() -> None:
    lm = RebalanceLockManager(lock_max_live_time_ms=60_000)
    lm.try_lock_batch("G", [Q[0]], "c1", T0)
    assert not lm.is_locked("G", Q[0], "c1", T0 + 60_001)
    assert lm.try_lock_batch("G", [Q[0]], "c2", T0 + 60_001) == {Q[0]}
    assert lm.is_locked("G", Q[0], "c2", T0 + 60_001)


def test_groups_are_independent() -> None:
    lm = RebalanceLockManager()
    lm.try_lock_batch("G1", [Q[0]], "c1", T0)
    assert lm.try_lock_batch("G2", [Q[0]], "c2", T0) == {Q[0]}


def test_unlock_releases_only_own_locks() -> None:
    lm = RebalanceLockManager()
    lm.try_lock_batch("G", [Q[0]], "c1", T0)
    lm.try_lock_batch("G", [Q[1]], "c2", T0)
    lm.unlock_batch("G", [Q[0], Q[1]], "c1")
    assert not lm.is_locked("G", Q[0], "c1", T0)
    assert lm.is_locked("G", Q[1], "c2", T0)
    assert lm.try_lock_batch("G", [Q[0]], "c2", T0) == {Q[0]}
    lm.unlock_batch("unknown-group", [Q[0]], "c1")  # no error


def test_unlock_all_and_snapshot() -> None:
    lm = RebalanceLockManager()
    lm.try_lock_batch("G", Q[:3], "c1", T0)
    lm.try_lock_batch("G", [Q[3]], "c2", T0)
    lm.unlock_all("G", "c1")
    table = lm.lock_table()
    assert set(table["G"]) == {Q[3]}
    assert table["G"][Q[3]].client_id == "c2"
    table["G"].clear()  # a snapshot: the manager is unaffected
    assert lm.is_locked("G", Q[3], "c2", T0)


@given(
    st.lists(
        st.tuples(st.sampled_from(["c1", "c2", "c3"]), st.sets(st.integers(0, 3), min_size=1), st.booleans()),
        max_size=30,
    )
)
def test_a_queue_never_has_two_live_holders(ops: list[tuple[str, set[int], bool]]) -> None:
    lm = RebalanceLockManager(lock_max_live_time_ms=60_000)
    now = T0
    for client, ids, unlock in ops:
        now += 7_000
        mqs = [Q[i] for i in ids]
        if unlock:
            lm.unlock_batch("G", mqs, client)
        else:
            got = lm.try_lock_batch("G", mqs, client, now)
            assert all(lm.is_locked("G", mq, client, now) for mq in got)
        for mq in Q:
            holders = [c for c in ("c1", "c2", "c3") if lm.is_locked("G", mq, c, now)]
            assert len(holders) <= 1
