"""Timer log, time wheel and TimerMessageStore (store/timer/) on a real message store with a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidemq.protocol.message import MessageConst
from tidemq.protocol.topic import TIMER_TOPIC
from tidemq.store import MessageStore
from tidemq.store.results import PutMessageResult, PutMessageStatus
from tidemq.store.timer import TimerLog, TimerMessageStore, TimerWheel
from tidemq.store.timer.timer_log import DELIVERED, RECORD_SIZE, ROLLED, pack_record

from .conftest import StoreFactory, inner

T0 = 1_800_000_000_000  # a slot start for every precision used here


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def park(store: MessageStore, deliver_ms: int, body: bytes, topic: str = "Real", queue_id: int = 1) -> None:
    """What the broker's send hook stores for a timer message."""
    props = {
        MessageConst.PROPERTY_TIMER_OUT_MS: str(deliver_ms),
        MessageConst.PROPERTY_REAL_TOPIC: topic,
        MessageConst.PROPERTY_REAL_QUEUE_ID: str(queue_id),
        MessageConst.PROPERTY_TIMER_DELIVER_MS: str(deliver_ms),
        "TAGS": "tg",
    }
    assert store.put_message(inner(TIMER_TOPIC, body, 0, properties=props)).status is PutMessageStatus.PUT_OK


def delivered(store: MessageStore, topic: str = "Real", queue_id: int = 1) -> list[bytes]:
    cq = store.find_consume_queue(topic, queue_id)
    if cq is None:
        return []
    out = []
    for i in range(cq.get_max_offset_in_queue()):
        unit = cq.get_unit(i)
        assert unit is not None
        msg = store.lookup.look_message_by_offset(unit.commit_log_offset)
        assert msg is not None
        out.append(msg.body)
    return out


def timers(store: MessageStore, clock: Clock) -> TimerMessageStore:
    ts = TimerMessageStore(store)
    ts.clock_ms = clock
    ts.load()
    return ts


# ------------------------------------------------------------------------------- log and wheel


def test_timer_log_append_read_and_torn_tail(tmp_path: Path) -> None:
    tl = TimerLog(tmp_path / "log", RECORD_SIZE * 4 + 7)  # rounded down to 4 records a segment
    assert tl.file_size == RECORD_SIZE * 4 and tl.load() == 0
    data = b"".join(pack_record(i - 1, 1000 + i, 10 * i, 5, i) for i in range(6))
    assert tl.append(data) == 0  # split over two segments
    assert len(tl.queue.files) == 2 and tl.end == 6 * RECORD_SIZE
    rec = tl.read(5 * RECORD_SIZE)
    assert rec is not None and (rec.prev_pos, rec.deliver_ms, rec.phy, rec.cq_offset) == (4, 1005, 50, 5)
    tl.set_state(rec.pos, DELIVERED)
    tl.set_prev(rec.pos, -1)
    again = tl.read(rec.pos)
    assert again is not None and again.state == DELIVERED and again.prev_pos == -1  # not in the CRC
    # a torn last record (bad CRC) is dropped at load, and what follows it is zeroed
    last = tl.queue.files[-1]
    last.write(RECORD_SIZE + 20, b"\xff\xff")
    tl.close()
    tl2 = TimerLog(tmp_path / "log", RECORD_SIZE * 4)
    assert tl2.load() == 5 * RECORD_SIZE
    assert [r.cq_offset for r in tl2.scan() if not isinstance(r, int)] == [0, 1, 2, 3, 4]
    tl2.close()


def test_timer_log_deletes_only_finished_segments(tmp_path: Path) -> None:
    tl = TimerLog(tmp_path / "log", RECORD_SIZE * 2)
    tl.load()
    tl.append(b"".join(pack_record(-1, 1, i, 1, i) for i in range(5)))  # 3 segments
    assert tl.delete_delivered_segments() == 0
    for pos in (0, RECORD_SIZE, 3 * RECORD_SIZE):
        tl.set_state(pos, DELIVERED)
    assert tl.delete_delivered_segments() == 1  # the second still holds a pending record
    assert tl.start == 2 * RECORD_SIZE and tl.read(0) is None
    tl.set_state(2 * RECORD_SIZE, DELIVERED)
    tl.set_state(4 * RECORD_SIZE, DELIVERED)
    assert tl.delete_delivered_segments() == 1  # never the last
    tl.close()


def test_wheel_slots(tmp_path: Path) -> None:
    wheel = TimerWheel(tmp_path / "wheel", 10, 100)
    assert wheel.slot_time(T0 + 199) == T0 + 100
    assert wheel.get(T0) is None
    wheel.put(T0, 48, 96, 2)
    slot = wheel.get(T0)
    assert slot is not None and (slot.first_pos, slot.last_pos, slot.num) == (48, 96, 2)
    assert wheel.get(T0 + 1000) is None  # same index, another time
    wheel.close()
    assert not TimerWheel(tmp_path / "wheel", 10, 100).resized
    assert TimerWheel(tmp_path / "wheel", 20, 100).resized


