"""The revive: un-acked popped messages become visible again. Mirrors RocketMQ 5's ``PopReviveService``.

Each revive queue of ``rmq_sys_REVIVE_LOG_<cluster>`` is read in order from the offset committed
under ``CID_RMQ_SYS_REVIVE_GROUP`` (so admin tools show its progress). A ``ck`` record is held in
memory until its revive time (``popTime + invisibleTime``); ``ack`` records read after it set its
bits; a fully acked check-point is dropped. When the revive time has passed -- and the queue has been
read to its end first, so an ack written in time is always seen -- each un-acked message is re-put
to the pop retry topic with reconsumeTimes + 1, or to ``%DLQ%<group>`` once reconsumeTimes reached
the group's ``retryMaxTimes``, and an ``rv`` record marks the check-point done.

The committed offset of a revive queue is the position of its oldest check-point (or order batch)
still held, so after a SIGKILL the revive reads again everything it may still need; at that startup
read it also moves every POP group's offset to at least what the check-points say the pops had
reached (``nb``), so an offset file older than the crash redelivers nothing already popped.

Memory is bounded: at most ``pop_revive_max_pending`` check-points are held (one per pop of a queue,
up to 32 messages each); past that the revive stops reading that queue until held ones revive (acks
behind the stop are then seen late, which can redeliver an acked message: at least once, never lost).

At rest the revive does not poll: while it holds nothing (no check-point, no order batch), it sleeps
until a revive record is written (:meth:`PopReviveService.note_record`) or :data:`IDLE_S` passes;
while it holds something it reads every ``revive_interval`` and wakes for the earliest revive time.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidemq.broker.pop.extra_info import REVIVE_GROUP
from tidemq.broker.pop.records import (
    TAG_ACK,
    TAG_BATCH_ACK,
    TAG_CK,
    TAG_ORDER_ACK,
    TAG_ORDER_CK,
    TAG_REVIVED,
    AckRecord,
    CheckPoint,
    CkKey,
    OrderAck,
    OrderCheckPoint,
)
from tidemq.broker.pop.result import PROPERTY_FIRST_POP_TIME, PROPERTY_POP_CK
from tidemq.clock import now_ms
from tidemq.protocol.message import MessageConst, MessageExt
from tidemq.protocol.message_codec import decode_message
from tidemq.protocol.topic import RETRY_GROUP_TOPIC_PREFIX, dlq_topic
from tidemq.store.results import GetMessageStatus, MessageExtBrokerInner

if TYPE_CHECKING:
    from tidemq.broker.pop.service import PopService

log = logging.getLogger(__name__)

PERM_RW = 6
SCAN_BUDGET = 4096
"""Revive-log records read per queue per step (the loop is given back between steps)."""
IDLE_S = 30.0
"""Longest the revive sleeps while it holds nothing (a safety net: every revive record written wakes it)."""


@dataclass(slots=True)
class _ReviveQueue:
    """What the revive holds for one revive queue."""

    qid: int
    scan_offset: int = 0
    pending: dict[CkKey, tuple[int, CheckPoint]] = field(default_factory=dict)
    due: list[tuple[int, int, CkKey]] = field(default_factory=list)
    order_pos: dict[tuple[str, str, int], tuple[int, int, int]] = field(default_factory=dict)
    positions: deque[int] = field(default_factory=deque)
    live: set[int] = field(default_factory=set)
    committed: int = -1
    blocked: bool = False
    first_unheld: int = -1

    def hold_position(self, pos: int) -> None:
        self.positions.append(pos)
        self.live.add(pos)

    def low_water(self) -> int:
        """The oldest position still needed (else the scan offset)."""
        positions, live = self.positions, self.live
        while positions and positions[0] not in live:
            positions.popleft()
        if len(positions) > 2 * len(live) + 1024:  # dead ones behind a long-held one: compact
            self.positions = positions = deque(sorted(live))
        return positions[0] if positions else self.scan_offset


class PopReviveService:
    """Reads the revive log, merges acks, revives expired check-points. See the module docstring.

    Args:
        service: the owning :class:`~tidemq.broker.pop.service.PopService`.
    """

    def __init__(self, service: PopService) -> None:
        self.service = service
        self.broker = service.broker
        self.queues = [_ReviveQueue(q) for q in range(service.revive_queue_num)]
        self.max_pending = max(1, self.broker.config.pop_revive_max_pending)
        self.interval_s = max(0.05, self.broker.config.revive_interval / 1000.0)
        self.recovering = False
        self._wake = asyncio.Event()
        self._next_wake_ms = 0
        self._parked = False
        """Sleeping with nothing held: the next revive record written wakes it."""
        self._task: asyncio.Task[None] | None = None
        self._warned = False

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Recover from the revive log (offsets, order batches, held check-points), then run."""
        offsets = self.broker.consumer_offset_manager
        topic = self.service.revive_topic
        store = self.broker.store
        for q in self.queues:
            committed = offsets.query_offset(REVIVE_GROUP, topic, q.qid)
            q.scan_offset = committed if committed >= 0 else store.get_min_offset_in_queue(topic, q.qid)
            q.committed = committed
        self.recovering = True
        try:
            for q in self.queues:
                self._recover_queue(q)
        finally:
            self.recovering = False
        self.service.order.start_timers()
        self.commit_offsets()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pop-revive")

    async def shutdown(self) -> None:
        """Stop the revive task (check-points held stay in the revive log and are read again at start)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.commit_offsets()

    def _recover_queue(self, q: _ReviveQueue) -> None:
        """Read a revive queue to its end at startup; past the hold limit only offsets and order
        batches are replayed, and reading resumes later from the first check-point not held."""
        while self._scan(q, SCAN_BUDGET, recovering=True) > 0:
            pass
        if q.first_unheld >= 0:
            q.scan_offset, q.first_unheld = q.first_unheld, -1

    async def _run(self) -> None:
        while True:
            try:
                self.step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pop revive step failed")
            delay = self.interval_s
            next_due = self.next_due_ms()
            if next_due is not None:
                delay = min(delay, max(0.01, (next_due - now_ms()) / 1000.0))
            elif not any(q.pending or q.order_pos for q in self.queues):
                delay = IDLE_S
            self._parked = delay == IDLE_S
            self._next_wake_ms = now_ms() + int(delay * 1000)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            self._parked = False

    def note_check_point(self, ck: CheckPoint) -> None:
        """A check-point was just written: make sure the revive runs by its revive time."""
        if ck.revive_time < self._next_wake_ms:
            self._wake.set()

    def note_record(self) -> None:
        """A revive record was just written (on the broker's loop): wake the revive if it sleeps
        holding nothing, so the record is read now rather than after :data:`IDLE_S`."""
        if self._parked:
            self._wake.set()

    def next_due_ms(self) -> int | None:
        """When the earliest held check-point comes back (ms since the epoch), or None when none is held."""
        dues = [q.due[0][0] for q in self.queues if q.due]
        return min(dues) if dues else None

    # -- one step --------------------------------------------------------------------------------

    def step(self) -> None:
        """Read every revive queue to its end (within the budget), then revive what is due; again
        while a queue stopped at the hold limit and reviving made room (a few rounds at most)."""
        for _round in range(4):
            for q in self.queues:
                q.blocked = False  # a held check-point may have revived since: try again
                while self._scan(q, SCAN_BUDGET, recovering=False) >= SCAN_BUDGET:
                    pass
            held = self.pending_count
            now = now_ms()
            for q in self.queues:
                self._revive_due(q, now)
                if len(q.due) > 2 * len(q.pending) + 1024:  # drop entries of acked check-points
                    q.due = [(ck.revive_time, pos, key) for key, (pos, ck) in q.pending.items()]
                    heapq.heapify(q.due)
            if not any(q.blocked for q in self.queues) or self.pending_count >= held:
                break
        self.commit_offsets()

    def commit_offsets(self) -> None:
        """Commit each revive queue's low-water position (under ``CID_RMQ_SYS_REVIVE_GROUP``)."""
        offsets = self.broker.consumer_offset_manager
        for q in self.queues:
            low = q.low_water()
            if low != q.committed:
                offsets.commit_offset("POP", REVIVE_GROUP, self.service.revive_topic, q.qid, low)
                q.committed = low

    def _scan(self, q: _ReviveQueue, budget: int, *, recovering: bool) -> int:
        """Read up to ``budget`` records of queue ``q`` from its scan offset; the number read."""
        store, topic = self.broker.store, self.service.revive_topic
        read = 0
        if store.get_max_offset_in_queue(topic, q.qid) <= q.scan_offset:
            return 0  # nothing new (and no read that would make an empty queue's files)
        while read < budget and not q.blocked:
            got = store.get_message(REVIVE_GROUP, topic, q.qid, q.scan_offset, 32, None)
            if got.status is not GetMessageStatus.FOUND:
                if got.status is GetMessageStatus.OFFSET_TOO_SMALL and got.next_begin_offset > q.scan_offset:
                    q.scan_offset = got.next_begin_offset  # the oldest revive records were deleted
                    continue
                break
            for record, pos in zip(got.message_buffers, got.message_queue_offsets, strict=True):
                if not self._apply(q, record, pos, recovering):
                    q.blocked = True
                    break
                q.scan_offset = pos + 1
                read += 1
        return read

    def _apply(self, q: _ReviveQueue, record: bytes, pos: int, recovering: bool) -> bool:
        """Take in one revive-log record; False when a check-point cannot be held (limit)."""
        try:
            msg, _ = decode_message(record)
            tag = msg.tags
            body = msg.body
            if tag == TAG_CK:
                return self._take_check_point(q, CheckPoint.decode(body), pos, recovering)
            if tag in (TAG_ACK, TAG_BATCH_ACK, TAG_REVIVED):
                self._take_ack(q, AckRecord.decode(body), revived=tag == TAG_REVIVED)
            elif tag == TAG_ORDER_CK:
                self._take_order_check_point(q, OrderCheckPoint.decode(body), pos, recovering)
            elif tag == TAG_ORDER_ACK:
                self._take_order_ack(q, OrderAck.decode(body), recovering)
        except Exception as exc:  # a record we cannot read must not stop the revive
            log.warning(
                "skipping unreadable revive record at %s:%d:%d: %r",
                self.service.revive_topic,
                q.qid,
                pos,
                exc,
            )
        return True

    def _take_check_point(self, q: _ReviveQueue, ck: CheckPoint, pos: int, recovering: bool) -> bool:
        if recovering:  # the pop had moved the group's offset this far before the crash
            offsets = self.broker.consumer_offset_manager
            if ck.next_offset > offsets.query_offset(ck.group, ck.topic, ck.queue_id):
                offsets.commit_offset("POP", ck.group, ck.topic, ck.queue_id, ck.next_offset)
        if ck.key in q.pending:
            return True
        if sum(len(x.pending) for x in self.queues) >= self.max_pending:
            if recovering:
                if q.first_unheld < 0:
                    q.first_unheld = pos
                return True
            if not self._warned:
                self._warned = True
                log.warning(
                    "pop revive holds %d check-points: reading revive queue %d waits", self.max_pending, q.qid
                )
            return False
        q.pending[ck.key] = (pos, ck)
        q.hold_position(pos)
        heapq.heappush(q.due, (ck.revive_time, pos, ck.key))
        return True

    def _take_ack(self, q: _ReviveQueue, ack: AckRecord, *, revived: bool) -> None:
        held = q.pending.get(ack.key)
        if held is None:
            return  # acked after its revive, or a check-point of another queue: nothing to do
        pos, ck = held
        if not revived:
            for off in ack.offsets:
                i = ck.index_of(off)
                if i >= 0:
                    ck.bitmap |= 1 << i
        if revived or ck.all_acked():
            del q.pending[ack.key]
            q.live.discard(pos)

    def _take_order_check_point(
        self, q: _ReviveQueue, batch: OrderCheckPoint, pos: int, recovering: bool
    ) -> None:
        key = (batch.group, batch.topic, batch.queue_id)
        old = q.order_pos.get(key)
        if old is not None:
            q.live.discard(old[0])
        q.order_pos[key] = (pos, batch.pop_time, batch.next_offset)
        q.hold_position(pos)
        if recovering:
            self.service.order.recover_check_point(batch)

    def _take_order_ack(self, q: _ReviveQueue, ack: OrderAck, recovering: bool) -> None:
        key = (ack.group, ack.topic, ack.queue_id)
        held = q.order_pos.get(key)
        if held is not None and held[1] == ack.pop_time and ack.commit >= held[2]:
            q.live.discard(held[0])
            del q.order_pos[key]
        if recovering:
            self.service.order.recover_ack(ack)

    # -- revive ----------------------------------------------------------------------------------

    def _revive_due(self, q: _ReviveQueue, now: int) -> None:
        due = q.due
        while due and due[0][0] <= now:
            _t, pos, key = heapq.heappop(due)
            held = q.pending.get(key)
            if held is None or held[0] != pos:
                continue
            ck = held[1]
            if not ck.all_acked():
                try:
                    self._revive_check_point(ck)
                    mark = AckRecord(
                        ck.group, ck.topic, ck.queue_id, ck.start_offset, ck.pop_time, [], ck.broker_name
                    )
                    self.service.put_revive_record(q.qid, TAG_REVIVED, mark.encode())
                except Exception as exc:  # the store refused a put (disk full...): keep it, retry
                    log.warning("pop revive of %s failed, retrying in 1 s: %r", key, exc)
                    heapq.heappush(due, (now + 1000, pos, key))
                    return
            del q.pending[key]
            q.live.discard(pos)

    def _revive_check_point(self, ck: CheckPoint) -> None:
        store = self.broker.store
        for i, diff in enumerate(ck.diffs):
            if ck.bitmap >> i & 1:
                continue
            offset = ck.start_offset + diff
            got = store.get_message(REVIVE_GROUP, ck.topic, ck.queue_id, offset, 1, None)
            if got.status is not GetMessageStatus.FOUND or got.message_queue_offsets[0] != offset:
                log.warning(
                    "pop revive: message %s:%d:%d is gone (%s)",
                    ck.topic,
                    ck.queue_id,
                    offset,
                    got.status.value,
                )
                continue
            msg, _ = decode_message(got.message_buffers[0], decompress=False)
            self._revive_message(ck, msg)

    def pop_topic_of(self, group: str, topic: str, msg: MessageExt | None = None) -> str:
        """The topic a group popped, given the topic a message is in (a pop retry topic or not)."""
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return topic
        known = self.service.popped_topic_of(topic)
        if known:
            return known
        if msg is not None:
            origin = msg.get_property(MessageConst.PROPERTY_RETRY_TOPIC)
            if origin:
                return origin
        prefix = f"{RETRY_GROUP_TOPIC_PREFIX}{group}"
        return (
            topic[len(prefix) + 1 :] if topic.startswith(prefix) and len(topic) > len(prefix) + 1 else topic
        )

    def _revive_message(self, ck: CheckPoint, msg: MessageExt) -> None:
        """Re-put one un-acked message: retry topic with reconsumeTimes + 1, or the DLQ."""
        group = ck.group
        pop_topic = self.pop_topic_of(group, ck.topic, msg)
        sgc = self.broker.subscription_group_manager.find_subscription_group_config(group)
        max_times = sgc.retry_max_times if sgc is not None else self.broker.config.max_reconsume_times
        props = dict(msg.properties)
        props.pop(PROPERTY_POP_CK, None)
        props.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, pop_topic)
        props.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.offset_msg_id)
        props.setdefault(PROPERTY_FIRST_POP_TIME, str(ck.pop_time))
        if msg.reconsume_times >= max_times:
            self._put_copy(dlq_topic(group), props, msg, msg.reconsume_times)
            self.service.stats.on_dead_letter(group, pop_topic, 1)
            return
        retry = self.service.retry_topic_of(group, pop_topic)
        self._put_copy(retry, props, msg, msg.reconsume_times + 1)
        self.service.stats.on_revive(group, pop_topic, 1)

    def dead_letter_record(self, group: str, topic: str, record: bytes, reconsume_times: int) -> None:
        """Move a stored message of ``topic`` to ``%DLQ%<group>`` (order pops past retryMaxTimes)."""
        msg, _ = decode_message(record, decompress=False)
        props = dict(msg.properties)
        props.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, topic)
        props.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.offset_msg_id)
        self._put_copy(dlq_topic(group), props, msg, reconsume_times)
        self.service.stats.on_dead_letter(group, topic, 1)

    def _put_copy(self, topic: str, props: dict[str, str], msg: MessageExt, reconsume_times: int) -> None:
        self.broker.topic_config_manager.create_topic_in_send_message_back_method(topic, 1, PERM_RW, 0)
        inner = MessageExtBrokerInner.copy_of(msg, topic, props, reconsume_times=reconsume_times)
        result = self.broker.store.put_message(inner)
        if not result.is_ok:
            raise RuntimeError(f"re-putting a popped message to {topic} failed: {result.status.value}")

    # -- figures ---------------------------------------------------------------------------------

    def in_flight_by_group(self) -> dict[tuple[str, str], int]:
        """Un-acked messages of held check-points by ``(group, popped topic)``."""
        out: dict[tuple[str, str], int] = {}
        for q in self.queues:
            for _pos, ck in q.pending.values():
                key = (ck.group, self.pop_topic_of(ck.group, ck.topic))
                out[key] = out.get(key, 0) + ck.num - ck.bitmap.bit_count()
        return out

    @property
    def pending_count(self) -> int:
        """Check-points held in memory."""
        return sum(len(q.pending) for q in self.queues)
