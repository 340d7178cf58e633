"""POP consumption in the broker: the in-process API both front ends use.

Mirrors RocketMQ 5's ``PopMessageProcessor`` / ``AckMessageProcessor`` /
``ChangeInvisibleTimeProcessor`` logic (rocketmq5.md §7, §8), with the transport left out: the
remoting processors (``broker/processor/pop*.py``) and the gRPC endpoint (``tidemq/proxy``) call

* :meth:`PopService.pop` / :meth:`PopService.pop_async` (long polling) -> :class:`PopResult`,
* :meth:`PopService.ack` / :meth:`PopService.batch_ack`,
* :meth:`PopService.change_invisible_time` -> the new receipt handle,

on the broker's event loop; each raises :class:`PopError` (a response code + remark) for bad input.

How it works (non-order pop): the group's offset in each queue read advances at once and a
check-point (``ck``) naming the popped offsets is written to the revive log
``rmq_sys_REVIVE_LOG_<cluster>`` (queue = the handle's reviveQid) before the answer. An ack writes an
``ack`` record there. :class:`~tidemq.broker.pop.revive.PopReviveService` reads the revive log in
order, merges acks into check-points and, once ``popTime + invisibleTime`` has passed, re-puts each
un-acked message into the pop retry topic ``%RETRY%<group>_<topic>`` with reconsumeTimes + 1 (or into
``%DLQ%<group>`` after the group's ``retryMaxTimes``); pops read that retry topic too. The log is the
commit log, so a SIGKILL loses nothing: the revive re-reads it from its committed offset.

Order (FIFO) pop: see :mod:`tidemq.broker.pop.order`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import struct
from typing import TYPE_CHECKING

from tidemq.broker.pop.ack import PopAcks
from tidemq.broker.pop.compensate import compensate_pop_subscription
from tidemq.broker.pop.extra_info import (
    POP_ORDER_REVIVE_QUEUE,
    build_extra_info,
    msg_offset_entry,
    pop_retry_topic,
    revive_topic,
    start_offset_entry,
)
from tidemq.broker.pop.filters import PopFilter, pop_filter
from tidemq.broker.pop.order import OrderPopManager
from tidemq.broker.pop.polling import PollingFullError, PopLongPolling
from tidemq.broker.pop.records import TAG_CK, CheckPoint
from tidemq.broker.pop.result import PROPERTY_POP_CK, PopError, PoppedMessage, PopResult
from tidemq.broker.pop.revive import PopReviveService
from tidemq.broker.pop.stats import PopStats
from tidemq.clock import now_ms
from tidemq.protocol.body import EXPRESSION_TYPE_TAG
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.filter import SUB_ALL
from tidemq.protocol.headers.pop import INIT_MODE_MIN
from tidemq.protocol.message import MessageConst
from tidemq.protocol.message_codec import decode_message, encode_stored_message
from tidemq.protocol.record_layout import (
    AFTER_BORN_STORE_HOST,
    AFTER_STORE_RECONSUME_TIMES,
    POS_BORN_HOST,
    POS_SYS_FLAG,
    born_host_size,
    store_host_size,
)
from tidemq.store.results import GetMessageStatus, MessageExtBrokerInner

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

log = logging.getLogger(__name__)

__all__ = ["MAX_POP_NUMS", "PopError", "PopResult", "PopService", "PoppedMessage"]

MAX_POP_NUMS = 32
"""Most messages one pop may ask for (RocketMQ answers INVALID_PARAMETER above)."""
PERM_RW = 6
_MOVED = frozenset(
    {
        GetMessageStatus.NO_MATCHED_MESSAGE,
        GetMessageStatus.MESSAGE_WAS_REMOVING,
        GetMessageStatus.OFFSET_TOO_SMALL,
        GetMessageStatus.OFFSET_OVERFLOW_BADLY,
        GetMessageStatus.OFFSET_FOUND_NULL,
    }
)
"""Store statuses after which the group's offset moves to ``next_begin_offset`` without a message."""


_I32 = struct.Struct(">i")


def reconsume_times_of(record: bytes) -> int:
    """RECONSUMETIMES of a stored record, read in place (no decode)."""
    sys_flag = _I32.unpack_from(record, POS_SYS_FLAG)[0]
    at = POS_BORN_HOST + born_host_size(sys_flag) + AFTER_BORN_STORE_HOST + store_host_size(sys_flag)
    return int(_I32.unpack_from(record, at + AFTER_STORE_RECONSUME_TIMES)[0])


