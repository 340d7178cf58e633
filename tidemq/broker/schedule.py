"""Delay levels: delivery of messages parked in ``SCHEDULE_TOPIC_XXXX``.

Mirrors RocketMQ's ``ScheduleMessageService`` (protocol.md §7.10).

The store (``MessageStore.put_messages``) stores a message with delay level L > 0 (clamped to the
highest level, 18 by default) in ``SCHEDULE_TOPIC_XXXX`` queue ``L - 1`` with its real destination
in the ``REAL_TOPIC`` / ``REAL_QID`` properties and, as consume-queue tags code, its delivery time
(ms). :class:`ScheduleMessageService` runs one timer per level: it reads queue ``L - 1`` from the
level's offset, re-puts every due message to its real topic and queue (:func:`restore_real_message`)
and then sleeps until the next entry is due or :meth:`ScheduleMessageService.notify_message_arriving`
reports a new arrival. Progress (``{level: next queue offset}``) is kept in ``delayOffset.json``
(atomic write + ``.bak``), persisted every ``flush_delay_offset_interval`` and at shutdown, so
delivery resumes after a restart (at-least-once: a crash between a delivery and the next persist
re-delivers that message).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from tidemq.broker.tasks import cancel_and_wait, set_threadsafe
from tidemq.clock import now_ms
from tidemq.protocol.message import MessageConst
from tidemq.store.config_file import atomic_write_json, load_json
from tidemq.store.consume_queue import CqUnit
from tidemq.store.message_store import SCHEDULE_TOPIC, MessageStore
from tidemq.store.results import MessageExtBrokerInner, PutMessageStatus

__all__ = [
    "ScheduleMessageService",
    "compute_deliver_timestamp",
    "correct_deliver_timestamp",
    "restore_real_message",
]

log = logging.getLogger(__name__)

FIRST_DELAY_S = 1.0
"""Java's ``FIRST_DELAY_TIME``: the first scan of each level happens this long after start."""
RETRY_ON_ERROR_S = 0.1
"""Java's ``DELAY_FOR_A_PERIOD``: a failed put is retried after this long."""
DISK_FULL_RETRY_S = 0.5
"""A due message the store refused for a full disk is tried again this long after (and at once when
the disk becomes writable: ``tidemq/broker/disk_retention.py`` wakes every level). It never counts
towards :data:`MAX_DELIVERY_ATTEMPTS`: it waits as long as the disk stays full, and nothing is lost."""
_SKIP: Final = "skip"
"""A step of :meth:`ScheduleMessageService._deliver`: the entry is passed over (not delivered)."""
MAX_DELIVER_PER_ROUND = 256
"""Messages delivered in one go before yielding to the event loop."""
MAX_DELIVERY_ATTEMPTS = 100
"""Failed puts of one message (about 10 s at ``RETRY_ON_ERROR_S``) before it is moved aside."""
UNDELIVERABLE_TOPIC = "rmq_sys_SCHEDULE_UNDELIVERABLE"
"""Where a due message the store refuses is moved (queue 0; ``REAL_TOPIC`` / ``REAL_QID`` kept),
so one message never holds back the rest of its delay level. A system topic (``rmq_sys_``)."""
_PERMANENT = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})
"""Put failures that retrying cannot fix: the message is moved aside at once."""


def compute_deliver_timestamp(delay_level: int, store_timestamp_ms: int, delay_table: dict[int, int]) -> int:
    """When a message stored at ``store_timestamp_ms`` with ``delay_level`` is due (ms)."""
    delay = delay_table.get(delay_level)
    if delay is None:
        return store_timestamp_ms + 1000
    return store_timestamp_ms + delay


def correct_deliver_timestamp(now_ms: int, deliver_timestamp_ms: int, delay_ms: int) -> int:
    """A due time further away than one full delay (clock moved back, shorter table) counts as now.

    Mirrors ``DeliverDelayedMessageTimerTask.correctDeliverTimestamp``.
    """
    if deliver_timestamp_ms > now_ms + delay_ms:
        return now_ms
    return deliver_timestamp_ms


