"""Transactional messages on the broker: half puts, ends, the pending table, the check pass.

Mirrors RocketMQ 4.9's ``TransactionalMessageServiceImpl`` + ``TransactionalMessageCheckService``
(transactions.md §1). Every fact lives in the commit log and consume queues:

* ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0: half records (originals, check copies, immunity copies);
* ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0: op records (tag ``d``), one per commit or rollback;
* ``CID_RMQ_SYS_TRANS``'s offsets on both queues: how far the check service has looked.

In memory there is only :attr:`TransactionalMessageService.pending`, ``{origin: PendingTransaction}``
of the transactions with no decision yet (the *origin* is the half queue offset of a
transaction's first record; copies carry it in ``TRAN_PREPARED_QUEUE_OFFSET``). It is rebuilt at
start-up from the two queues (:meth:`TransactionalMessageService.load`) and is what decides:

* END_TRANSACTION acts only while the transaction is pending: the first decision wins, a
  duplicate or late END (a check answer racing the producer's own END, a retried END after a
  restart) writes nothing, so a committed transaction is put on its real topic exactly once.
  RocketMQ re-puts on every matching commit; tidemq does not. How a decided transaction ended is
  kept on disk (:mod:`tidemq.broker.transaction.fates`): a late COMMIT of a committed one answers
  SUCCESS, of a rolled-back or discarded one SYSTEM_ERROR (the message will never be delivered);
  a late ROLLBACK answers SUCCESS.
* A commit puts the real message and its op record in one append (one contiguous write). A crash
  can only cut the op off the commit log's tail; :meth:`load` then finds the committed message
  as the commit log's last record and writes the missing op
  (:meth:`TransactionalMessageService.repair_torn_commit`).

The check pass (:mod:`tidemq.broker.transaction.check`) walks the half queue from the group's
offset; which op records it may skip over next time is decided by store time: an op written before
the first record still to look at cannot concern any record from there on (a copy is only made
while its transaction is pending).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tidemq.broker.transaction.bridge import (
    CID_SYS_TRANS,
    END_PROPERTY,
    committed_batch,
    committed_message,
    op_batch,
    op_message,
    origin_of,
    parse_op_body,
)
from tidemq.broker.transaction.check import TransactionChecker
from tidemq.broker.transaction.fates import (
    COMMITTED,
    DECIDED,
    DISCARDED,
    ROLLED_BACK,
    UNKNOWN,
    TransactionFates,
    fate_name,
)
from tidemq.broker.transaction.fates_rebuild import rebuild_fates
from tidemq.clock import now_ms
from tidemq.protocol.message import MessageConst, MessageExt
from tidemq.protocol.message_codec import MessageSysFlag
from tidemq.protocol.topic import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from tidemq.store.results import (
    AppendMessageResult,
    MessageExtBatch,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
)

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.store.consume_queue import ConsumeQueue

__all__ = ["PendingTransaction", "TransactionalMessageService"]

log = logging.getLogger(__name__)

IMAGE_CACHE_MAX = 8192
"""Half records kept decoded in memory for their END (the newest pending ones; others are read)."""


@dataclass(slots=True)
class PendingTransaction:
    """A transaction with no decision yet.

    Attributes:
        producer_group: ``PGROUP`` of its half message ("" when the producer set none).
        topic: its real topic (``REAL_TOPIC``).
        born_timestamp: the producer's send time (ms since the epoch).
        latest: half queue offset of its newest record (older records are superseded copies).
        image_key: commit-log offset of its half record while the service keeps that record's
            decoded image in memory (an END then reads nothing), else -1.
    """

    producer_group: str
    topic: str
    born_timestamp: int
    latest: int
    image_key: int = -1


class TransactionalMessageService:
    """The broker's transaction state and check-back. Mirrors ``TransactionalMessageServiceImpl``.

    Args:
        broker: the owning broker (config: ``transaction_time_out``, ``transaction_check_max``,
            ``transaction_check_interval``, ``reject_transaction_message``; its store, offsets and
            producer manager).

    Runs on the broker's event loop; store calls are synchronous and short.

    Attributes:
        pending: ``{origin half queue offset: PendingTransaction}``.
        checks_sent: CHECK_TRANSACTION_STATE requests sent since start.
        discarded: half messages moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` since start.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.pending: dict[int, PendingTransaction] = {}
        self.loaded = False
        self.checks_sent = 0
        self.discarded = 0
        self.clock_ms = now_ms
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._stopped = False
        self.checker = TransactionChecker(self)
        self._images: dict[int, MessageExt] = {}
        """``{commit-log offset: the half record as stored}`` for pending transactions' ENDs."""
        root = Path(broker.store_config.store_path_root_dir).expanduser()
        self.fates = TransactionFates(root / "transaction" / "fates")

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the pending table (a master) and start the check service."""
        if not self.broker.config.is_slave:
            self.load()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="transaction-check")

    async def shutdown(self) -> None:
        """Stop the check service (state is all on disk already)."""
        self._stopped = True
        self._wakeup.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        self.fates.close()

    def wakeup(self) -> None:
        """Run a check pass now instead of at the end of the current interval."""
        self._wakeup.set()

    async def _run(self) -> None:
        while not self._stopped:
            interval = max(0.01, self.broker.config.transaction_check_interval / 1000.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), interval)
            self._wakeup.clear()
            if self._stopped:
                return
            try:
                await self.check_pass()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction check pass failed")

    # -- loading --------------------------------------------------------------------------------

    def queue_offset(self, topic: str, cq: ConsumeQueue) -> int:
        """Where the check service resumes in ``topic``'s queue 0: the ``CID_RMQ_SYS_TRANS`` offset, clamped
        to the queue's ``[min, max]``."""
        stored = self.broker.consumer_offset_manager.query_offset(CID_SYS_TRANS, topic, 0)
        low, high = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        return min(max(stored, low), high)

    def read(self, cq: ConsumeQueue, offset: int) -> MessageExt | None:
        """The message at queue ``offset`` of ``cq`` (its ``queue_offset`` set), or None when the entry or its
        commit-log record is gone."""
        unit = cq.get_unit(offset)
        if unit is None or not unit.is_valid:
            return None
        msg = self.broker.store.lookup.look_message_by_offset(unit.commit_log_offset)
        if msg is not None:
            msg.queue_offset = offset
        return msg

    def ensure_loaded(self) -> None:
        """:meth:`load` once (a slave that became master loads on first use)."""
        if not self.loaded:
            self.load()

    def load(self) -> None:
        """Rebuild :attr:`pending` from the op records after ``CID_RMQ_SYS_TRANS``'s op offset and the
        half records after its half offset, then :meth:`repair_torn_commit`; the fates of the
        transactions decided before, once (:func:`~tidemq.broker.transaction.fates_rebuild.rebuild_fates`)."""
        store = self.broker.store
        rebuild_fates(self)
        resolved: set[int] = set()
        op_cq = store.find_consume_queue(TRANS_OP_HALF_TOPIC, 0)
        if op_cq is not None:
            for offset in range(
                self.queue_offset(TRANS_OP_HALF_TOPIC, op_cq), op_cq.get_max_offset_in_queue()
            ):
                op = self.read(op_cq, offset)
                if op is not None:
                    resolved.update(self.note_fate(op))
        records: list[MessageExt] = []
        half_cq = store.find_consume_queue(TRANS_HALF_TOPIC, 0)
        if half_cq is not None:
            for offset in range(
                self.queue_offset(TRANS_HALF_TOPIC, half_cq), half_cq.get_max_offset_in_queue()
            ):
                msg = self.read(half_cq, offset)
                if msg is not None:
                    records.append(msg)
                    if offset in resolved:
                        resolved.add(origin_of(msg))
        pending: dict[int, PendingTransaction] = {}
        for msg in records:
            origin = origin_of(msg)
            if origin in resolved:
                continue
            tx = pending.get(origin)
            if tx is None:
                pending[origin] = _pending_of(msg, msg.queue_offset)
            else:
                tx.latest = msg.queue_offset
        self.pending = pending
        self._images = {}
        self.loaded = True
        self.repair_torn_commit()
        if pending:
            log.info("transactions: %d pending half messages after start-up", len(pending))

    def note_fate(self, op: MessageExt) -> list[int]:
        """Record the fate an op record read at start-up tells (unless recorded already); returns
        the half queue offsets it ends. tidemq's op records name the origin last and carry
        ``TIDEMQ_TX_END``; older ones only say "decided"."""
        ended = parse_op_body(op.body)
        if ended:
            raw = op.get_property(END_PROPERTY)
            fate = COMMITTED if raw == "8" else ROLLED_BACK if raw == "12" else DECIDED
            for origin in ended[-1:] if fate != DECIDED else ended:
                if self.fates.get(origin) == UNKNOWN:
                    self.fates.set(origin, fate)
        return ended

    def repair_torn_commit(self) -> bool:
        """Write the op record a crash cut off a commit: when the commit log's last record is a
        committed transactional message whose transaction is still pending. Returns True if it did."""
        store = self.broker.store
        store.find_consume_queue(TRANS_HALF_TOPIC, 0)  # settles pending dispatches
        last = None
        for cq in list(store.consume_queue_table.values()):
            high = cq.get_max_offset_in_queue()
            unit = cq.get_unit(high - 1) if high > cq.get_min_offset_in_queue() else None
            if (
                unit is not None
                and unit.is_valid
                and (last is None or unit.commit_log_offset > last.commit_log_offset)
            ):
                last = unit
        if last is None or last.commit_log_offset + last.size != store.get_max_phy_offset():
            return False
        msg = store.lookup.look_message_by_offset(last.commit_log_offset)
        if (
            msg is None
            or MessageSysFlag.get_transaction_value(msg.sys_flag) != MessageSysFlag.TRANSACTION_COMMIT_TYPE
        ):
            return False
        half = store.lookup.look_message_by_offset(msg.prepared_transaction_offset)
        if half is None or half.topic != TRANS_HALF_TOPIC or not _commit_of(msg, half):
            return False
        origin = origin_of(half)
        if origin not in self.pending:
            return False
        self.ensure_topic(TRANS_OP_HALF_TOPIC)
        result = store.put_message(op_message(half, self.broker.addr or "127.0.0.1:0", commit=True))
        if result.status is not PutMessageStatus.PUT_OK:
            log.warning(
                "transactions: cannot complete the commit of %s cut by a crash: %s",
                half.msg_id,
                result.status.value,
            )
            return False
        del self.pending[origin]
        self.fates.set(origin, COMMITTED)
        log.warning(
            "transactions: the commit of %s (half queue offset %d) was cut by a crash before its op record; completed",
            half.msg_id,
            half.queue_offset,
        )
        return True

    def ensure_topic(self, topic: str) -> None:
        """Create the config of a system topic (1 queue, read + write) on first use, as
        ``TransactionalMessageBridge.selectTopicConfig`` does, so admin tools and consumers see it."""
        tcm = self.broker.topic_config_manager
        if tcm.select_topic_config(topic) is None:
            tcm.create_topic_in_send_message_back_method(topic, 1, 6, 0)

    # -- half messages --------------------------------------------------------------------------

    def put_half(self, batch: MessageExtBatch, producer_group: str, topic: str) -> PutMessageResult:
        """Store a half record (built by :func:`~tidemq.broker.transaction.bridge.half_batch`) and
        make it pending. Statuses as :meth:`MessageStore.put_message_batch`."""
        self.ensure_loaded()
        self.ensure_topic(TRANS_HALF_TOPIC)
        result = self.broker.store.put_message_batch(batch)
        append = result.append_result
        if result.status is PutMessageStatus.PUT_OK and append is not None:
            offset = append.logics_offset
            tx = self.pending[offset] = PendingTransaction(
                producer_group, topic, batch.born_timestamp, offset
            )
            if len(self._images) < IMAGE_CACHE_MAX:
                tx.image_key = append.wrote_offset
                self._images[append.wrote_offset] = self._image(batch, append)
        return result

    def _image(self, batch: MessageExtBatch, append: AppendMessageResult) -> MessageExt:
        """The half record just stored, as :meth:`MessageLookup.look_message_by_offset` would read it."""
        image = MessageExt(
            TRANS_HALF_TOPIC,
            batch.bodies[0],
            flag=batch.flags[0],
            queue_id=0,
            store_size=append.wrote_bytes,
            queue_offset=append.logics_offset,
            sys_flag=batch.sys_flag,
            born_timestamp=batch.born_timestamp,
            born_host=batch.born_host,
            store_timestamp=append.store_timestamp,
            store_host=self.broker.store.store_host,
            offset_msg_id=append.msg_id,
            commit_log_offset=append.wrote_offset,
            reconsume_times=batch.reconsume_times,
        )
        image.set_properties_text(batch.properties[0])
        return image

    # -- END_TRANSACTION ------------------------------------------------------------------------

    def find_half(
        self, commit_log_offset: int, tran_state_table_offset: int, producer_group: str
    ) -> MessageExt | str:
        """The half record an END_TRANSACTION names, or the remark that refuses it
        (``EndTransactionProcessor.checkPrepareMessage``)."""
        self.ensure_loaded()
        msg = self._images.get(commit_log_offset)
        if msg is None and commit_log_offset >= 0:
            msg = self.broker.store.lookup.look_message_by_offset(commit_log_offset)
        if msg is None or msg.topic != TRANS_HALF_TOPIC:
            return "Find prepared transaction message failed"
        if (msg.get_property(MessageConst.PROPERTY_PRODUCER_GROUP) or "") != producer_group:
            return "The producer group wrong"
        if msg.queue_offset != tran_state_table_offset:
            return "The transaction state table offset wrong"
        if msg.commit_log_offset != commit_log_offset:
            return "The commit log offset wrong"
        return msg

    def end(self, half: MessageExt, commit: bool) -> PutMessageResult | str | None:
        """Commit (real message + op record, one append) or roll back (op record) the transaction of
        ``half``. Returns the put's result; when the transaction is not pending, nothing is written
        and the answer is :meth:`late_end`'s (None: SUCCESS, a string: the refusal's remark)."""
        origin = origin_of(half)
        tx = self.pending.get(origin)
        if tx is None:
            return self.late_end(half, origin, commit)
        self.ensure_topic(TRANS_OP_HALF_TOPIC)
        host = self.broker.addr or "127.0.0.1:0"
        store = self.broker.store
        topic, count = "", 1
        if not commit:
            result = store.put_message_batch(op_batch(half, host, False))
        elif (fast := committed_batch(half)) is not None:  # one write: real message(s), op record
            topic, count = fast.topic, len(fast)
            result = store.put_message_batches([fast, op_batch(half, host, True)])
        else:  # DELAY or a timer: the general put schedules it
            real = committed_message(half)
            self._schedule_timer(real)
            topic = real.topic
            result = store.put_messages([real, op_message(half, host, commit=True)])
        if result.status is PutMessageStatus.PUT_OK:
            del self.pending[origin]
            self.fates.set(origin, COMMITTED if commit else ROLLED_BACK)
            self._images.pop(tx.image_key, None)
            if commit and result.append_result is not None:
                self.broker.broker_stats.inc_put(topic, count, result.append_result.wrote_bytes)
        return result

    def late_end(self, half: MessageExt, origin: int, commit: bool) -> str | None:
        """The answer to an END for a transaction that is no longer pending, from its recorded fate:
        a COMMIT of a rolled-back or discarded one is refused (the remark, SYSTEM_ERROR; RocketMQ's
        ``Find prepared transaction message failed`` followed by what happened); anything else is
        None (SUCCESS, nothing written): a duplicate COMMIT, any ROLLBACK, an unknown fate."""
        fate = self.fates.get(origin)
        uniq = half.get_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or half.msg_id
        if commit and fate in (ROLLED_BACK, DISCARDED):
            how = (
                "rolled back"
                if fate == ROLLED_BACK
                else f"discarded to {TRANS_CHECK_MAX_TIME_TOPIC} (no decision after transactionCheckMax checks)"
            )
            remark = (
                f"Find prepared transaction message failed: the transaction of half message {uniq} "
                f"(half queue offset {origin}) was {how}; it cannot be committed"
            )
            log.warning("transactions: late END COMMIT refused: %s", remark)
            return remark
        log.info(
            "transactions: END %s for %s ignored: its transaction (half queue offset %d) is %s already",
            "COMMIT" if commit else "ROLLBACK",
            uniq,
            origin,
            fate_name(fate) if fate != UNKNOWN else "decided",
        )
        return None

    def _schedule_timer(self, real: MessageExtBrokerInner) -> None:
        """A committed message with ``TIMER_*`` / ``__STARTDELIVERTIME`` is parked on the timer wheel
        now, as RocketMQ 5's put hook does at commit; one the timer refuses is delivered at once."""
        from tidemq.broker.timer_service import is_timer_message, transform_timer_message

        if is_timer_message(real.properties):
            refused = transform_timer_message(real, self.broker.store_config, self.clock_ms())
            if refused is not None:
                log.warning(
                    "transactions: committed message %s not scheduled (%s); delivered now",
                    real.msg_id,
                    refused.remark,
                )

    # -- check pass -----------------------------------------------------------------------------

    async def check_pass(self) -> int:
        """One check pass (:meth:`TransactionChecker.run_pass`); returns the checks sent."""
        return await self.checker.run_pass()

    def forget(self, origin: int) -> PendingTransaction | None:
        """Drop a transaction from the pending table and record it discarded; returns it."""
        tx = self.pending.pop(origin, None)
        self.fates.set(origin, DISCARDED)
        if tx is not None:
            self._images.pop(tx.image_key, None)
        return tx

    # -- visibility -----------------------------------------------------------------------------

    def pending_stats(self, now: int | None = None) -> list[dict[str, object]]:
        """Pending half messages per producer group and topic: ``[{"producerGroup", "topic",
        "count", "oldestAgeMs"}]`` sorted by group then topic (ages in ms)."""
        now = self.clock_ms() if now is None else now
        table: dict[tuple[str, str], list[int]] = {}
        for tx in self.pending.values():
            entry = table.setdefault((tx.producer_group, tx.topic), [0, tx.born_timestamp])
            entry[0] += 1
            entry[1] = min(entry[1], tx.born_timestamp)
        return [
            {"producerGroup": g, "topic": t, "count": c, "oldestAgeMs": max(0, now - born)}
            for (g, t), (c, born) in sorted(table.items())
        ]


def _commit_of(msg: MessageExt, half: MessageExt) -> bool:
    """Whether ``msg`` is the committed message of ``half`` (not, say, a delayed message re-put with
    a prepared offset of 0): same real topic, body and ``UNIQ_KEY``."""
    uniq = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    return (
        half.get_property(MessageConst.PROPERTY_REAL_TOPIC) == msg.topic
        and half.body == msg.body
        and half.get_property(uniq) == msg.get_property(uniq)
    )


def _pending_of(msg: MessageExt, latest: int) -> PendingTransaction:
    return PendingTransaction(
        msg.get_property(MessageConst.PROPERTY_PRODUCER_GROUP) or "",
        msg.get_property(MessageConst.PROPERTY_REAL_TOPIC) or "",
        msg.born_timestamp,
        latest,
    )
