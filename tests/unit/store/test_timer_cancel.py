"""Timer cancellation (TIMER_DEL_UNIQKEY markers, store/timer/cancels.py) on a real message store with
a fake clock: a cancelled timer is never delivered, live, after a clean restart, after a crash rebuild
and across rolls; the marker itself is never delivered."""

from __future__ import annotations

from pathlib import Path

from tidemq.protocol.message import MessageConst
from tidemq.protocol.recall import delete_key
from tidemq.protocol.topic import TIMER_CANCEL_FLAG, TIMER_TOPIC
from tidemq.store import MessageStore
from tidemq.store.results import PutMessageStatus
from tidemq.store.timer import TimerMessageStore
from tidemq.store.timer.timer_log import CANCELLED, DELIVERED

from .conftest import StoreFactory, inner
from .test_timer_store import T0, Clock, delivered, timers


def park(store: MessageStore, due: int, body: bytes, uniq: str, *, cancels: str | None = None) -> None:
    """What the send hook stores: a timer message, or (``cancels``) a cancellation of that key."""
    props = {
        MessageConst.PROPERTY_TIMER_OUT_MS: str(due),
        MessageConst.PROPERTY_REAL_TOPIC: "Real",
        MessageConst.PROPERTY_REAL_QUEUE_ID: "1",
        MessageConst.PROPERTY_TIMER_DELIVER_MS: str(due),
        MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq,
    }
    if cancels is not None:
        props[MessageConst.PROPERTY_TIMER_DEL_UNIQKEY] = cancels
    assert store.put_message(inner(TIMER_TOPIC, body, 0, properties=props)).status is PutMessageStatus.PUT_OK


def run_until(ts: TimerMessageStore, clock: Clock, when: int) -> None:
    clock.now = when
    ts.enqueue()
    while ts.dequeue() == 0.0:
        pass


def test_the_marker_is_flagged_in_the_consume_queue_and_the_log(open_store: StoreFactory) -> None:
    store = open_store()
    ts = timers(store, Clock())
    park(store, T0 + 250, b"a", "U1")
    park(store, T0 + 250, b"0", "U1", cancels=delete_key("Real", "U1"))
    cq = store.find_consume_queue(TIMER_TOPIC, 0)
    assert cq is not None
    codes = [cq.get_unit(i).tags_code for i in range(2)]  # type: ignore[union-attr]
    assert codes == [T0 + 250, (T0 + 250) | TIMER_CANCEL_FLAG]
    assert ts.enqueue() == 2 and "Real+U1" in ts.cancels
    marker = ts.log.read(48)
    assert marker is not None and marker.deliver_ms == (T0 + 250) | TIMER_CANCEL_FLAG


def test_cancelled_before_due_is_never_delivered_and_others_are(open_store: StoreFactory) -> None:
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    park(store, T0 + 250, b"a", "U1")
    park(store, T0 + 250, b"b", "U2")
    park(store, T0 + 120, b"early", "U3")  # due before its marker: cancelled too
    park(store, T0 + 250, b"0", "U1", cancels=delete_key("Real", "U1"))
    park(store, T0 + 250, b"0", "U3", cancels=delete_key("Real", "U3"))
    park(store, T0 + 250, b"0", "U9", cancels=delete_key("Other", "U2"))  # another topic's U2
    run_until(ts, clock, T0 + 1000)
    assert delivered(store) == [b"b"]  # never a marker, never a cancelled message
    assert ts.cancelled == 2 and ts.delivered == 1 and ts.pending == 0
    assert len(ts.cancels) == 0  # each marker left when its own time came
    states = [r.state for r in ts.log.scan() if not isinstance(r, int)]
    assert states == [CANCELLED, DELIVERED, CANCELLED, DELIVERED, DELIVERED, DELIVERED]


def test_a_cancellation_survives_a_clean_restart(open_store: StoreFactory) -> None:
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    park(store, T0 + 5000, b"a", "U1")
    park(store, T0 + 5000, b"0", "U1", cancels=delete_key("Real", "U1"))
    park(store, T0 + 5000, b"b", "U2")
    ts.enqueue()
    ts.shutdown()  # the checkpoint holds the key
    ts2 = timers(store, clock)
    assert "Real+U1" in ts2.cancels
    run_until(ts2, clock, T0 + 6000)
    assert delivered(store) == [b"b"] and ts2.cancelled == 1
    ts2.shutdown()


def test_a_cancellation_survives_a_crash_rebuild(open_store: StoreFactory, tmp_path: Path) -> None:
    """A killed broker: no checkpoint with the key; the rebuild reads it back from the marker record,
    and an overdue cancelled message is still not delivered."""
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    park(store, T0 + 300, b"a", "U1")
    park(store, T0 + 300, b"0", "U1", cancels=delete_key("Real", "U1"))
    park(store, T0 + 300, b"b", "U2")
    ts.enqueue()
    store.recovered_abnormally = True  # "crash": nothing persisted, files left as they are
    clock.now = T0 + 10_000  # the broker was down past the due time
    ts2 = timers(store, clock)
    assert "Real+U1" in ts2.cancels and ts2.pending == 3
    run_until(ts2, clock, T0 + 11_000)
    assert delivered(store) == [b"b"] and ts2.cancelled == 1 and ts2.pending == 0


def test_a_cancelled_timer_beyond_the_roll_window_is_not_rolled(open_store: StoreFactory) -> None:
    store = open_store()
    clock = Clock()
    ts = TimerMessageStore(store, roll_window_ms=60_000)
    ts.clock_ms = clock
    ts.load()
    far = T0 + 200_000
    park(store, far, b"far", "U1")
    ts.enqueue()
    clock.now = T0 + 10_000
    park(store, far, b"0", "U1", cancels=delete_key("Real", "U1"))  # waits in a later slot, rolled
    ts.enqueue()
    while clock.now < far + 1000:
        run_until(ts, clock, clock.now + 15_000)
    assert delivered(store) == [] and ts.cancelled == 1 and ts.pending == 0 and len(ts.cancels) == 0


def test_a_cancellation_not_yet_enqueued_at_a_crash_is_known_at_load(open_store: StoreFactory) -> None:
    """The marker was stored but the timer store had not read it when the broker died: load notes it
    from the consume queue's tail, before the overdue message it cancels can be delivered."""
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    park(store, T0 + 300, b"a", "U1")
    ts.enqueue()
    park(store, T0 + 300, b"0", "U1", cancels=delete_key("Real", "U1"))  # stored, not enqueued
    store.recovered_abnormally = True
    clock.now = T0 + 10_000
    ts2 = timers(store, clock)
    assert "Real+U1" in ts2.cancels and ts2.enqueue_offset == 1
    clock.now += 1000
    while ts2.dequeue() == 0.0:  # the overdue slot, before any enqueue
        pass
    assert delivered(store) == [] and ts2.cancelled == 1
