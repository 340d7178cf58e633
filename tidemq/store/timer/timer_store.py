"""Timer messages due at any time: RocketMQ 5's ``TimerMessageStore`` in spirit.

The broker's send hook (``tidemq/broker/timer_service.py``) stores a timer message in
``rmq_sys_wheel_timer`` queue 0 with its real topic and queue in ``REAL_TOPIC`` / ``REAL_QID`` and its
due time in ``TIMER_OUT_MS`` (the dispatcher makes that time the consume-queue tags code). Then:

* **enqueue** (:meth:`TimerMessageStore.enqueue`) reads that consume queue from
  :attr:`~TimerMessageStore.enqueue_offset` and appends one :class:`~.timer_log.TimerRecord` per
  message to the timer log, linked into the wheel slot of its time (:class:`~.wheel.TimerWheel`);
* **dequeue** (:meth:`TimerMessageStore.dequeue`) walks slot after slot once its time has fully
  passed (``read_time_ms + precision <= now``), puts each pending message back to its real topic and
  queue and marks its record DELIVERED. A put the store refuses for a reason that can pass (disk
  full, store busy) is retried; the slot waits. A message the store can never take is marked
  SKIPPED with a WARNING.

Only the files hold timers: memory does not grow with the number pending.

**Cancellation** (``TIMER_DEL_UNIQKEY``, RECALL_MESSAGE): a marker message is parked like any timer;
enqueue notes its key in :attr:`TimerMessageStore.cancels` (``cancels.py``) and dequeue marks the
cancelled message CANCELLED instead of putting it; the marker's record is done when its own time comes.

**Crash safety.** A record's state is written in place right after its put, so after a killed
process at most the message being put at that moment is delivered again. The checkpoint
(``timercheck.json``: read time, enqueue offset) is written every few seconds and at shutdown, after
the log and the wheel are synced. After an unclean stop (the store's ``abort`` file), a resized wheel
or a long stop, the wheel is rebuilt from the log (:meth:`TimerMessageStore.rebuild`): every PENDING
record goes back into the slot of its time, overdue ones into the current slot (delivered at once),
and enqueueing resumes after the last message the log holds. After a power loss (state bytes not yet
synced) messages delivered since the last sync may be delivered again: at-least-once.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tidemq.clock import now_ms
from tidemq.protocol.message import MessageConst
from tidemq.protocol.topic import TIMER_TOPIC
from tidemq.store.config_file import atomic_write_json, load_json
from tidemq.store.consume_queue import iter_units
from tidemq.store.results import MessageExtBrokerInner, PutMessageStatus
from tidemq.store.timer.cancels import TimerCancels, due_of, is_marker
from tidemq.store.timer.timer_log import (
    CANCELLED,
    DELIVERED,
    PENDING,
    RECORD_SIZE,
    ROLLED,
    SKIPPED,
    TimerLog,
    pack_record,
)
from tidemq.store.timer.wheel import TimerWheel

if TYPE_CHECKING:
    from tidemq.protocol.message import MessageExt
    from tidemq.store.consume_queue import ConsumeQueue
    from tidemq.store.message_store import MessageStore
    from tidemq.store.timer.timer_log import TimerRecord

__all__ = ["ROLL_WINDOW_MS", "TIMER_TOPIC", "TimerMessageStore", "convert_message", "roll_message"]

log = logging.getLogger(__name__)

BLANK_MS = 2 * 3600 * 1000
"""Wheel room beyond the roll window (2 h): how far dequeue may lag before enqueue waits, and the
stop after which the wheel is rebuilt rather than swept slot by slot."""
ROLL_WINDOW_MS = 2 * 86_400 * 1000
"""RocketMQ's ``timerRollWindowSlot`` (2 days): a timer due further ahead waits in the slot this far
ahead, then its message is stored again in ``rmq_sys_wheel_timer`` (``TIMER_ROLL_TIMES`` + 1) and
enqueued anew, so its body is never older than the commit log's retention (72 h by default)."""
RETRY_S = 0.1
LOOKAHEAD_MS = 10_000
"""The furthest ahead an idle dequeue looks for the next used slot (one wheel read), so the longest
it sleeps when nothing is due (:meth:`TimerMessageStore.dequeue`); an enqueue into an earlier slot
wakes it (:attr:`TimerMessageStore.wake_needed`). Bounds the lateness after a wall-clock jump."""
"""Seconds before a put the store refused for a passing reason is tried again."""
ENQUEUE_BATCH = 1024
"""Consume-queue entries read and appended in one :meth:`TimerMessageStore.enqueue` call."""
_REBUILD_FLUSH_SLOTS = 65_536
"""Slots a rebuild keeps in memory before writing them to the wheel."""
_PERMANENT = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})
_REAL_TOPIC = MessageConst.PROPERTY_REAL_TOPIC
_REAL_QID = MessageConst.PROPERTY_REAL_QUEUE_ID