class _PopContext:
    """One pop's request and what it collected so far."""

    __slots__ = (
        "attempt_id",
        "group",
        "init_mode",
        "invisible_ms",
        "max_nums",
        "order",
        "record_filter",
        "result",
        "tag_codes",
        "topic",
    )

    def __init__(
        self,
        group: str,
        topic: str,
        max_nums: int,
        invisible_ms: int,
        order: bool,
        pop_filter: PopFilter,
        init_mode: int,
        result: PopResult,
        attempt_id: str | None = None,
    ) -> None:
        self.attempt_id = attempt_id
        self.group = group
        self.topic = topic
        self.max_nums = max_nums
        self.invisible_ms = invisible_ms
        self.order = order
        self.tag_codes, self.record_filter = pop_filter
        self.init_mode = init_mode
        self.result = result

    @property
    def wanted(self) -> int:
        return self.max_nums - len(self.result.messages)


class PopService:
    """POP for one broker: pops, acks, invisible-time changes, revive, long polling, counters.

    Args:
        broker: the owning broker (config, store, topic / group / offset managers).

    Attributes:
        revive_topic: ``rmq_sys_REVIVE_LOG_<cluster>``.
        stats: POP counters per group (in-flight, acks, redeliveries) for /metrics.
        revive: the :class:`PopReviveService`.
        order: the :class:`OrderPopManager` (FIFO pops).

    Every method must run on the broker's event loop (the pops of one loop never interleave, so no
    queue lock is needed, unlike RocketMQ's ``QueueLockManager``).
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.revive_topic = revive_topic(cfg.broker_cluster_name)
        self.revive_queue_num = max(1, cfg.revive_queue_num)
        self.stats = PopStats()
        self.polling = PopLongPolling(cfg.pop_polling_size)
        self.order = OrderPopManager(self)
        self.revive = PopReviveService(self)
        self.acks = PopAcks(self)
        self._revive_counter = 0
        self._queue_counter = 0
        self._rng = random.Random()
        self._retry_topics: dict[str, str] = {}
        self.started = False

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the revive topic, recover in-flight state from the revive log (offsets, order
        batches, check-points still to revive), start the revive task. A slave only serves reads."""
        tcm = self.broker.topic_config_manager
        tcm.create_topic_in_send_message_back_method(self.revive_topic, self.revive_queue_num, PERM_RW, 0)
        if not self.broker.config.is_slave:
            await self.revive.start()
        self.started = True

    async def shutdown(self) -> None:
        """Stop the revive task (committing its progress) and wake every waiting pop."""
        self.started = False
        self.polling.wake_all()
        await self.revive.shutdown()

    def notify_arriving(self, topic: str) -> None:
        """A message arrived on ``topic``: wake pops waiting on it (the store's arrival listener)."""
        self.polling.notify(topic)

    # -- checks ----------------------------------------------------------------------------------

    def _check_pop(self, group: str, topic: str, queue_id: int, max_nums: int, invisible_ms: int) -> None:
        broker = self.broker
        self.check_started()
        if not broker.config.is_readable or broker.config.is_slave:
            raise PopError(
                ResponseCode.NO_PERMISSION, f"the broker[{broker.addr}] popping message is forbidden"
            )
        if not 1 <= max_nums <= MAX_POP_NUMS:
            raise PopError(
                ResponseCode.INVALID_PARAMETER,
                f"the max message num must be in [1, {MAX_POP_NUMS}], got {max_nums}",
            )
        if invisible_ms <= 0:
            raise PopError(
                ResponseCode.INVALID_PARAMETER, f"invisible time must be > 0 ms, got {invisible_ms}"
            )
        tc = broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            raise PopError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not tc.perm & 4:
            raise PopError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id < -1 or queue_id >= tc.read_queue_nums:
            raise PopError(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        sgc = broker.subscription_group_manager.find_subscription_group_config(group)
        if sgc is None:
            raise PopError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
            )
        if not sgc.consume_enable:
            raise PopError(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")

    # -- pop -------------------------------------------------------------------------------------

    def pop(
        self,
        group: str,
        topic: str,
        queue_id: int,
        max_nums: int,
        invisible_ms: int,
        *,
        order: bool = False,
        expression_type: str | None = EXPRESSION_TYPE_TAG,
        expression: str | None = SUB_ALL,
        init_mode: int = 1,
        attempt_id: str | None = None,
    ) -> PopResult:
        """Pop up to ``max_nums`` (1..32) visible messages of ``topic`` for ``group`` from queue
        ``queue_id`` (-1 = every queue, from a rotating start), invisible for ``invisible_ms``.

        Non-order pops also read the pop retry topic (first in ``pop_from_retry_probability`` % of
        pops, else when the topic gave fewer than asked). ``order=True`` is a FIFO pop: a queue
        with a batch in flight is skipped until that batch is acked or its invisible time ends; then
        its un-acked messages come again, in order, with attempt + 1. A FIFO pop with the
        ``attempt_id`` of the batch in flight (a client retrying a pop whose answer it lost) gets that
        batch again at once, new handles, same attempt. ``init_mode`` (0 MIN, 1 MAX) places a group
        new to a queue. Records the group's subscription for admin views, as a heartbeat would
        (``pop/compensate.py``). Returns at once (see :meth:`pop_async` for long polling).

        Raises:
            PopError: NO_PERMISSION, INVALID_PARAMETER (max_nums, invisible time, queue id),
                TOPIC_NOT_EXIST, SUBSCRIPTION_GROUP_NOT_EXIST, SUBSCRIPTION_PARSE_FAILED (a filter
                that does not parse; ``expression_type`` TAG or SQL92),
                SYSTEM_ERROR (the revive log could not be written).
        """
        self._check_pop(group, topic, queue_id, max_nums, invisible_ms)
        filters = pop_filter(self.broker, group, topic, expression_type, expression)
        compensate_pop_subscription(self.broker, group, topic, expression_type, expression)
        pop_time = now_ms()
        revive_qid = POP_ORDER_REVIVE_QUEUE if order else self.next_revive_queue_id()
        result = PopResult(topic, self.broker.config.broker_name, pop_time, invisible_ms, revive_qid)
        ctx = _PopContext(group, topic, max_nums, invisible_ms, order, filters, init_mode, result, attempt_id)
        if order:
            self._pop_topic(ctx, topic, queue_id)
        else:
            retry = self.retry_topic_of(group, topic)
            retry_first = self._rng.randrange(100) < self.broker.config.pop_from_retry_probability
            if retry_first:
                self._pop_topic(ctx, retry, -1)
            if ctx.wanted > 0:
                self._pop_topic(ctx, topic, queue_id)
            if not retry_first and ctx.wanted > 0:
                self._pop_topic(ctx, retry, -1)
        if result.messages:
            self.stats.on_pop(group, topic, len(result.messages))
            self.broker.broker_stats.inc_get(
                group, topic, len(result.messages), sum(len(m.record) for m in result.messages)
            )
        return result

    async def pop_async(
        self,
        group: str,
        topic: str,
        queue_id: int,
        max_nums: int,
        invisible_ms: int,
        poll_ms: int,
        *,
        order: bool = False,
        expression_type: str | None = EXPRESSION_TYPE_TAG,
        expression: str | None = SUB_ALL,
        init_mode: int = 1,
        attempt_id: str | None = None,
    ) -> PopResult:
        """:meth:`pop` with long polling: while nothing is found, wait up to ``poll_ms`` for an
        arrival (on the topic or its retry topic, or an order batch becoming visible) and pop again.
        With SYNC_FLUSH the answer waits until the check-points are on disk.

        Returns the result (``polling_timed_out`` True when the whole poll found nothing).

        Raises:
            PopError: as :meth:`pop`; POLLING_FULL when ``pop_polling_size`` pops already wait on
                the topic.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, poll_ms) / 1000.0
        kwargs = {
            "order": order,
            "expression_type": expression_type,
            "expression": expression,
            "init_mode": init_mode,
            "attempt_id": attempt_id,
        }
        while True:
            result = self.pop(group, topic, queue_id, max_nums, invisible_ms, **kwargs)  # type: ignore[arg-type]
            remaining = deadline - loop.time()
            if result.messages or poll_ms <= 0 or not self.started:
                break
            if remaining <= 0:
                result.polling_timed_out = True
                break
            topics = [topic] if order else [topic, self.retry_topic_of(group, topic)]
            try:
                await self.polling.wait(topics, remaining)
            except PollingFullError as exc:
                raise PopError(ResponseCode.POLLING_FULL, str(exc)) from exc
        if result.messages and self.broker.is_sync_flush:
            await self.broker.wait_for_flush(self.broker.store.get_max_phy_offset())
        return result

    def retry_topic_of(self, group: str, topic: str) -> str:
        """The pop retry topic of ``group`` popping ``topic`` (``KeyBuilder.buildPopRetryTopic``,
        V1 or V2 by ``enable_retry_topic_v2``), remembered for :meth:`popped_topic_of`."""
        retry = pop_retry_topic(topic, group, self.broker.config.enable_retry_topic_v2)
        self._retry_topics[retry] = topic
        return retry

    def popped_topic_of(self, retry_topic: str) -> str | None:
        """The topic whose pop retry topic ``retry_topic`` is, when this broker has made or seen it
        since it started (:meth:`retry_topic_of`); else None."""
        return self._retry_topics.get(retry_topic)

    def next_revive_queue_id(self) -> int:
        """The revive queue the next unordered check point goes to (round robin over
        ``revive_queue_num``, as ``PopMessageProcessor`` takes ``reviveQid``)."""
        revive_qid = self._revive_counter % self.revive_queue_num
        self._revive_counter += 1
        return revive_qid

    def _pop_topic(self, ctx: _PopContext, topic: str, queue_id: int) -> None:
        """Pop from one queue of ``topic``, or from each (rotating start) while more are wanted."""
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        if tc is None or not tc.perm & 4 or tc.read_queue_nums <= 0:
            return
        if queue_id >= 0:
            self._pop_queue(ctx, topic, queue_id)
            return
        n = tc.read_queue_nums
        start = self._queue_counter
        self._queue_counter += 1
        for i in range(n):
            if ctx.wanted <= 0:
                break
            self._pop_queue(ctx, topic, (start + i) % n)

    def pop_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        """The group's next offset in a queue; a group new to it starts per ``init_mode`` (a retry
        topic always at its minimum), and that start is committed at once."""
        offsets = self.broker.consumer_offset_manager
        offset = offsets.query_offset(group, topic, queue_id)
        if offset >= 0:
            return offset
        store = self.broker.store
        if init_mode == INIT_MODE_MIN or topic in self._retry_topics:
            offset = store.get_min_offset_in_queue(topic, queue_id)
        else:
            offset = store.get_max_offset_in_queue(topic, queue_id)
            if store.get_min_offset_in_queue(
                topic, queue_id
            ) == 0 and not store.lookup.check_in_disk_by_consume_offset(topic, queue_id, 0):
                offset = 0  # initPopOffsetByCheckMsgInMem: the whole queue is still in memory
        offsets.commit_offset("POP", group, topic, queue_id, offset)
        return offset

    def _pop_queue(self, ctx: _PopContext, topic: str, queue_id: int) -> None:
        if ctx.order:
            self.order.pop_queue(ctx, topic, queue_id)
            return
        group, store = ctx.group, self.broker.store
        offset = self.pop_offset(group, topic, queue_id, ctx.init_mode)
        got = store.get_message(group, topic, queue_id, offset, ctx.wanted, ctx.tag_codes, ctx.record_filter)
        result = ctx.result
        if got.status is not GetMessageStatus.FOUND:
            if got.status in _MOVED and got.next_begin_offset != offset:
                self.broker.consumer_offset_manager.commit_offset(
                    "POP", group, topic, queue_id, got.next_begin_offset
                )
            result.rest_num += max(0, got.max_offset - max(offset, got.next_begin_offset))
            return
        offsets = got.message_queue_offsets
        ck = CheckPoint(
            start_offset=offset,
            pop_time=result.pop_time,
            invisible_time=ctx.invisible_ms,
            queue_id=queue_id,
            topic=topic,
            group=group,
            diffs=[o - offset for o in offsets],
            revive_qid=result.revive_qid,
            next_offset=got.next_begin_offset,
            broker_name=result.broker_name,
        )
        self.put_revive_record(result.revive_qid, TAG_CK, ck.encode())  # before the offset moves
        self.revive.note_check_point(ck)
        self.broker.consumer_offset_manager.commit_offset(
            "POP", group, topic, queue_id, got.next_begin_offset
        )
        result.rest_num += max(0, got.max_offset - got.next_begin_offset)
        result.start_offset_info.append(start_offset_entry(topic, queue_id, offset))
        result.msg_offset_info.append(msg_offset_entry(topic, queue_id, offsets))
        is_retry = topic != ctx.topic
        for record, queue_offset in zip(got.message_buffers, offsets, strict=True):
            extra = build_extra_info(
                offset,
                result.pop_time,
                ctx.invisible_ms,
                result.revive_qid,
                topic,
                result.broker_name,
                queue_id,
                queue_offset,
            )
            reconsume = reconsume_times_of(record)
            if is_retry:
                record = self.reencode_for(record, ctx.topic, extra)
            result.messages.append(PoppedMessage(record, topic, queue_id, queue_offset, extra, reconsume))

    @staticmethod
    def reencode_for(record: bytes, topic: str, extra_info: str) -> bytes:
        """A retry topic's record re-encoded as a message of ``topic`` carrying ``POP_CK``."""
        msg, _ = decode_message(record, decompress=False)
        props = dict(msg.properties)
        props[PROPERTY_POP_CK] = extra_info
        return encode_stored_message(
            topic=topic,
            body=msg.body,
            properties=props,
            queue_id=msg.queue_id,
            flag=msg.flag,
            queue_offset=msg.queue_offset,
            commit_log_offset=msg.commit_log_offset,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_timestamp=msg.store_timestamp,
            store_host=msg.store_host,
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
        )

    # -- the revive log --------------------------------------------------------------------------

    def put_revive_record(self, revive_qid: int, tag: str, body: bytes) -> None:
        """Append one record to the revive log (queue ``revive_qid``).

        Raises:
            PopError: SYSTEM_ERROR when the store refuses the put.
        """
        broker = self.broker
        inner = MessageExtBrokerInner(
            self.revive_topic,
            body,
            properties={MessageConst.PROPERTY_TAGS: tag},
            queue_id=revive_qid % self.revive_queue_num,
            born_timestamp=now_ms(),
            born_host=broker.addr,
        )
        result = broker.store.put_message(inner)
        if not result.is_ok:
            raise PopError(
                ResponseCode.SYSTEM_ERROR,
                f"writing the POP {tag} record failed: {result.status.value} {result.remark}",
            )
        self.revive.note_record()

    # -- ack / change invisible time -------------------------------------------------------------

    def check_started(self) -> None:
        """Refuse a request while POP is not ready.

        Raises:
            PopError: SYSTEM_BUSY while the revive log is not recovered yet (or shutting down).
        """
        if not self.started:
            raise PopError(ResponseCode.SYSTEM_BUSY, "[STARTING] POP is not ready yet, try later")

    def ack(self, group: str, topic: str, extra_info: str, offset: int | None = None) -> None:
        """Ack one popped message by its receipt handle (``offset`` only for a 7-field handle).
        An ack of an expired or unknown check-point succeeds and changes nothing (RocketMQ).

        Raises:
            PopError: INVALID_PARAMETER (a handle that does not parse), TOPIC_NOT_EXIST, NO_MESSAGE
                (an offset outside the queue), SYSTEM_BUSY (not started), SYSTEM_ERROR.
        """
        self.acks.ack(group, topic, extra_info, offset)

    def batch_ack(
        self,
        group: str,
        topic: str,
        retry: str,
        queue_id: int,
        start_offset: int,
        pop_time: int,
        invisible_time: int,
        revive_qid: int,
        offsets: list[int],
    ) -> None:
        """Ack several messages of one check-point (one BATCH_ACK_MESSAGE entry: the handle fields
        they share, and their queue offsets).

        Raises:
            PopError: as :meth:`ack`.
        """
        self.acks.batch_ack(
            group, topic, retry, queue_id, start_offset, pop_time, invisible_time, revive_qid, offsets
        )

    def change_invisible_time(
        self, group: str, topic: str, extra_info: str, invisible_ms: int, offset: int | None = None
    ) -> str:
        """Make a popped message invisible for ``invisible_ms`` from now; returns its new receipt
        handle, which replaces the old one (ack with the new one). Non-order: a new check-point for
        this one message, then an ack of the old one, as RocketMQ does, so a later revive counts
        one more attempt. Order: the batch's invisible window moves.

        Raises:
            PopError: as :meth:`ack`; INVALID_PARAMETER for ``invisible_ms`` <= 0; NO_MESSAGE with
                ``expired`` set when the handle's invisible time is already over (the message may
                have been revived: changing it would deliver it twice).
        """
        return self.acks.change_invisible_time(group, topic, extra_info, invisible_ms, offset)


def pop_metric_rows(broker: Broker) -> list[tuple[str, str, int, int, int, int, int]]:
    """``(group, topic, in_flight, popped, acked, revived, dead_lettered)`` of every POP group, for
    /metrics (read on the broker's loop). In-flight = un-acked messages the revive holds (acks are
    merged at its next step, within ``revive_interval``) plus order batches' un-acked messages."""
    service = getattr(broker, "pop_service", None)
    if service is None:
        return []
    in_flight = service.revive.in_flight_by_group()
    for key, n in service.order.in_flight_by_group().items():
        in_flight[key] = in_flight.get(key, 0) + n
    counters = service.stats.snapshot()
    rows = []
    for key in sorted(set(in_flight) | set(counters)):
        c = counters.get(key)
        rows.append(
            (
                key[0],
                key[1],
                in_flight.get(key, 0),
                c.popped if c else 0,
                c.acked if c else 0,
                c.revived if c else 0,
                c.dead_lettered if c else 0,
            )
        )
    return rows