def restore_real_message(msg: Any) -> MessageExtBrokerInner:
    """The message a delivery service puts back when a scheduled message is due.

    ``msg`` is a :class:`~tidemq.protocol.message.MessageExt` read from the commit log (body left
    as stored, so ``sys_flag``'s compression bit still matches it).

    Mirrors ``ScheduleMessageService.messageTimeup``: real topic and queue from ``REAL_TOPIC`` /
    ``REAL_QID``, ``DELAY`` cleared, tags code recomputed from ``TAGS``; body, flag, properties,
    born time/host and reconsume times kept.
    """
    props = dict(msg.properties)
    topic = props.pop(MessageConst.PROPERTY_REAL_TOPIC, msg.topic)
    queue_id = int(props.pop(MessageConst.PROPERTY_REAL_QUEUE_ID, "0") or 0)
    props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
    return MessageExtBrokerInner.copy_of(msg, topic, props, queue_id=queue_id)


class ScheduleMessageService:
    """Delivers delayed messages when due. Mirrors RocketMQ's ``ScheduleMessageService``.

    Args:
        store: the loaded message store (delayed messages live in its ``SCHEDULE_TOPIC_XXXX``).
        delay_table: ``{level: delay in ms}`` (``MessageStoreConfig.delay_level_table()``).
        offset_path: the ``delayOffset.json`` file (``<store root>/config/delayOffset.json``).
        flush_delay_offset_interval: seconds between persists of the offsets (Java: 10 s).
        on_delivered: optional callback ``(topic, queue_id)`` after each delivery (tests, stats).

    Attributes:
        offset_table: ``{level: next queue offset to deliver}`` (queue ``level - 1``).

    Runs on the broker's event loop: :meth:`start` / :meth:`shutdown` from it,
    :meth:`notify_message_arriving` from any thread. Store I/O is synchronous and short (one
    consume-queue unit and one record per message), like the send path's puts.

    Raises (from :meth:`load` / :meth:`start`):
        StoreError: ``delayOffset.json`` and its ``.bak`` are both corrupt.
    """

    def __init__(
        self,
        store: MessageStore,
        delay_table: dict[int, int],
        offset_path: str | Path,
        *,
        flush_delay_offset_interval: float = 10.0,
        on_delivered: Callable[[str, int], None] | None = None,
    ) -> None:
        self.store = store
        self.delay_table = dict(delay_table)
        self.offset_path = Path(offset_path)
        self.flush_delay_offset_interval = flush_delay_offset_interval
        self.on_delivered = on_delivered
        self.offset_table: dict[int, int] = {}
        self.clock_ms: Callable[[], int] = now_ms
        self.delivered = 0
        self._events: dict[int, asyncio.Event] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._started = False
        self._dirty = False
        self._failures: dict[int, tuple[int, int]] = {}
        """``{level: (queue offset, failed attempts)}`` of the message a level is stuck on."""
        self.moved_aside = 0
        self.disk_full_waits = 0
        """Delivery attempts refused for a full disk (the message waited, nothing was lost)."""
        """Due messages moved to :data:`UNDELIVERABLE_TOPIC` (or skipped) because they could not be delivered.
        """

    # -- persistence ----------------------------------------------------------------------------

    def load(self) -> None:
        """Read ``delayOffset.json`` (Java's ``{"offsetTable": {1: 5, ...}}`` shape is accepted too),
        then clamp each offset into its queue's ``[min, max]`` (``correctDelayOffset``)."""
        data = load_json(self.offset_path)
        table: dict[int, int] = {}
        if isinstance(data, dict):
            raw = data.get("offsetTable", {})
            if isinstance(raw, dict):
                for key, value in raw.items():
                    try:
                        table[int(key)] = int(value)
                    except (TypeError, ValueError):
                        log.warning("%s: ignoring bad entry %r: %r", self.offset_path, key, value)
        for level in self.delay_table:
            offset = table.get(level, 0)
            qid = level - 1
            low = self.store.get_min_offset_in_queue(SCHEDULE_TOPIC, qid)
            high = self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, qid)
            corrected = min(max(offset, low), high)
            if corrected != offset:
                log.warning(
                    "delay level %d: offset %d corrected to %d (queue %d..%d)",
                    level,
                    offset,
                    corrected,
                    low,
                    high,
                )
            if corrected or level in table:
                table[level] = corrected
        self.offset_table = table

    def encode(self) -> dict[str, Any]:
        """The ``delayOffset.json`` content: ``{"offsetTable": {"<level>": offset}}``."""
        return {"offsetTable": {str(k): v for k, v in sorted(self.offset_table.items())}}

    def persist(self) -> None:
        """Write ``delayOffset.json`` atomically (previous copy kept as ``.bak``).

        Raises:
            StoreError: the file cannot be written.
        """
        self._dirty = False
        atomic_write_json(self.offset_path, self.encode())

    def retention_floors(self) -> dict[tuple[str, int], dict[str, int]]:
        """How far each level delivered, for the store's retention: ``{(SCHEDULE_TOPIC_XXXX,
        level - 1): {"delay level L": next queue offset}}`` (a delayed message is never deleted for
        space before it is delivered). Thread-safe (reads a copy of :attr:`offset_table`)."""
        table = dict(self.offset_table)
        return {
            (SCHEDULE_TOPIC, level - 1): {f"delay level {level}": table.get(level, 0)}
            for level in self.delay_table
        }

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the offsets and start one timer per delay level plus the persist timer."""
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.load()
        self._started = True
        for level in sorted(self.delay_table):
            self._events[level] = asyncio.Event()
            self._tasks.append(self._loop.create_task(self._run_level(level), name=f"schedule-level-{level}"))
        self._tasks.append(self._loop.create_task(self._run_persist(), name="schedule-persist"))
        log.info("schedule message service started: %d delay levels", len(self.delay_table))

    async def shutdown(self) -> None:
        """Stop the timers and persist the offsets."""
        if not self._started:
            return
        self._started = False
        await cancel_and_wait(self._tasks)
        try:
            self.persist()
        except Exception:
            log.exception("persisting %s at shutdown failed", self.offset_path)

    def notify_message_arriving(self, queue_id: int) -> None:
        """A message was stored in ``SCHEDULE_TOPIC_XXXX`` queue ``queue_id``: re-check its level now.

        Thread-safe (the store may call it from an executor thread).
        """
        event = self._events.get(queue_id + 1)
        loop = self._loop
        if event is None or loop is None or not self._started:
            return
        set_threadsafe(event, loop, self._loop_thread)

    def wakeup(self) -> None:
        """Re-check every level now."""
        for level in self.delay_table:
            self.notify_message_arriving(level - 1)

    # -- delivery -------------------------------------------------------------------------------

    async def _run_level(self, level: int) -> None:
        event = self._events[level]
        await self._wait(event, FIRST_DELAY_S)
        while self._started:
            event.clear()
            try:
                wait = self.deliver_due_messages(level)
            except Exception:
                log.exception("delivering delay level %d failed; retrying", level)
                wait = RETRY_ON_ERROR_S
            if wait == 0.0:
                await asyncio.sleep(0)  # more due work: let other tasks run, then go on
                continue
            await self._wait(event, wait)

    @staticmethod
    async def _wait(event: asyncio.Event, seconds: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)

    def deliver_due_messages(self, level: int, max_messages: int = MAX_DELIVER_PER_ROUND) -> float | None:
        """Deliver the due messages of ``level`` (at most ``max_messages``) in queue order.

        Mirrors ``DeliverDelayedMessageTimerTask.executeOnTimeup``.

        Returns:
            0.0 when more due messages remain, the seconds until the next entry is due, None when
            the queue is drained (wait for an arrival), or ``RETRY_ON_ERROR_S`` after a failed put.
        """
        qid = level - 1
        store = self.store
        cq = store.find_consume_queue(SCHEDULE_TOPIC, qid)
        if cq is None:
            return None
        delay_ms = self.delay_table.get(level, 1000)
        offset = max(self.offset_table.get(level, 0), cq.get_min_offset_in_queue())
        end = cq.get_max_offset_in_queue()
        done = 0
        try:
            while offset < end:
                if done >= max_messages:
                    return 0.0
                unit = cq.get_unit(offset)
                step = (
                    _SKIP
                    if unit is None or not unit.is_valid
                    else self._deliver(level, offset, unit, delay_ms)
                )
                if isinstance(step, float):
                    return step
                offset += 1
                if isinstance(step, MessageExtBrokerInner):
                    done += 1
                    self.delivered += 1
                    if self.on_delivered is not None:
                        self.on_delivered(step.topic, step.queue_id)
            return None
        finally:
            if offset != self.offset_table.get(level, 0):
                self.offset_table[level] = offset
                self._dirty = True

    def _deliver(
        self, level: int, offset: int, unit: CqUnit, delay_ms: int
    ) -> MessageExtBrokerInner | str | float:
        """One valid entry of ``level``'s queue at ``offset``: the message put to its real topic,
        ``_SKIP`` (gone, no ``REAL_TOPIC``, or moved aside after failing for good), or the seconds to
        wait before it is tried again (not due yet, a full disk, a failed put; its offset stays)."""
        now = self.clock_ms()
        due = correct_deliver_timestamp(now, unit.tags_code, delay_ms)
        if due > now:
            return (due - now) / 1000.0
        msg = self.store.lookup.look_message_by_offset(unit.commit_log_offset)
        if msg is None:
            log.warning(
                "delay level %d: no message at commit-log offset %d (queue offset %d); skipped",
                level,
                unit.commit_log_offset,
                offset,
            )
            return _SKIP
        inner = restore_real_message(msg)
        if MessageConst.PROPERTY_REAL_TOPIC not in msg.properties:
            log.warning("delay level %d: message %s has no REAL_TOPIC; skipped", level, msg.msg_id)
            return _SKIP
        result = self.store.put_message(inner)
        if result.status is PutMessageStatus.DISK_FULL:
            # as ScheduleMessageService: the message waits for the store, its offset stays
            # (persisted: a restart retries it too); the disk guard logs the full disk once
            self.disk_full_waits += 1
            return DISK_FULL_RETRY_S
        if result.status is not PutMessageStatus.PUT_OK:
            if not self._give_up(level, offset, result.status):
                attempts = self._failures[level][1]
                if attempts == 1 or attempts % 20 == 0:  # not one line per 100 ms retry
                    log.warning(
                        "delay level %d: delivering %s to %s failed (%s %s); retrying (attempt %d of %d)",
                        level,
                        msg.msg_id,
                        inner.topic,
                        result.status.value,
                        result.remark or "",
                        attempts,
                        MAX_DELIVERY_ATTEMPTS,
                    )
                return RETRY_ON_ERROR_S
            self.move_aside(level, offset, unit.commit_log_offset, msg, inner, result.remark or "")
            return _SKIP
        self._failures.pop(level, None)
        return inner

    def _give_up(self, level: int, offset: int, status: PutMessageStatus) -> bool:
        """Count a failed put of ``offset``; True when it cannot succeed or failed too often."""
        if status in _PERMANENT:
            self._failures.pop(level, None)
            return True
        at, attempts = self._failures.get(level, (offset, 0))
        attempts = attempts + 1 if at == offset else 1
        if attempts >= MAX_DELIVERY_ATTEMPTS:
            self._failures.pop(level, None)
            return True
        self._failures[level] = (offset, attempts)
        return False

    def move_aside(
        self,
        level: int,
        offset: int,
        commit_log_offset: int,
        msg: Any,
        inner: MessageExtBrokerInner,
        why: str,
    ) -> None:
        """Put an undeliverable due message into :data:`UNDELIVERABLE_TOPIC` so its level goes on.

        One WARNING line names the message, its destination, the reason and where it went (or, when
        even that put fails, its commit-log offset, where it stays readable).
        """
        self.moved_aside += 1
        props = dict(inner.properties)
        props[MessageConst.PROPERTY_REAL_TOPIC] = inner.topic
        props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(inner.queue_id)
        aside = MessageExtBrokerInner(
            UNDELIVERABLE_TOPIC,
            inner.body,
            flag=inner.flag,
            properties=props,
            queue_id=0,
            sys_flag=inner.sys_flag,
            born_timestamp=inner.born_timestamp,
            born_host=inner.born_host,
            reconsume_times=inner.reconsume_times,
            tags_code=inner.tags_code,
        )
        result = self.store.put_message(aside)
        destination = f"{inner.topic[:64]}{'...' if len(inner.topic) > 64 else ''} queue {inner.queue_id}"
        if result.status is PutMessageStatus.PUT_OK and result.append_result is not None:
            log.warning(
                "delay level %d: message %s for %s cannot be delivered (%s); moved aside to %s queue 0 "
                "offset %d, the level goes on",
                level,
                msg.msg_id,
                destination,
                why,
                UNDELIVERABLE_TOPIC,
                result.append_result.logics_offset,
            )
        else:
            log.warning(
                "delay level %d: message %s for %s cannot be delivered (%s) nor moved aside (%s); "
                "skipped, it stays readable at commit-log offset %d (%s queue %d offset %d)",
                level,
                msg.msg_id,
                destination,
                why,
                result.status.value,
                commit_log_offset,
                SCHEDULE_TOPIC,
                level - 1,
                offset,
            )

    async def _run_persist(self) -> None:
        while self._started:
            await asyncio.sleep(self.flush_delay_offset_interval)
            if self._dirty:
                try:
                    self.persist()
                except Exception:
                    log.exception("persisting %s failed", self.offset_path)
