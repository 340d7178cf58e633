"""Order (FIFO) pops: one batch in flight per (group, queue), its messages in queue order.

Mirrors RocketMQ 5's ``ConsumerOrderInfoManager`` (``checkBlock``, ``update``, ``commitAndNext``)
and ``AckMessageProcessor.ackOrderly``. A queue whose batch is neither fully acked nor past its
invisible time is skipped by order pops (blocked). The group's offset moves only when acks make a
prefix of the batch complete; once the invisible time ends, the un-acked offsets are popped again in
order with their attempt count + 1 (``orderCountInfo``); a pop carrying the batch's ``attemptId``
(the client retrying a pop whose answer it lost) gets the batch again at once, same counts, new
handles (``OrderInfo.needBlock`` / ``mergeOffsetConsumedCount``); one popped more than the group's
``retryMaxTimes`` times goes to ``%DLQ%<group>`` instead and counts as acked.

Crash safety: each batch is written to the revive log as an ``ock`` record (offsets, counts, acked,
window) and each ack as an ``oack`` with the offset committed after it; recovery replays them
(:meth:`OrderPopManager.recover_check_point`, :meth:`OrderPopManager.recover_ack`). Memory: one
batch (at most 32 offsets) per queue with a batch in flight.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import TYPE_CHECKING

from tidemq.broker.pop.extra_info import (
    POP_ORDER_REVIVE_QUEUE,
    ExtraInfo,
    build_extra_info,
    msg_offset_entry,
    order_count_entry,
    start_offset_entry,
)
from tidemq.broker.pop.records import TAG_ORDER_ACK, TAG_ORDER_CK, OrderAck, OrderCheckPoint
from tidemq.broker.pop.result import PopError, PoppedMessage
from tidemq.clock import now_ms
from tidemq.protocol.codes import ResponseCode
from tidemq.store.results import GetMessageStatus

if TYPE_CHECKING:
    from tidemq.broker.pop.service import PopService, _PopContext

log = logging.getLogger(__name__)

OrderKey = tuple[str, str, int]
"""``(group, topic, queue_id)``."""


class OrderPopManager:
    """The batches in flight of order pops. Mirrors ``ConsumerOrderInfoManager``.

    Args:
        service: the owning :class:`~tidemq.broker.pop.service.PopService`.
    """

    def __init__(self, service: PopService) -> None:
        self.service = service
        self.batches: dict[OrderKey, OrderCheckPoint] = {}
        self._timers: dict[OrderKey, asyncio.TimerHandle] = {}

    def revive_qid_of(self, key: OrderKey) -> int:
        """The revive queue of a queue's order records (stable across restarts)."""
        text = f"{key[0]}@{key[1]}@{key[2]}".encode()
        return zlib.crc32(text) % self.service.revive_queue_num

    @property
    def in_flight(self) -> int:
        """Messages popped by order pops and not acked yet."""
        return sum(len(b.unacked()) for b in self.batches.values())

    def in_flight_by_group(self) -> dict[tuple[str, str], int]:
        """Un-acked offsets of the FIFO batches held, by ``(group, popped topic)`` (for metrics)."""
        out: dict[tuple[str, str], int] = {}
        for (group, topic, _q), batch in self.batches.items():
            out[(group, topic)] = out.get((group, topic), 0) + len(batch.unacked())
        return out

    # -- pop ---------------------------------------------------------------------------------

    def pop_queue(self, ctx: _PopContext, topic: str, queue_id: int) -> None:
        """Pop the next batch of one queue for an order pop (nothing while it is blocked). A read
        whose messages were all acked already (in an earlier, longer batch) moves the group's offset
        past them and reads on (a few times)."""
        for _ in range(4):
            if not self._pop_queue_once(ctx, topic, queue_id):
                return

    def _pop_queue_once(self, ctx: _PopContext, topic: str, queue_id: int) -> bool:
        """One read of a queue; True when it only moved the offset past acked messages."""
        service, group = self.service, ctx.group
        key = (group, topic, queue_id)
        now = ctx.result.pop_time
        prev = self.batches.get(key)
        same = prev is not None and ctx.attempt_id is not None and ctx.attempt_id == prev.attempt_id
        if prev is not None and now < prev.visible_at and not same:
            return False  # checkBlock: a batch is in flight (not this attempt's)
        offset = service.pop_offset(group, topic, queue_id, ctx.init_mode)
        got = service.broker.store.get_message(
            group, topic, queue_id, offset, ctx.wanted, ctx.tag_codes, ctx.record_filter
        )
        if got.status is not GetMessageStatus.FOUND:
            if got.next_begin_offset > offset and got.status is not GetMessageStatus.NO_MESSAGE_IN_QUEUE:
                self._commit(group, topic, queue_id, got.next_begin_offset)
            return False
        offsets = got.message_queue_offsets
        prev_acked = set(prev.acked) if prev is not None else set()
        again = 0 if same else 1  # a retried attempt is the same delivery (mergeOffsetConsumedCount)
        counts = [prev.count_of(o) + again if prev is not None and o in prev.offsets else 0 for o in offsets]
        batch = OrderCheckPoint(
            group,
            topic,
            queue_id,
            offsets,
            counts,
            got.next_begin_offset,
            now,
            ctx.invisible_ms,
            attempt_id=ctx.attempt_id,
        )
        batch.acked = sorted(o for o in prev_acked if o >= offset)  # with those past this read
        records = got.message_buffers
        redelivered = (
            0
            if same
            else sum(1 for o, c in zip(offsets, counts, strict=True) if c > 0 and o not in prev_acked)
        )
        self._dead_letter(batch, records, ctx.topic)
        if redelivered:
            service.stats.on_revive(group, ctx.topic, redelivered)
        if batch.commit_offset() >= batch.next_offset:  # everything acked or dead-lettered
            self._finish(key, batch)
            return True
        service.put_revive_record(self.revive_qid_of(key), TAG_ORDER_CK, batch.encode())
        self._hold(key, batch)
        self._answer(ctx, batch, records)
        return False

    def _answer(self, ctx: _PopContext, batch: OrderCheckPoint, records: list[bytes]) -> None:
        result, topic, queue_id = ctx.result, batch.topic, batch.queue_id
        done = set(batch.acked)
        sent: list[int] = []
        first = batch.commit_offset()
        for record, off, count in zip(records, batch.offsets, batch.counts, strict=True):
            if off in done:
                continue
            extra = build_extra_info(
                first,
                result.pop_time,
                batch.invisible_time,
                POP_ORDER_REVIVE_QUEUE,
                topic,
                result.broker_name,
                queue_id,
                off,
            )
            result.messages.append(PoppedMessage(record, topic, queue_id, off, extra, count))
            result.order_count_info.append(order_count_entry(topic, queue_id, off, count))
            sent.append(off)
        result.start_offset_info.append(start_offset_entry(topic, queue_id, first))
        result.msg_offset_info.append(msg_offset_entry(topic, queue_id, sent))
        store = self.service.broker.store
        result.rest_num += max(0, store.get_max_offset_in_queue(topic, queue_id) - batch.next_offset)

    def _dead_letter(self, batch: OrderCheckPoint, records: list[bytes], topic: str) -> None:
        """Move offsets popped more than ``retryMaxTimes`` times to the DLQ; they count as acked."""
        sgc = self.service.broker.subscription_group_manager.find_subscription_group_config(batch.group)
        max_times = sgc.retry_max_times if sgc is not None else self.service.broker.config.max_reconsume_times
        for record, off, count in zip(records, batch.offsets, batch.counts, strict=True):
            if count > max_times and off not in batch.acked:
                self.service.revive.dead_letter_record(batch.group, topic, record, count)
                batch.acked.append(off)

    def _hold(self, key: OrderKey, batch: OrderCheckPoint) -> None:
        """Keep ``batch`` as the queue's batch in flight; wake waiting pops when it becomes visible."""
        self.batches[key] = batch
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        delay = max(0.0, (batch.visible_at - now_ms()) / 1000.0)
        self._timers[key] = loop.call_later(delay, self._visible, key, batch.topic)

    def _visible(self, key: OrderKey, topic: str) -> None:
        self._timers.pop(key, None)
        self.service.polling.notify(topic)

    def _finish(self, key: OrderKey, batch: OrderCheckPoint) -> None:
        """Every offset of ``batch`` is done: commit past it, unblock the queue, and forget it --
        but for offsets past it acked already, kept (and written first) as a batch of none."""
        ahead = batch.acked_ahead()
        rest = None
        if ahead:
            rest = OrderCheckPoint(
                batch.group, batch.topic, batch.queue_id, [], [], batch.next_offset, now_ms(), 0, ahead
            )
            self.service.put_revive_record(self.revive_qid_of(key), TAG_ORDER_CK, rest.encode())
        self._commit(batch.group, batch.topic, batch.queue_id, batch.next_offset)
        self.service.put_revive_record(
            self.revive_qid_of(key),
            TAG_ORDER_ACK,
            OrderAck(
                batch.group, batch.topic, batch.queue_id, -1, batch.pop_time, batch.next_offset
            ).encode(),
        )
        if rest is not None:
            self.batches[key] = rest
        else:
            self.batches.pop(key, None)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self.service.polling.notify(batch.topic)

    def _commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        offsets = self.service.broker.consumer_offset_manager
        if offset > offsets.query_offset(group, topic, queue_id):
            offsets.commit_offset("POP", group, topic, queue_id, offset)

    # -- ack / change --------------------------------------------------------------------------

    def _batch_of(self, group: str, topic: str, info: ExtraInfo) -> tuple[OrderKey, OrderCheckPoint | None]:
        key = (group, topic, info.queue_id)
        batch = self.batches.get(key)
        if batch is None or batch.pop_time != info.pop_time or info.queue_offset not in batch.offsets:
            return key, None  # an ack of an older batch: nothing to do (commitAndNext's -2)
        return key, batch

    def ack(self, group: str, topic: str, info: ExtraInfo) -> None:
        """Ack one offset of the queue's batch; commit the group's offset past the acked prefix."""
        key, batch = self._batch_of(group, topic, info)
        if batch is None:
            return
        if info.queue_offset not in batch.acked:
            batch.acked.append(info.queue_offset)
        commit = batch.commit_offset()
        if commit >= batch.next_offset:
            self._finish(key, batch)
            return
        self.service.put_revive_record(
            self.revive_qid_of(key),
            TAG_ORDER_ACK,
            OrderAck(group, topic, info.queue_id, info.queue_offset, batch.pop_time, commit).encode(),
        )
        self._commit(group, topic, info.queue_id, commit)

    def change_invisible_time(
        self, group: str, topic: str, info: ExtraInfo, now: int, invisible_ms: int
    ) -> str:
        """Move the batch's invisible window to end ``invisible_ms`` from now; the new handle.

        Raises:
            PopError: NO_MESSAGE (expired) when the handle is not the queue's batch in flight.
        """
        key, batch = self._batch_of(group, topic, info)
        if batch is None:
            raise PopError(ResponseCode.NO_MESSAGE, "receipt handle is expired", expired=True)
        batch.invisible_time = now + invisible_ms - batch.pop_time
        self.service.put_revive_record(self.revive_qid_of(key), TAG_ORDER_CK, batch.encode())
        self._hold(key, batch)
        return build_extra_info(
            info.ck_queue_offset,
            batch.pop_time,
            batch.invisible_time,
            POP_ORDER_REVIVE_QUEUE,
            topic,
            info.broker_name,
            info.queue_id,
            info.queue_offset,
        )

    # -- recovery ------------------------------------------------------------------------------

    def recover_check_point(self, batch: OrderCheckPoint) -> None:
        """Replay an ``ock`` record read from the revive log at startup (the newest wins)."""
        key = (batch.group, batch.topic, batch.queue_id)
        current = self.service.broker.consumer_offset_manager.query_offset(*key)
        if not batch.is_live(current):
            self.batches.pop(key, None)
            return
        self.batches[key] = batch

    def recover_ack(self, ack: OrderAck) -> None:
        """Replay an ``oack`` record read from the revive log at startup."""
        key = (ack.group, ack.topic, ack.queue_id)
        self._commit(ack.group, ack.topic, ack.queue_id, ack.commit)
        batch = self.batches.get(key)
        if batch is None or batch.pop_time != ack.pop_time:
            return
        if ack.offset >= 0 and ack.offset not in batch.acked:
            batch.acked.append(ack.offset)
        if not batch.is_live(ack.commit):
            self.batches.pop(key, None)

    def start_timers(self) -> None:
        """After recovery: wake pops when each recovered batch becomes visible."""
        for key, batch in list(self.batches.items()):
            self._hold(key, batch)