def convert_message(msg: MessageExt, now_ms: int) -> MessageExtBrokerInner:
    """The message put back to its real topic and queue when its time comes.

    Mirrors ``TimerMessageStore.convert`` / ``convertMessage``: topic and queue from ``REAL_TOPIC`` /
    ``REAL_QID`` (both removed), ``TIMER_ENQUEUE_MS`` (its store time in the timer topic) and
    ``TIMER_DEQUEUE_MS`` (``now_ms``) added; ``TIMER_OUT_MS`` and the original timer property kept
    (the store does not schedule it again); body (as stored), flag, born time and host, sys flag and
    reconsume times kept; tags code from ``TAGS``.

    Raises:
        ValueError: ``REAL_QID`` is not an integer.
    """
    props = dict(msg.properties)
    topic = props.pop(_REAL_TOPIC, msg.topic)
    queue_id = int(props.pop(_REAL_QID, "0") or 0)
    props[MessageConst.PROPERTY_TIMER_ENQUEUE_MS] = str(msg.store_timestamp)
    props[MessageConst.PROPERTY_TIMER_DEQUEUE_MS] = str(now_ms)
    return MessageExtBrokerInner.copy_of(msg, topic, props, queue_id=queue_id)


def roll_message(msg: MessageExt) -> MessageExtBrokerInner:
    """The copy of a timer message stored again in ``rmq_sys_wheel_timer`` when it is rolled: the
    same message and properties (``REAL_*``, ``TIMER_OUT_MS``), ``TIMER_ROLL_TIMES`` + 1. Mirrors
    ``TimerMessageStore.convert(..., needRoll=true)``.

    Raises:
        ValueError: ``TIMER_ROLL_TIMES`` is not an integer.
    """
    props = dict(msg.properties)
    props[MessageConst.PROPERTY_TIMER_ROLL_TIMES] = str(
        int(props.get(MessageConst.PROPERTY_TIMER_ROLL_TIMES, "0")) + 1
    )
    return MessageExtBrokerInner.copy_of(msg, TIMER_TOPIC, props)


