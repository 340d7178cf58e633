"""The check-back pass: half messages with no decision are asked about, or discarded.

Mirrors RocketMQ 4.9's ``TransactionalMessageServiceImpl.check`` and
``AbstractTransactionalMessageCheckListener`` (transactions.md §1.4). Runs on the broker's event
loop, once every ``transaction_check_interval`` (:class:`TransactionalMessageService` owns the
timer and the pending table this reads and updates).

A pass walks ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 from ``CID_RMQ_SYS_TRANS``'s offset: decided and
superseded records are passed over; a record stored after the pass began, or (without
``CHECK_IMMUNITY_TIME_IN_SECONDS``) younger than ``transaction_time_out``, ends it. A record checked
``transaction_check_max`` times (or older than ``file_reserved_time``) goes to
``TRANS_CHECK_MAX_TIME_TOPIC``; any other is re-appended with ``TRANSACTION_CHECK_TIMES`` + 1 and
``TRAN_PREPARED_QUEUE_OFFSET`` = its transaction's first record, and CHECK_TRANSACTION_STATE (39,
oneway, offsets as strings) asks one live producer of its ``PGROUP`` about the copy. At the end the
group's half offset moves to where the pass stopped and its op offset past every op record stored
before that half record (none of them can concern it or any later one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from typing import TYPE_CHECKING

from tidemq.broker.transaction.bridge import (
    CID_SYS_TRANS,
    IMMUNITY,
    check_body,
    check_times,
    copy_batch,
    discard_batch,
    origin_of,
)
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import CheckTransactionStateRequestHeader
from tidemq.protocol.message import MessageConst, MessageExt
from tidemq.protocol.topic import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from tidemq.store.results import PutMessageStatus

if TYPE_CHECKING:
    from tidemq.broker.transaction.service import PendingTransaction, TransactionalMessageService
    from tidemq.store.consume_queue import ConsumeQueue

__all__ = ["TransactionChecker"]

log = logging.getLogger(__name__)

_YIELD_EVERY = 128
"""Records looked at between two yields to the event loop during a pass."""
_OFFSET_HOST = "127.0.0.1"


class TransactionChecker:
    """The check pass of one :class:`TransactionalMessageService`. Mirrors
    ``TransactionalMessageServiceImpl.check``.

    Args:
        service: the owning service (its broker, pending table and counters).
    """

    def __init__(self, service: TransactionalMessageService) -> None:
        self.service = service
        self.broker = service.broker
        self._rng = random.Random()

    async def run_pass(self) -> int:
        """One pass of ``TransactionalMessageServiceImpl.check``; returns the checks sent.

        From ``CID_RMQ_SYS_TRANS``'s half offset: decided and superseded records are passed over;
        a record stored after the pass began stops it; one checked ``transaction_check_max`` times
        (or older than ``file_reserved_time``) is discarded to ``TRANS_CHECK_MAX_TIME_TOPIC`` with
        one WARNING; one younger than ``transaction_time_out`` stops the pass (with
        ``CHECK_IMMUNITY_TIME_IN_SECONDS``: younger than that, it is re-appended for later); any
        other is re-appended with ``TRANSACTION_CHECK_TIMES`` + 1 and its copy checked with
        CHECK_TRANSACTION_STATE on one live channel of its producer group.
        """
        broker = self.broker
        if broker.config.is_slave or broker.store is None or not broker.store.running:
            return 0
        self.service.ensure_loaded()
        half_cq = broker.store.find_consume_queue(TRANS_HALF_TOPIC, 0)
        if half_cq is None:
            return 0
        start = self.service.clock_ms()
        offset = self.service.queue_offset(TRANS_HALF_TOPIC, half_cq)
        end = half_cq.get_max_offset_in_queue()
        sent = looked = 0
        while offset < end:
            looked += 1
            if looked % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
            msg = self.service.read(half_cq, offset)
            tx = self.service.pending.get(origin_of(msg)) if msg is not None else None
            if msg is None or tx is None or tx.latest != offset:
                offset += 1  # decided, discarded or superseded by a newer copy
                continue
            if msg.store_timestamp >= start:
                break
            step = self._visit(msg, tx, start)
            if step is None:
                break
            if isinstance(step, MessageExt):
                sent += await self._send_check(step, tx.producer_group)
            offset += 1
        self._commit_progress(half_cq, offset, start)
        return sent

    def _visit(self, msg: MessageExt, tx: PendingTransaction, now: int) -> MessageExt | bool | None:
        """One pending record: None = stop the pass here, True = done with it, a message = the check
        copy to send a check for."""
        cfg = self.broker.config
        reserved_ms = self.broker.store_config.file_reserved_time * 3600 * 1000
        if check_times(msg) >= cfg.transaction_check_max or now - msg.born_timestamp > reserved_ms:
            self._discard(msg)
            return True
        age = now - msg.born_timestamp
        raw = msg.get_property(IMMUNITY)
        immunity = cfg.transaction_time_out
        if raw is not None:
            with contextlib.suppress(ValueError):
                immunity = max(int(raw) * 1000, cfg.transaction_time_out)
            if 0 <= age < immunity:
                copy = self._append_copy(msg, tx, count_check=False)
                return None if copy is None else True
        elif 0 <= age < immunity:
            return None
        copy = self._append_copy(msg, tx, count_check=True)
        return copy if copy is not None else None

    def _append_copy(
        self, msg: MessageExt, tx: PendingTransaction, *, count_check: bool
    ) -> MessageExt | None:
        store = self.broker.store
        result = store.put_message_batch(copy_batch(msg, count_check=count_check))
        append = result.append_result
        if result.status is not PutMessageStatus.PUT_OK or append is None:
            log.warning(
                "transactions: re-appending half message %s failed: %s", msg.msg_id, result.status.value
            )
            return None
        copy = store.lookup.look_message_by_offset(append.wrote_offset)
        if copy is None:
            return None
        copy.queue_offset = append.logics_offset
        tx.latest = append.logics_offset
        return copy

    def _discard(self, msg: MessageExt) -> None:
        broker = self.broker
        self.service.ensure_topic(TRANS_CHECK_MAX_TIME_TOPIC)
        result = broker.store.put_message_batch(discard_batch(msg))
        if result.status is not PutMessageStatus.PUT_OK:
            log.warning(
                "transactions: discarding half message %s failed: %s", msg.msg_id, result.status.value
            )
            return
        self.service.forget(origin_of(msg))
        self.service.discarded += 1
        log.warning(
            "transactions: half message %s of producer group %r for topic %s checked %d times without a "
            "decision; discarded to %s",
            msg.msg_id,
            msg.get_property(MessageConst.PROPERTY_PRODUCER_GROUP) or "",
            msg.get_property(MessageConst.PROPERTY_REAL_TOPIC) or "?",
            check_times(msg),
            TRANS_CHECK_MAX_TIME_TOPIC,
        )

    async def _send_check(self, copy: MessageExt, group: str) -> int:
        """CHECK_TRANSACTION_STATE (39, oneway) for ``copy`` to one live channel of ``group``
        (``Broker2Client.checkProducerTransactionState``); 1 if sent."""
        infos = [i for i in self.broker.producer_manager.get_producer_channels(group) if i.channel.is_active]
        if not infos:
            log.debug("transactions: no live producer of group %r to check %s", group, copy.msg_id)
            return 0
        info = self._rng.choice(infos)
        uniq = copy.get_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=copy.queue_offset,
            commit_log_offset=copy.commit_log_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=copy.offset_msg_id,
        )
        request = RemotingCommand.create_request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), check_body(copy), oneway=True
        )
        try:
            await info.channel.invoke_oneway(request)
        except Exception as exc:
            log.warning(
                "transactions: check of %s to %s failed: %s", copy.msg_id, info.channel.remote_addr, exc
            )
            return 0
        self.service.checks_sent += 1
        return 1

    def _commit_progress(self, half_cq: ConsumeQueue, offset: int, start: int) -> None:
        """Store the half offset reached and move the op offset past the op records stored before
        the first half record still to look at (or before the pass began), once the fates those
        op records told are on disk; delete the fate files of half records gone."""
        store = self.broker.store
        com = self.broker.consumer_offset_manager
        fates = self.service.fates
        fates.sync()  # the op records this passes over are read at start-up no more
        fates.delete_below(half_cq.get_min_offset_in_queue())
        com.commit_offset(_OFFSET_HOST, CID_SYS_TRANS, TRANS_HALF_TOPIC, 0, offset)
        horizon = start
        if offset < half_cq.get_max_offset_in_queue():
            stored = store.lookup.get_message_store_timestamp(TRANS_HALF_TOPIC, 0, offset)
            if stored >= 0:
                horizon = min(horizon, stored)
        op_cq = store.find_consume_queue(TRANS_OP_HALF_TOPIC, 0)
        if op_cq is None:
            return
        low = self.service.queue_offset(TRANS_OP_HALF_TOPIC, op_cq)
        high = op_cq.get_max_offset_in_queue()
        while low < high:  # first op record stored at or after the horizon
            mid = (low + high) // 2
            if 0 <= store.lookup.get_message_store_timestamp(TRANS_OP_HALF_TOPIC, 0, mid) < horizon:
                low = mid + 1
            else:
                high = mid
        com.commit_offset(_OFFSET_HOST, CID_SYS_TRANS, TRANS_OP_HALF_TOPIC, 0, low)