def test_wheel_next_used_skips_empty_and_other_times(tmp_path: Path) -> None:
    wheel = TimerWheel(tmp_path / "wheel", 10, 100)
    assert wheel.next_used(T0, T0 + 800) == (None, T0 + 800)  # sparse: nothing used
    wheel.put(T0 + 1300, 0, 0, 1)  # index 3, another time than T0 + 300
    wheel.put(T0 + 500, 0, 0, 1)
    assert wheel.next_used(T0, T0 + 800) == (T0 + 500, T0 + 800)
    assert wheel.next_used(T0, T0 + 800, max_slots=4) == (None, T0 + 400)  # capped: go on from there
    assert wheel.next_used(T0 + 800, T0 + 5000) == (None, T0 + 1000)  # never past the file's end
    wheel.close()


# ------------------------------------------------------------------------------- timer store


def test_idle_dequeue_sleeps_until_the_next_used_slot_and_is_woken_for_earlier(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    assert ts.dequeue() == pytest.approx(10.0)  # nothing pending: the look-ahead, not a slot
    assert ts.read_behind_ms() == 0
    park(store, T0 + 3050, b"later")
    assert ts.enqueue() == 1 and ts.wake_needed  # due before the dequeue's next look
    assert ts.dequeue() == pytest.approx(3.1) and not ts.wake_needed  # sleeps to the end of its slot
    park(store, T0 + 9000, b"after")
    assert ts.enqueue() == 1 and not ts.wake_needed
    clock.now = T0 + 3100
    assert ts.dequeue() == pytest.approx(6.0)  # 30 empty slots skipped in one read
    assert delivered(store) == [b"later"] and ts.read_time_ms == T0 + 3100
    clock.now = T0 + 60_000
    assert ts.read_behind_ms() > 0
    ts.dequeue()
    assert delivered(store) == [b"later", b"after"] and ts.read_time_ms == T0 + 60_000


def test_delivered_after_its_time_not_before_and_once(open_store: StoreFactory) -> None:
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    park(store, T0 + 250, b"a")
    park(store, T0 + 120, b"b")
    park(store, T0 - 5000, b"late")  # overdue: the current slot
    assert ts.enqueue() == 3 and ts.enqueue() == 0
    assert ts.dequeue() == pytest.approx(0.1)
    assert delivered(store) == []
    clock.now = T0 + 100
    ts.dequeue()
    assert delivered(store) == [b"late"]
    clock.now = T0 + 200
    ts.dequeue()
    assert delivered(store) == [b"late", b"b"]
    clock.now = T0 + 299
    ts.dequeue()
    assert len(delivered(store)) == 2
    clock.now = T0 + 300
    ts.dequeue()
    clock.now = T0 + 5000
    ts.dequeue()
    assert delivered(store) == [b"late", b"b", b"a"] and ts.delivered == 3
    unit = store.find_consume_queue("Real", 1).get_unit(2)  # type: ignore[union-attr]
    msg = store.lookup.look_message_by_offset(unit.commit_log_offset)  # type: ignore[union-attr]
    assert msg is not None
    props = msg.properties
    assert MessageConst.PROPERTY_REAL_TOPIC not in props and props["TIMER_OUT_MS"] == str(T0 + 250)
    assert props["TIMER_DEQUEUE_MS"] == str(T0 + 300) and props["TAGS"] == "tg"
    assert store.find_consume_queue("Real", 1).get_unit(2).tags_code != 0  # type: ignore[union-attr]


def test_a_refused_put_is_retried_not_dropped(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    park(store, T0 + 50, b"x")
    ts.enqueue()
    real_put = store.put_message
    monkeypatch.setattr(
        store,
        "put_message",
        lambda m: PutMessageResult(PutMessageStatus.DISK_FULL, remark="disk full"),
    )
    clock.now = T0 + 500
    assert ts.dequeue() == pytest.approx(0.1)  # RETRY_S
    assert ts.dequeue() == pytest.approx(0.1)
    assert ts.read_time_ms == T0  # the slot waits
    monkeypatch.setattr(store, "put_message", real_put)
    ts.dequeue()
    assert delivered(store) == [b"x"] and ts.read_time_ms > T0


def test_crash_rebuild_keeps_pending_and_delivered(open_store: StoreFactory) -> None:
    """An unclean stop: the wheel is rebuilt from the log; pending timers stay, overdue ones come at
    once, delivered ones do not come again, and enqueueing resumes without duplicates."""
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    for i in range(6):
        park(store, T0 + 100 * i + 50, b"m%d" % i)
    ts.enqueue()
    clock.now = T0 + 200
    ts.dequeue()
    assert delivered(store) == [b"m0", b"m1"]
    park(store, T0 + 10_000, b"later")  # stored, not yet enqueued: the checkpoint never saw anything
    # "crash": no persist, no close; the next run finds an abort file
    store.recovered_abnormally = True
    clock.now = T0 + 450
    ts2 = timers(store, clock)
    assert ts2.enqueue_offset == 6 and ts2.pending == 4  # after the records the log holds
    assert ts2.enqueue() == 1 and ts2.enqueue() == 0 and ts2.pending == 5
    clock.now = T0 + 550
    ts2.dequeue()
    assert delivered(store) == [b"m0", b"m1", b"m2", b"m3", b"m4"]  # overdue at once
    clock.now = T0 + 10_100
    ts2.dequeue()
    assert sorted(delivered(store)) == sorted([b"m0", b"m1", b"m2", b"m3", b"m4", b"m5", b"later"])
    assert ts2.pending == 0


def test_clean_restart_resumes_from_checkpoint(open_store: StoreFactory) -> None:
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    park(store, T0 + 50, b"a")
    park(store, T0 + 3000, b"b")
    ts.enqueue()
    clock.now = T0 + 100
    ts.dequeue()
    ts.shutdown()
    clock.now = T0 + 3100
    ts2 = timers(store, clock)
    assert (ts2.read_time_ms, ts2.enqueue_offset) == (T0 + 100, 2)
    ts2.dequeue()
    assert delivered(store) == [b"a", b"b"]
    ts2.shutdown()


def test_beyond_the_roll_window_is_stored_again_then_delivered(open_store: StoreFactory) -> None:
    """RocketMQ's roll: a timer further ahead than the roll window waits at the window's end, then its
    message is stored again in the timer topic (TIMER_ROLL_TIMES + 1) and enqueued anew."""
    store = open_store()
    clock = Clock()
    ts = TimerMessageStore(store, roll_window_ms=60_000)
    ts.clock_ms = clock
    ts.load()
    far = T0 + 200_000  # waits at +60 s, rolled at +90 s to +150 s, rolled at +180 s to its own slot
    park(store, far, b"far")
    ts.enqueue()
    assert ts.pending == 1
    while clock.now < far + 100:
        clock.now = min(clock.now + 30_000, far + 100)
        while ts.dequeue() == 0.0:
            pass
        ts.enqueue()
        if clock.now < far:
            assert delivered(store) == []
    assert delivered(store) == [b"far"] and ts.rolled == 2 and ts.pending == 0
    cq = store.find_consume_queue(TIMER_TOPIC, 0)
    assert cq is not None and cq.get_max_offset_in_queue() == 3  # the original and two rolled copies
    unit = store.find_consume_queue("Real", 1).get_unit(0)  # type: ignore[union-attr]
    msg = store.lookup.look_message_by_offset(unit.commit_log_offset)  # type: ignore[union-attr]
    assert msg is not None and msg.properties["TIMER_ROLL_TIMES"] == "2"
    assert msg.properties["TIMER_OUT_MS"] == str(far)
    first = ts.log.read(0)
    assert first is not None and first.state == ROLLED


def test_a_failed_enqueue_write_leaves_nothing_half_linked(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk while linking (the timer files are sparse): the slots written are put back and the
    records zeroed, the entries are enqueued again later, and each timer comes once."""
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    park(store, T0 + 50, b"a")
    ts.enqueue()
    park(store, T0 + 50, b"b")  # joins a's slot
    park(store, T0 + 150, b"c")  # a new slot
    real_put = ts.wheel.put
    calls = []

    def failing_put(*args: int) -> None:
        calls.append(args)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_put(*args)

    monkeypatch.setattr(ts.wheel, "put", failing_put)
    end, slot = ts.log.end, ts.wheel.get(T0)
    with pytest.raises(OSError):
        ts.enqueue()
    assert (ts.log.end, ts.wheel.get(T0), ts.enqueue_offset) == (end, slot, 1)
    assert ts.log.read(end) is None  # zeroed
    monkeypatch.setattr(ts.wheel, "put", real_put)
    assert ts.enqueue() == 2
    clock.now = T0 + 300
    ts.dequeue()
    assert delivered(store) == [b"a", b"b", b"c"] and ts.pending == 0


def test_retention_keeps_the_oldest_pending_timers_message(open_store: StoreFactory) -> None:
    store = open_store()
    clock = Clock()
    ts = timers(store, clock)
    assert ts.min_needed_offset() is None
    park(store, T0 + 50, b"a")
    park(store, T0 + 5000, b"b")
    ts.enqueue()
    first, second = ts.log.read(0), ts.log.read(RECORD_SIZE)
    assert first is not None and second is not None
    assert ts.min_needed_offset() == first.phy
    clock.now = T0 + 200
    ts.dequeue()
    assert ts.min_needed_offset() == second.phy  # a delivered: b's message is the oldest needed
    clock.now = T0 + 6000
    ts.dequeue()
    assert ts.min_needed_offset() is None