class TimerMessageStore:
    """The timer log + wheel of one message store, and their enqueue / dequeue.

    Args:
        store: the loaded :class:`~tidemq.store.message_store.MessageStore` (its config gives
            ``timer_precision_ms``, ``timer_max_delay_sec``, ``mapped_file_size_timer_log``).
        root: directory of the timer files (default ``<store root>/timer``: ``timerlog/``,
            ``timerwheel``, ``timercheck.json``).
        roll_window_ms: see :data:`ROLL_WINDOW_MS` (tests make it short).

    Attributes:
        read_time_ms: every slot before this time is delivered (a slot start).
        enqueue_offset: the next ``rmq_sys_wheel_timer`` queue offset to enqueue.
        delivered, skipped, rolled, enqueued, cancelled: counts since start.
        cancels: keys of the pending cancellations (:class:`~.cancels.TimerCancels`).
        pending: timers in the log not yet delivered (kept in the checkpoint; exact after a rebuild).
        clock_ms: wall clock in ms (tests replace it).
        next_call_ms: when the last :meth:`dequeue` asked to be called again (wall clock, ms).
        wake_needed: an enqueue linked a timer due before :attr:`next_call_ms` (the caller wakes its
            dequeue early and :meth:`dequeue` clears it).

    Synchronous and single-threaded (the broker's timer service calls it from its event loop;
    :meth:`persist` and :meth:`clean_segments` may run in a worker thread). Call :meth:`load` first.
    """

    def __init__(
        self, store: MessageStore, root: str | Path | None = None, *, roll_window_ms: int = ROLL_WINDOW_MS
    ) -> None:
        cfg = store.config
        self.store = store
        self.root = Path(root) if root is not None else store.root / "timer"
        self.precision_ms = cfg.timer_precision_ms
        self.max_delay_ms = cfg.timer_max_delay_sec * 1000
        self.horizon_ms = min(self.max_delay_ms, roll_window_ms)
        """The furthest ahead a record is linked (further: rolled, see :data:`ROLL_WINDOW_MS`)."""
        slots = -(-(self.horizon_ms + BLANK_MS) // self.precision_ms)
        self.log = TimerLog(self.root / "timerlog", cfg.mapped_file_size_timer_log)
        self.wheel = TimerWheel(self.root / "timerwheel", slots, self.precision_ms)
        self.window_ms = slots * self.precision_ms
        self.checkpoint_path = self.root / "timercheck.json"
        self.clock_ms: Callable[[], int] = now_ms
        self.read_time_ms = 0
        self.enqueue_offset = 0
        self.delivered = self.skipped = self.rolled = self.enqueued = self.cancelled = 0
        self.pending = 0
        self.cancels = TimerCancels()
        self._pass: list[int] | None = None
        """The slot being delivered: ``[slot_ms, head, next index into _todo]`` (``head``: the
        chain's last record when ``_todo`` was collected)."""
        self._todo = array("q")
        """Positions of the pending records of that slot, oldest first: delivered in store order."""
        self._retry_logged = 0
        self.next_call_ms = 0
        self.wake_needed = False
        self._low_pos = 0
        """No PENDING record before this log position (:meth:`min_needed_offset` moves it on)."""

    # ------------------------------------------------------------------------- lifecycle

    def _queue(self) -> ConsumeQueue | None:
        return self.store.find_consume_queue(TIMER_TOPIC, 0)

    def load(self) -> None:
        """Open the files; rebuild the wheel when it cannot be trusted (see the module docstring).

        Raises:
            StoreError: a file cannot be opened.
        """
        self.log.load()
        data = load_json(self.checkpoint_path)
        now = self.clock_ms()
        if isinstance(data, dict):
            self.read_time_ms = int(data.get("readTimeMs", 0))
            self.enqueue_offset = int(data.get("enqueueOffset", 0))
            self.pending = int(data.get("pending", 0))
            self.cancels.restore(data.get("cancels"))
        lag = now - self.read_time_ms
        why = None
        if self.store.recovered_abnormally:
            why = "the last run did not shut down cleanly"
        elif self.wheel.resized:
            why = "the wheel size changed (timer_precision_ms or timer_max_delay_sec)"
        elif data is None and self.log.end > self.log.start:
            why = f"{self.checkpoint_path.name} is missing"
        elif self.read_time_ms and lag > BLANK_MS:
            why = f"the timers were last read {lag // 1000} s ago"
        if why is not None:
            log.warning("timer wheel: rebuilding from the timer log (%s)", why)
            self.rebuild()
        elif not self.read_time_ms:
            self.read_time_ms = self.wheel.slot_time(now)
        cq = self._queue()
        if cq is not None:
            low, high = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            self.enqueue_offset = min(max(self.enqueue_offset, low), high)
            self._note_tail_markers(cq, high)
        log.info(
            "timer store loaded: read time %d, enqueue offset %d, timer log [%d, %d)",
            self.read_time_ms,
            self.enqueue_offset,
            self.log.start,
            self.log.end,
        )

    def rebuild(self) -> int:
        """Empty the wheel and link every PENDING record of the log into it again; returns how many.

        Overdue records go into the current slot (delivered at once); a record whose message the
        store lost in its own recovery (queue offset past the timer queue's end) is SKIPPED, and
        enqueueing resumes after the last message the log holds.
        """
        self.wheel.reset()
        self.cancels.clear()
        self._pass = None
        self._todo = array("q")
        now_slot = self.wheel.slot_time(self.clock_ms())
        self.read_time_ms = now_slot
        cq = self._queue()
        cq_max = cq.get_max_offset_in_queue() if cq is not None else 0
        slots: dict[int, list[int]] = {}
        last_cq = self.enqueue_offset - 1
        linked = 0
        prec = self.precision_ms
        highest = now_slot + self.horizon_ms - self.horizon_ms % prec
        for rec in self.log.scan(self.log.start):
            if isinstance(rec, int):
                log.warning("timer log: damaged record at %d skipped", rec)
                continue
            pos, state, prev, deliver, _, _, cq_offset = rec
            if cq_offset > last_cq:
                last_cq = cq_offset
            if state != PENDING:
                continue
            if cq_offset >= cq_max:
                self.log.set_state(pos, SKIPPED)
                continue
            if is_marker(deliver):
                deliver = due_of(deliver)
                self._note_marker(rec.phy, deliver)
            slot_ms = min(max(deliver - deliver % prec, now_slot), highest)  # _target_slot, inlined
            cur = slots.get(slot_ms)
            if cur is None:
                old = self.wheel.get(slot_ms)
                cur = slots[slot_ms] = (
                    [old.first_pos, old.last_pos, old.num] if old is not None else [pos, -1, 0]
                )
                if len(slots) >= _REBUILD_FLUSH_SLOTS:
                    self._write_slots(slots)
                    slots[slot_ms] = cur
            if prev != cur[1]:
                self.log.set_prev(pos, cur[1])
            cur[1] = pos
            cur[2] += 1
            linked += 1
        self._write_slots(slots)
        self.enqueue_offset = min(last_cq + 1, cq_max)
        self.pending = linked
        log.warning(
            "timer wheel rebuilt: %d pending timer(s), enqueue resumes at %d", linked, self.enqueue_offset
        )
        return linked

    def _write_slots(self, slots: dict[int, list[int]]) -> None:
        for slot_ms, (first, last, num) in slots.items():
            self.wheel.put(slot_ms, first, last, num)
        slots.clear()

    def checkpoint(self) -> dict[str, object]:
        """What :meth:`persist` writes (take it on the owning thread)."""
        return {
            "readTimeMs": self.read_time_ms,
            "enqueueOffset": self.enqueue_offset,
            "pending": self.pending,
            "cancels": self.cancels.snapshot(),
        }

    def persist(self, checkpoint: dict[str, object] | None = None) -> None:
        """Sync the log and the wheel, then write ``timercheck.json`` (atomically, ``.bak`` kept).

        Raises:
            StoreError / OSError: a file cannot be written.
        """
        data = checkpoint if checkpoint is not None else self.checkpoint()
        self.log.flush()
        self.wheel.flush()
        atomic_write_json(self.checkpoint_path, data)

    def shutdown(self) -> None:
        """Persist and close the files."""
        try:
            self.persist()
        finally:
            self.log.close()
            self.wheel.close()

    def min_needed_offset(self) -> int | None:
        """The commit-log offset of the oldest pending timer's message (None: none pending): the
        commit log's retention keeps everything from there unless forced (``store/retention.py``'s
        ``offset_providers``). Records are in commit-log order, so it is the first PENDING record's;
        the scan goes on from where the last call stopped. May run in a worker thread."""
        start = max(self._low_pos, self.log.start)
        for rec in self.log.scan(start):
            if not isinstance(rec, int) and rec.state == PENDING:
                self._low_pos = rec.pos
                return rec.phy
        self._low_pos = max(start, self.log.end)
        return None

    def clean_segments(self) -> int:
        """Delete timer-log segments whose every record is done; returns how many."""
        return self.log.delete_delivered_segments()

    # ------------------------------------------------------------------------- enqueue

    def _target_slot(self, deliver_ms: int, read_time_ms: int) -> int:
        """The slot a timer due at ``deliver_ms`` goes into: its own, the current one when overdue,
        or the one :attr:`horizon_ms` ahead when further (it is rolled when that slot comes)."""
        slot_ms = max(self.wheel.slot_time(deliver_ms), read_time_ms)
        return min(slot_ms, read_time_ms + self.horizon_ms - self.horizon_ms % self.precision_ms)

    def enqueue(self, max_count: int = ENQUEUE_BATCH) -> int:
        """Move up to ``max_count`` new timer-topic messages into the log and the wheel; returns how
        many entries were consumed (0: nothing new, or the wheel is full where the next one goes).

        Raises:
            StoreError / OSError: a timer file cannot be written (nothing is lost: the entries are
                read again next time).
        """
        cq = self._queue()
        if cq is None:
            return 0
        offset = max(self.enqueue_offset, cq.get_min_offset_in_queue())
        data = cq.get_index_buffer(offset, max_count * 20)
        if not data:
            if offset < cq.get_max_offset_in_queue():  # at a file's end: go on in the next file
                self.enqueue_offset = cq.roll_next_file(offset)
            return 0
        read_time = self.read_time_ms
        pos = self.log.end
        room = self.log.room()  # one batch never spans segments: its append is one write
        data = data[: min(len(data), room // RECORD_SIZE * 20)] if room >= RECORD_SIZE else data[:0]
        touched: dict[int, list[int]] = {}
        out: list[bytes] = []
        n = 0
        for unit in iter_units(data):
            if unit.is_valid:
                code = unit.tags_code
                if is_marker(code):  # a cancellation (rare): its key, from the message
                    self._note_marker(unit.commit_log_offset, due_of(code))
                slot_ms = self._target_slot(due_of(code), read_time)
                cur = touched.get(slot_ms)
                if cur is None:
                    raw = self.wheel.raw(slot_ms)
                    if raw.slot_ms == slot_ms:
                        cur = [raw.first_pos, raw.last_pos, raw.num]
                    elif raw.num and raw.slot_ms >= read_time:  # an older slot not yet delivered
                        break
                    else:
                        cur = [pos, -1, 0]
                out.append(pack_record(cur[1], code, unit.commit_log_offset, unit.size, offset + n))
                cur[1] = pos
                cur[2] += 1
                touched[slot_ms] = cur
                pos += RECORD_SIZE
            n += 1
        if out:
            self._link(pos - RECORD_SIZE * len(out), b"".join(out), touched)
            self.enqueued += len(out)
            self.pending += len(out)
            if min(touched) + self.precision_ms < self.next_call_ms:  # due before the dequeue wakes
                self.wake_needed = True
        self.enqueue_offset = offset + n
        return n

    def _note_tail_markers(self, cq: ConsumeQueue, high: int) -> None:
        """Note the cancellations stored but not enqueued yet (the consume queue from
        :attr:`enqueue_offset`, tags codes only), so a timer they cancel that is overdue after a
        restart is not delivered before enqueue reaches them."""
        offset = self.enqueue_offset
        while offset < high:
            data = cq.get_index_buffer(offset, ENQUEUE_BATCH * 20 * 16)
            if not data:
                offset = cq.roll_next_file(offset)
                continue
            for unit in iter_units(data):
                if unit.is_valid and is_marker(unit.tags_code):
                    self._note_marker(unit.commit_log_offset, due_of(unit.tags_code))
            offset += len(data) // 20

    def _note_marker(self, phy: int, due_ms: int) -> None:
        """Add the key of the cancellation marker stored at commit-log offset ``phy`` to :attr:`cancels`."""
        marker = self.store.lookup.look_message_by_offset(phy)
        if marker is None or self.cancels.add_marker(marker, due_ms) is None:
            log.warning("timer log: no cancellation key in the marker at commit-log offset %d", phy)

    def _link(self, start: int, records: bytes, touched: dict[int, list[int]]) -> None:
        """Append ``records`` at ``start`` and write the slots they join, all or nothing: when a write
        fails (a full disk on these sparse files), the slots written are put back and the records
        zeroed, so nothing half-linked stays (it would come twice after a rebuild) and the same
        entries are enqueued again later.

        Raises:
            StoreError / OSError: the write that failed.
        """
        done: list[tuple[int, bytes]] = []
        try:
            self.log.append(records)
            for slot_ms, (first, last, num) in touched.items():
                old = self.wheel.raw_bytes(slot_ms)
                self.wheel.put(slot_ms, first, last, num)
                done.append((slot_ms, old))
        except BaseException:
            for slot_ms, old in reversed(done):
                self.wheel.put_raw_bytes(slot_ms, old)  # pages just written: no new space needed
            self.log.truncate(start)
            raise

    # ------------------------------------------------------------------------- dequeue

    def dequeue(self, max_puts: int = 256) -> float:
        """Deliver what is due, at most ``max_puts`` puts; returns the seconds to wait before the
        next call (0.0: more is due now; :data:`RETRY_S` after a put to retry; up to
        :data:`LOOKAHEAD_MS` when no slot is used before then, unless :attr:`wake_needed` turns true).
        Empty slots are skipped a wheel read at a time (:meth:`~.wheel.TimerWheel.next_used`).

        Raises:
            StoreError / OSError: the timer log cannot be read or written.
        """
        now = self.clock_ms()
        self.wake_needed = False
        prec = self.precision_ms
        puts = 0
        while True:
            t = self.read_time_ms
            if t + prec > now:
                return self._wait(t, now)
            walk = self._pass
            if walk is None or walk[0] != t:
                slot = self.wheel.get(t)
                if slot is None:
                    nxt, end = self.wheel.next_used(t + prec, self.wheel.slot_time(now))
                    self.read_time_ms = nxt if nxt is not None else max(end, t + prec)
                    continue
                walk = self._start_pass(t, slot.last_pos, -1)
            todo = self._todo
            while walk[2] < len(todo):
                if puts >= max_puts:
                    self.next_call_ms = now
                    return 0.0
                rec = self.log.read(todo[walk[2]])
                if rec is not None and rec.state == PENDING:
                    puts += 1
                    if not self._handle(rec, t, now):
                        self.next_call_ms = now + int(RETRY_S * 1000)
                        return RETRY_S
                walk[2] += 1
            slot = self.wheel.get(t)
            if slot is not None and slot.last_pos != walk[1]:  # linked while we walked: those next
                self._start_pass(t, slot.last_pos, walk[1])
                continue
            self._pass = None
            self._todo = array("q")
            self.read_time_ms = t + prec

    def _wait(self, t: int, now: int) -> float:
        """Seconds until the next call when slot ``t`` (the current one) is not over: its end when
        it is used, else the end of the next used slot within :data:`LOOKAHEAD_MS`."""
        prec = self.precision_ms
        wake = t + prec
        if self._pass is None and self.wheel.get(t) is None:
            nxt, end = self.wheel.next_used(t + prec, t + LOOKAHEAD_MS)
            wake = nxt + prec if nxt is not None else max(end, wake)
        self.next_call_ms = wake
        return (wake - now) / 1000.0

    def read_behind_ms(self) -> int:
        """How long the delivery is behind the clock (ms): 0 while the dequeue waits for a time it
        knows nothing is due before (RocketMQ's ``timerReadBehind``, in ms)."""
        now = self.clock_ms()
        if self._pass is None and now < self.next_call_ms:
            return 0
        return max(now - self.read_time_ms - self.precision_ms, 0)

    def backlog(self) -> int:
        """Timer-topic messages stored but not enqueued yet (RocketMQ's ``timerOffsetBehind``)."""
        cq = self._queue() if self.store.running else None
        return max(cq.get_max_offset_in_queue() - self.enqueue_offset, 0) if cq is not None else 0

    def _start_pass(self, slot_ms: int, head: int, stop: int) -> list[int]:
        """Collect the PENDING records of a slot's chain from ``head`` down to (not including)
        ``stop``, oldest first (8 bytes per record in memory, for this slot only)."""
        todo = array("q")
        pos = head
        while pos > stop:
            rec = self.log.read(pos)
            if rec is None:  # a deleted segment: everything older is done
                break
            if rec.state == PENDING:
                todo.append(pos)
            pos = rec.prev_pos
        todo.reverse()
        self._todo = todo
        walk = self._pass = [slot_ms, head, 0]
        return walk

    def _handle(self, rec: TimerRecord, slot_ms: int, now: int) -> bool:
        """Deliver one pending record of the slot being walked, or roll it when it is due after its
        slot (beyond the roll window, or the clock set back); False: the store refused, retry later."""
        due = due_of(rec.deliver_ms)
        roll = due >= slot_ms + self.precision_ms and due > now
        msg = self.store.lookup.look_message_by_offset(rec.phy)
        if msg is None or msg.topic != TIMER_TOPIC or _REAL_TOPIC not in msg.properties:
            log.warning(
                "timer log: no timer message at commit-log offset %d (queue offset %d); skipped",
                rec.phy,
                rec.cq_offset,
            )
            self._done(rec, SKIPPED)
            return True
        marker = is_marker(rec.deliver_ms)
        if marker and not roll:  # a cancellation's own time: it is done, nothing to deliver
            self.cancels.marker_done(msg, due)
            self.log.set_state(rec.pos, DELIVERED)
            self.pending = max(self.pending - 1, 0)
            return True
        if not marker and self.cancels.cancels(msg):
            log.info("timer message %s for %s cancelled", msg.msg_id, msg.properties.get(_REAL_TOPIC))
            self._done(rec, CANCELLED)
            return True
        try:
            inner = roll_message(msg) if roll else convert_message(msg, now)
        except ValueError:
            inner = None
        result = self.store.put_message(inner) if inner is not None else None
        if result is not None and result.status is PutMessageStatus.PUT_OK:
            self._done(rec, ROLLED if roll else DELIVERED)
            self._retry_logged = 0
            return True
        if result is None or result.status in _PERMANENT:
            log.warning(
                "timer message %s for %s cannot be delivered (%s); skipped, it stays readable at "
                "commit-log offset %d",
                msg.msg_id,
                msg.properties.get(_REAL_TOPIC),
                "bad REAL_QID" if result is None else f"{result.status.value} {result.remark or ''}",
                rec.phy,
            )
            self._done(rec, SKIPPED)
            return True
        if self._retry_logged % 50 == 0:  # one line per ~5 s of retrying
            log.warning(
                "timer message %s: the store refused the delivery (%s %s); retrying",
                msg.msg_id,
                result.status.value,
                result.remark or "",
            )
        self._retry_logged += 1
        return False

    def _done(self, rec: TimerRecord, state: int) -> None:
        self.log.set_state(rec.pos, state)
        self.pending = max(self.pending - 1, 0)
        if state == DELIVERED:
            self.delivered += 1
        elif state == ROLLED:  # its copy is enqueued again (and counted pending then)
            self.rolled += 1
        elif state == CANCELLED:
            self.cancelled += 1
        else:
            self.skipped += 1
