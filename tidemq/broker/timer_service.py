"""Timer messages in the broker: the send hook and the service that runs the timer store.

:func:`transform_timer_message` mirrors RocketMQ 5's ``HookUtils.handleScheduleMessage`` /
``transformTimerMessage`` (transactions.md §4.2): a message carrying ``TIMER_DELAY_SEC``,
``TIMER_DELAY_MS``, ``TIMER_DELIVER_MS`` (first present wins, in that order) or Aliyun ONS's
``__STARTDELIVERTIME`` (a tidemq decision: Apache RocketMQ ignores it) and due in the future is
moved to ``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS`` (its due time, ms), ``REAL_TOPIC`` and
``REAL_QID``. A ``DELAY`` level > 0 wins (the ``TIMER_*`` properties are removed); a time at or before
now is delivered at once, unchanged; a value that is not an integer, or a time more than
``timer_max_delay_sec`` ahead, is refused with MESSAGE_ILLEGAL and RocketMQ's remark.

Unlike RocketMQ (which floors the time to ``timerPrecisionMs`` and so may deliver up to a second
early), ``TIMER_OUT_MS`` is the exact time and the message is never delivered before it.

:class:`TimerMessageService` drives :class:`~tidemq.store.timer.TimerMessageStore` on the broker's
event loop: one task enqueues new timer-topic messages (woken by their arrival), one delivers due
ones, one persists the checkpoint every few seconds and deletes finished timer-log segments.

At rest neither loop polls: the enqueue waits for an arrival (:data:`ENQUEUE_IDLE_S` at most, 1 s
while messages wait for room in the wheel), the dequeue sleeps until the next used wheel slot is due
(:data:`~tidemq.store.timer.timer_store.LOOKAHEAD_MS` at most) and an enqueue of an earlier timer
wakes it. A timer is still delivered once its slot is over, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from typing import TYPE_CHECKING

from tidemq.broker.tasks import cancel_and_wait, set_threadsafe
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import MessageConst
from tidemq.protocol.message_codec import MessageSysFlag
from tidemq.protocol.topic import TIMER_TOPIC
from tidemq.store.timer import TimerMessageStore

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.store.config import MessageStoreConfig
    from tidemq.store.message_store import MessageStore
    from tidemq.store.results import MessageExtBrokerInner

__all__ = ["TimerMessageService", "is_timer_message", "runtime_info", "transform_timer_message"]

log = logging.getLogger(__name__)

_C = MessageConst
TIMER_KEYS = (
    _C.PROPERTY_TIMER_DELAY_SEC,
    _C.PROPERTY_TIMER_DELAY_MS,
    _C.PROPERTY_TIMER_DELIVER_MS,
    _C.PROPERTY_START_DELIVER_TIME,
)
"""The properties that make a timer message, in the order RocketMQ looks at them (ONS's last)."""
_TIMER_KEY_SET = frozenset(TIMER_KEYS)
_RELATIVE = {_C.PROPERTY_TIMER_DELAY_SEC: 1000, _C.PROPERTY_TIMER_DELAY_MS: 1}
_LONG = re.compile(r"[+-]?[0-9]{1,19}")
_CONSUMABLE = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
ENQUEUE_IDLE_S = 10.0
"""Longest the enqueue waits for an arrival notice when nothing is waiting (a safety net: every
timer-topic put notifies it)."""
READ_TIME_PERSIST_MS = 600_000
"""A checkpoint that differs from the last one written only by a read time less than this far on
(10 min) is not written: at rest the timer files cost no fsync every few seconds. Far below the
2 h after which a restart rebuilds the wheel instead of sweeping it."""
RETENTION_NAME = "timer log"
"""How the commit log's retention names the timer store (a forced deletion's WARNING says it)."""


def is_timer_message(properties: dict[str, str]) -> bool:
    """Whether a message's properties hold a timer property (cheap: the send path asks every message)."""
    return not _TIMER_KEY_SET.isdisjoint(properties)


def _illegal(store_config: MessageStoreConfig) -> RemotingCommand:
    return RemotingCommand.create_response(
        ResponseCode.MESSAGE_ILLEGAL,
        "timer message illegal, the delay time should not be bigger than the max delay "
        f"{store_config.timer_max_delay_sec * 1000}ms; or if set del msg, the delay time should be "
        "bigger than the current time",
    )


def transform_timer_message(
    inner: MessageExtBrokerInner, store_config: MessageStoreConfig, now_ms: int
) -> RemotingCommand | None:
    """Park a timer message in ``rmq_sys_wheel_timer`` (``inner`` changed in place), see the module
    docstring. Returns None to go on with the put, or the refusal to answer.

    A message that also carries ``TIMER_DEL_UNIQKEY`` (``realTopic+uniqKey``) is a cancellation: parked
    the same way, it is never delivered and the timer store drops the message it names
    (``store/timer/cancels.py``); it must be due in the future.

    Refusals: MESSAGE_ILLEGAL (not an integer, too far ahead, a cancellation due now or earlier),
    SYSTEM_ERROR when ``timer_wheel_enable`` is off.
    """
    if MessageSysFlag.get_transaction_value(inner.sys_flag) not in _CONSUMABLE:
        return None
    props = inner.properties
    level = (props.get(_C.PROPERTY_DELAY_TIME_LEVEL) or "").strip().lstrip("+")
    if level.isascii() and level.isdigit() and int(level) > 0:  # ("²".isdigit() is True)
        for name in TIMER_KEYS[:3]:
            props.pop(name, None)
        return None
    if inner.topic == TIMER_TOPIC or _C.PROPERTY_TIMER_OUT_MS in props:
        return None
    key = next((k for k in TIMER_KEYS if k in props), None)
    if key is None:
        return None
    if not store_config.timer_wheel_enable:
        return RemotingCommand.create_response(
            ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false"
        )
    value = props[key].strip()
    if not _LONG.fullmatch(value):
        return _illegal(store_config)
    factor = _RELATIVE.get(key)
    deliver_ms = now_ms + int(value) * factor if factor is not None else int(value)
    if deliver_ms <= now_ms:
        return _illegal(store_config) if _C.PROPERTY_TIMER_DEL_UNIQKEY in props else None
    if deliver_ms - now_ms > store_config.timer_max_delay_sec * 1000:
        return _illegal(store_config)
    props[_C.PROPERTY_TIMER_OUT_MS] = str(deliver_ms)
    props[_C.PROPERTY_REAL_TOPIC] = inner.topic
    props[_C.PROPERTY_REAL_QUEUE_ID] = str(inner.queue_id)
    inner.properties_string = None
    inner.topic = TIMER_TOPIC
    inner.queue_id = 0
    return None


def runtime_info(broker: Broker) -> dict[str, str]:
    """RocketMQ 5's timer rows of GET_BROKER_RUNTIME_INFO (``AdminBrokerProcessor``; zeros when the
    timer service does not run): ``timerReadBehind`` (seconds the delivery is behind the clock, one
    slot normally reads 0), ``timerOffsetBehind`` (timer-topic messages not yet in the timer log),
    ``timerCongestNum`` (timers pending), ``timerEnqueueTps`` / ``timerDequeueTps`` (per second since
    the previous ask)."""
    service = broker.timer_message_service
    if service is None:
        return {
            "timerReadBehind": "0",
            "timerOffsetBehind": "0",
            "timerCongestNum": "0",
            "timerEnqueueTps": "0.0",
            "timerDequeueTps": "0.0",
        }
    return service.runtime_info()


class TimerMessageService:
    """Runs the timer store of a broker (RocketMQ 5's ``TimerMessageStore`` services).

    Args:
        store: the loaded message store.
        persist_interval: seconds between checkpoints (``timercheck.json``).
        clean_interval: seconds between looks for finished timer-log segments to delete.

    :meth:`start` / :meth:`shutdown` run on the broker's loop; :meth:`notify_message_arriving` may be
    called from any thread.
    """

    def __init__(
        self, store: MessageStore, *, persist_interval: float = 5.0, clean_interval: float = 60.0
    ) -> None:
        self.timer_store = TimerMessageStore(store)
        self.persist_interval = persist_interval
        self.clean_interval = clean_interval
        self._event: asyncio.Event | None = None
        self._dequeue_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._busy: asyncio.Future[object] | None = None
        """The checkpoint or clean-up running in a worker thread (shutdown waits for it)."""
        self._started = False
        self._persisted: dict[str, object] | None = None
        """The last checkpoint written (None: none yet)."""
        self._last_rates = (time.monotonic(), 0, 0)

    def runtime_info(self) -> dict[str, str]:
        """See :func:`runtime_info`."""
        ts = self.timer_store
        now = time.monotonic()
        then, enqueued, delivered = self._last_rates
        self._last_rates = (now, ts.enqueued, ts.delivered)
        span = max(now - then, 1e-3)
        return {
            "timerReadBehind": str(ts.read_behind_ms() // 1000),
            "timerOffsetBehind": str(ts.backlog()),
            "timerCongestNum": str(ts.pending),
            "timerEnqueueTps": f"{(ts.enqueued - enqueued) / span:.1f}",
            "timerDequeueTps": f"{(ts.delivered - delivered) / span:.1f}",
        }

    async def start(self) -> None:
        """Load the timer store (a rebuild after a crash runs in a worker thread), start the tasks.

        Raises:
            StoreError: a timer file cannot be opened.
        """
        if self._started:
            return
        loop = self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        await loop.run_in_executor(None, self.timer_store.load)
        # the commit log's retention keeps the messages of pending timers (unless forced)
        self.timer_store.store.retention.offset_providers[RETENTION_NAME] = self.timer_store.min_needed_offset
        self._event = asyncio.Event()
        self._dequeue_event = asyncio.Event()
        self._started = True
        for coro, name in (
            (self._run_enqueue(), "timer-enqueue"),
            (self._run_dequeue(), "timer-dequeue"),
            (self._run_persist(), "timer-persist"),
        ):
            self._tasks.append(loop.create_task(coro, name=name))

    async def shutdown(self) -> None:
        """Stop the tasks, write the checkpoint and close the timer files."""
        if not self._started:
            return
        self._started = False
        await cancel_and_wait(self._tasks)
        self.timer_store.store.retention.offset_providers.pop(RETENTION_NAME, None)
        if self._busy is not None and not self._busy.done():
            await asyncio.wait([self._busy])
        try:
            self.timer_store.shutdown()
        except Exception:
            log.exception("timer store shutdown failed")

    def notify_message_arriving(self) -> None:
        """A message was stored in ``rmq_sys_wheel_timer``: enqueue it now (thread-safe)."""
        event, loop = self._event, self._loop
        if event is None or loop is None or not self._started:
            return
        set_threadsafe(event, loop, self._loop_thread)

    async def _run_enqueue(self) -> None:
        event, dequeue_event = self._event, self._dequeue_event
        assert event is not None and dequeue_event is not None
        ts = self.timer_store
        while self._started:
            event.clear()
            timeout = 1.0
            try:
                if ts.enqueue():
                    if ts.wake_needed:  # a timer due before the dequeue's next look
                        dequeue_event.set()
                    await asyncio.sleep(0)
                    continue
                if not ts.backlog():
                    timeout = ENQUEUE_IDLE_S
            except Exception:
                log.exception("timer enqueue failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)

    async def _run_dequeue(self) -> None:
        event = self._dequeue_event
        assert event is not None
        while self._started:
            event.clear()
            try:
                wait = self.timer_store.dequeue()
            except Exception:
                log.exception("timer dequeue failed; retrying")
                wait = 0.1
            if wait <= self.timer_store.precision_ms / 1000.0:
                await asyncio.sleep(wait)  # the current slot's end (or a retry): no early wake needed
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), wait)

    async def _run_persist(self) -> None:
        loop = asyncio.get_running_loop()
        since_clean = 0.0
        while self._started:
            await asyncio.sleep(self.persist_interval)
            since_clean += self.persist_interval
            ts = self.timer_store
            checkpoint = ts.checkpoint()
            checkpoint["_done"] = ts.enqueued + ts.delivered + ts.skipped + ts.rolled + ts.cancelled
            try:
                if not _same_checkpoint(self._persisted, checkpoint):
                    written = {k: v for k, v in checkpoint.items() if k != "_done"}
                    self._busy = loop.run_in_executor(None, ts.persist, written)
                    await asyncio.shield(self._busy)
                    self._persisted = checkpoint
                if since_clean >= self.clean_interval:
                    since_clean = 0.0
                    self._busy = loop.run_in_executor(None, self.timer_store.clean_segments)
                    await asyncio.shield(self._busy)
            except Exception:
                log.exception("timer checkpoint failed")


def _same_checkpoint(old: dict[str, object] | None, new: dict[str, object]) -> bool:
    """Whether ``new`` need not be written after ``old``: nothing but ``readTimeMs`` changed, and
    that by less than :data:`READ_TIME_PERSIST_MS` (``_done``, the timers enqueued and finished so
    far, is compared too: none moved, so the log and the wheel hold no unsynced write either)."""
    if old is None or any(old[k] != v for k, v in new.items() if k != "readTimeMs"):
        return False
    before, after = old["readTimeMs"], new["readTimeMs"]
    return isinstance(before, int) and isinstance(after, int) and 0 <= after - before < READ_TIME_PERSIST_MS
