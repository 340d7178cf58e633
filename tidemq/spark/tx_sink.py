"""The exactly-once ``tidemq`` sink: ``option("transactional", "true")`` (docs/spark.md, "Exactly-once").

Two phases over RocketMQ transactional messages, with Spark's checkpoint as the coordinator:

1. each write task sends its rows as *half messages* (stored by the broker, seen by no consumer):
   one half per chunk of rows of one queue, its body a SEND_BATCH_MESSAGE body
   (``TIDEMQ_BATCH_BODY=1``: the broker's commit puts every row as its own message), tagged with
   the state directory, batch id, run id and task attempt (:data:`TX_STATE`, :data:`TX_BATCH`,
   :data:`TX_RUN`, :data:`TX_ATTEMPT`); its commit message lists the halves it sent;
2. the driver's commit of batch B first records B as committed in the checkpoint (durably,
   :meth:`TxState.record_commit`; a replayed B reads the first record), then sends END_TRANSACTION
   COMMIT for every half the record names (concurrently) and ROLLBACK for the halves of attempts it
   does not name; an abort records the run's abort and rolls back. When the broker has committed
   every half of the record, the batch is marked ended; a COMMIT the broker refuses because the
   half is gone (discarded after its checks, or rolled back) fails the batch with
   :class:`TransactionLostError`, recorded in ``lost/B`` so that every restart fails the same way
   until the user decides (docs/spark.md, "When the broker refuses a batch's commit"). Each commit
   also confirms up to :data:`RETRIES_PER_COMMIT` older batches not yet ended, and purges the files
   of ended batches Spark keeps no more (:mod:`tidemq.spark.tx_retention`).

Whatever the driver does not end (it died, an END was lost, a failed task's halves) the broker
checks with the producer group: every producer of the group -- each write task's and
:func:`transaction_checker`'s -- answers with :class:`SparkCheckListener`, from the checkpoint
files named in the half message (:meth:`TxState.decide`), never from memory.

Test hook: a file ``<state root>/_fault`` holding ``before-record``, ``after-record`` or
``mid-commit`` makes the next driver commit SIGKILL its own process at that point (the file is
removed first), to test the recovery from a driver dying there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from tidemq.client.producer.producer import AsyncProducer, split_batch
from tidemq.client.producer.transaction import (
    AsyncTransactionProducer,
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    prepare_half,
)
from tidemq.errors import ClientError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import EndTransactionRequestHeader
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.protocol.message_codec import MessageSysFlag, decode_offset_msg_id, encode_batch_body
from tidemq.spark import tx_retention
from tidemq.spark.conn import ProcessConnections, connections
from tidemq.spark.options import DEFAULT_TX_PRODUCER_GROUP, OptionError, SinkOptions
from tidemq.spark.sink import _ArrowSink, _task_ids
from tidemq.spark.tx_state import CommitRecord, HalfRef, LostBatch, TxState, fault_point, state_root

__all__ = [
    "EndFailure",
    "SparkCheckListener",
    "TideMQTxArrowWriter",
    "TideMQTxStreamArrowWriter",
    "TransactionLostError",
    "TxCommitMessage",
    "check_state",
    "lost_message",
    "transaction_checker",
]

log = logging.getLogger(__name__)

TX_STATE = "SPARK_TX_STATE"
"""Half-message property: the state root (a local path) whose files answer checks."""
TX_BATCH = "SPARK_TX_BATCH"
TX_RUN = "SPARK_TX_RUN"
TX_ATTEMPT = "SPARK_TX_ATTEMPT"
"""``"partition:attemptNumber"`` of the task attempt that sent the half."""
BATCH_BODY = "TIDEMQ_BATCH_BODY"
"""The broker's ``tidemq.broker.transaction.bridge.BATCH_BODY``: the half's body is a batch body."""
HALVES_IN_FLIGHT = 4
"""Half-message sends in flight per task (chunks of up to ``maxBatchBytes``)."""
ENDS_IN_FLIGHT = 64
"""END_TRANSACTION requests in flight during a driver commit."""
RETRIES_PER_COMMIT = 4
"""Older batches not yet ended whose halves a driver commit confirms (COMMIT again)."""
LOST_REMARK = "Find prepared transaction message failed"
"""How a broker's refusal of a COMMIT begins when the half is gone (RocketMQ's remark; tidemq adds
": ... was discarded / rolled back ...")."""


class TransactionLostError(ClientError):
    """The broker refused to commit half messages of a batch recorded committed: their rows will
    never be in the topic. The message names the batch, the halves and what to do."""


@dataclass(frozen=True, slots=True)
class EndFailure:
    """An END_TRANSACTION that did not answer SUCCESS: ``code`` None when no answer came."""

    half: HalfRef
    code: int | None
    remark: str

    @property
    def lost(self) -> bool:
        """True when the broker says the half is gone (discarded, rolled back, or not found): a
        COMMIT can never succeed. Other failures (no answer, a flush timeout, a busy broker) leave
        the half pending, and the broker's check commits it from the checkpoint."""
        return self.code == ResponseCode.SYSTEM_ERROR and self.remark.startswith(LOST_REMARK)

    def __str__(self) -> str:
        code = "no answer" if self.code is None else str(self.code)
        return f"{self.half.msg_id}: {code} {self.remark}"


def lost_message(lost: LostBatch, state: TxState) -> str:
    """The text of :class:`TransactionLostError` for ``lost``: the batch, its lost halves (the
    first 10), the rows, and the two ways on."""
    path = state.lost_path(lost.batch_id)
    named = "; ".join(
        f"{h.msg_id} ({h.rows} rows, broker {h.broker_name} {h.broker_addr}, commitLogOffset "
        f"{h.commit_log_offset}): {remark}"
        for h, remark in lost.halves[:10]
    )
    more = f"; and {len(lost.halves) - 10} more (all in {path})" if len(lost.halves) > 10 else ""
    return (
        f"tidemq sink: batch {lost.batch_id} is recorded committed, but the broker refused to commit "
        f"{len(lost.halves)} of its half messages, {lost.rows} rows that will never be in the topic "
        f"(the other {lost.committed_rows} rows of the batch are): {named}{more}. The query stops, "
        f"and fails the same way at every restart from this checkpoint until you decide: to go on "
        f"without those rows, rename {path} to {path.name}.accepted; to write the whole batch again "
        f"(its {lost.committed_rows} committed rows a second time), delete {path} and "
        f'{state.root / "commits" / str(lost.batch_id)}. See docs/spark.md, "When the broker refuses '
        f"a batch's commit\"."
    )


# -- checks ------------------------------------------------------------------------------------


def check_state(props: Mapping[str, str]) -> LocalTransactionState:
    """The answer to a check of a half message with properties ``props``, from the checkpoint
    (:meth:`TxState.decide`). UNKNOW for a half that is not the sink's, or whose state directory
    cannot be read now (the broker asks again)."""
    root = props.get(TX_STATE)
    if not root or not os.path.isdir(root):
        return LocalTransactionState.UNKNOW
    try:
        batch = int(props[TX_BATCH])
        run, attempt = props[TX_RUN], props[TX_ATTEMPT]
        decision = TxState(root).decide(batch, run, attempt)
    except (KeyError, ValueError, OSError) as exc:
        log.warning("tidemq sink: check of a half message not answered (%r): UNKNOW", exc)
        return LocalTransactionState.UNKNOW
    return LocalTransactionState(decision.value)


class SparkCheckListener(TransactionListener):
    """The transactional sink's :class:`TransactionListener`: checks answered by :func:`check_state`."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        """Not used (the sink ends its transactions in the driver's commit)."""
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        """See :func:`check_state`."""
        return check_state(msg.properties)


def transaction_checker(
    namesrv: str, topics: str | Sequence[str], producer_group: str = DEFAULT_TX_PRODUCER_GROUP
) -> TransactionProducer:
    """A started producer of ``producer_group`` that answers the broker's checks of the sink's half
    messages from the checkpoint, for the driver process (call ``shutdown()`` when done).

    ``topics``: the topic(s) the sink writes to: the producer learns their brokers and heartbeats
    to them at once (a producer is checked only by brokers it has registered with). The write
    tasks' producers answer too, but only while their Python workers live: a failed task's worker,
    and a cancelled one's, are gone with the producer they held, and Spark may end the rest.

    Raises:
        NoRouteError: a topic has no route.
    """
    producer = TransactionProducer(SparkCheckListener(), namesrv_addr=namesrv, producer_group=producer_group)
    producer.start()
    try:
        for topic in [topics] if isinstance(topics, str) else topics:
            producer.fetch_publish_message_queues(topic)
        producer._run(producer._core.instance.send_heartbeat_to_all_brokers())
    except BaseException:
        producer.shutdown()
        raise
    return producer


# -- write tasks -------------------------------------------------------------------------------


@dataclass
class TxCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one task attempt sent: its rows, run, attempt (``"partition:attemptNumber"``) and halves."""

    partition_id: int
    rows: int
    run_id: str
    attempt: str
    halves: list[HalfRef] = field(default_factory=list)


_registered: set[tuple[str, str]] = set()


def _tx_producer(conns: ProcessConnections, opts: SinkOptions) -> AsyncTransactionProducer:
    key = f"tx-producer:{opts.namesrv}:{opts.producer_group}"
    producer = conns.extras.get(key)
    if producer is None:
        producer = AsyncTransactionProducer(
            SparkCheckListener(),
            namesrv_addr=opts.namesrv,
            producer_group=opts.producer_group,
            compress_msg_body_over_howmuch=1 << 31,  # a half's batch body goes as it is
        )
        conns.loop.run(producer.start(), 60)
        conns.extras[key] = producer
    return producer  # type: ignore[no-any-return]


class _TxArrowSink(_ArrowSink):
    """:class:`_ArrowSink` whose sends are half messages (one per chunk of a queue's rows)."""

    def __init__(self, opts: SinkOptions, job_id: str, root: str, run_id: str | None) -> None:
        super().__init__(opts, job_id)
        self.root = root
        self.run_id = run_id
        self._halves: list[HalfRef] = []
        self._tags: dict[str, str] = {}

    def write_batches(self, iterator: Iterator[pa.RecordBatch]) -> TxCommitMessage:  # type: ignore[override]
        from pyspark import TaskContext

        partition, _, batch_id = _task_ids(self.job_id)
        ctx = TaskContext.get()
        run = self.run_id or (ctx.getLocalProperty("spark.jobGroup.id") if ctx else None) or self.job_id
        attempt = f"{partition}:{ctx.attemptNumber() if ctx else 0}"
        if (self.root, run) not in _registered:
            TxState(self.root).register_run(run)  # before any half: a newer run makes older ones dead
            _registered.add((self.root, run))
        self._halves = []
        self._tags = {
            TX_STATE: self.root,
            TX_BATCH: batch_id,
            TX_RUN: run,
            TX_ATTEMPT: attempt,
            BATCH_BODY: "1",
        }
        sent = super().write_batches(iterator)
        return TxCommitMessage(partition, sent.rows, run, attempt, list(self._halves))

    def _producer(self, conns: ProcessConnections) -> AsyncProducer:
        return _tx_producer(conns, self.opts)

    async def _send_all(
        self, producer: AsyncProducer, per_queue: dict[MessageQueue, list[Message]]
    ) -> dict[MessageQueue, tuple[int, int]]:
        assert isinstance(producer, AsyncTransactionProducer)
        gate = asyncio.Semaphore(HALVES_IN_FLIGHT)

        async def send_half(mq: MessageQueue, chunk: list[Message]) -> HalfRef:
            half = Message(mq.topic, encode_batch_body(chunk), properties=dict(self._tags))
            prepare_half(half, producer.group_name)
            async with gate:
                result = await producer.send(half, self.opts.send_timeout, queue=mq)
            if result.send_status != "SEND_OK":
                raise ClientError(f"half message to {mq} stored as {result.send_status}, not SEND_OK")
            producer.announce(result)
            _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id or result.msg_id)
            addr = await producer._broker_addr(mq)
            return HalfRef(
                mq.broker_name, addr, commit_log_offset, result.queue_offset, result.msg_id, len(chunk)
            )

        sends = [
            send_half(mq, chunk)
            for mq, msgs in per_queue.items()
            for chunk in split_batch(msgs, self.opts.max_batch_bytes)
        ]
        self._halves.extend(await asyncio.gather(*sends))
        return {}


# -- the driver's commit -----------------------------------------------------------------------


def end_request(group: str, half: HalfRef, commit: bool) -> RemotingCommand:
    """END_TRANSACTION (37, answered) for ``half`` of producer group ``group``."""
    header = EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=half.queue_offset,
        commit_log_offset=half.commit_log_offset,
        commit_or_rollback=(
            MessageSysFlag.TRANSACTION_COMMIT_TYPE if commit else MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
        ),
        from_transaction_check=False,
        msg_id=half.msg_id,
        transaction_id=half.msg_id,
    )
    return RemotingCommand.create_request(RequestCode.END_TRANSACTION, header.to_ext_fields())


class TxCommitter:
    """The driver side of one query's (or batch write's) transactions: commit and abort.

    Args:
        opts: the sink's options (producer group, send timeout).
        root: the state root (:func:`tidemq.spark.tx_state.state_root`).
        checkpoint: a stream's checkpoint directory (its ``offsets/`` says which batches Spark
            keeps: older ended ones are purged); None for a batch write (nothing purged).
    """

    def __init__(self, opts: SinkOptions, root: str, checkpoint: str | None = None) -> None:
        self.opts = opts
        self.root = root
        self.state = TxState(root)
        self.checkpoint = checkpoint

    def commit(self, messages: Sequence[Any], batch_id: int) -> None:
        """Record ``batch_id`` committed (unless it is: then its record wins), then COMMIT its
        record's halves and ROLLBACK the other halves of ``messages``; then confirm older batches
        not yet ended and purge what Spark keeps no more.

        Raises:
            ClientError: the run is dead (a newer run of the query started): nothing recorded.
            TransactionLostError: the broker refused to commit halves of this batch's record (or of
                an older batch's): recorded in ``lost/<batchId>``, raised again at every commit
                of that batch until the user renames it ``.accepted`` or deletes it.
        """
        msgs = [m for m in messages if isinstance(m, TxCommitMessage)]
        fault_point(self.root, "before-record")
        run = msgs[0].run_id if msgs else ""
        if run and self.state.commit_record(batch_id) is None and self.state.run_dead(run):
            raise ClientError(
                f"batch {batch_id} of run {run} not committed: a newer run of the query started"
            )
        tx_retention.adopt_legacy_records(self.state, batch_id)
        mine = CommitRecord(
            batch_id, run, frozenset(m.attempt for m in msgs), tuple(h for m in msgs for h in m.halves)
        )
        record = self.state.record_commit(mine)
        fault_point(self.root, "after-record")
        named = set(record.halves)
        self.settle(record, [h for m in msgs for h in m.halves if h not in named])
        for older in tx_retention.unended(self.state, batch_id)[:RETRIES_PER_COMMIT]:
            old = self.state.commit_record(older)
            if old is not None:
                self.settle(old, [])
        if self.checkpoint is not None:
            oldest = tx_retention.oldest_retained_batch(self.checkpoint)
            if oldest is not None:
                tx_retention.purge(self.state, min(oldest, batch_id))

    def settle(self, record: CommitRecord, others: list[HalfRef]) -> None:
        """COMMIT the halves of ``record`` (none when the batch ended; not those recorded lost)
        and ROLLBACK ``others``; mark the batch ended when every COMMIT succeeded.

        Raises:
            TransactionLostError: the batch has lost halves not accepted, before or now.
        """
        batch_id = record.batch_id
        lost = self.state.lost(batch_id)
        if lost is not None and not lost.accepted:
            self._end(others, False)
            raise TransactionLostError(lost_message(lost, self.state))
        skip = {h for h, _ in lost.halves} if lost is not None else set()
        todo = [] if self.state.ended(batch_id) else [h for h in record.halves if h not in skip]
        failed = self._end(todo, True)
        failed += self._end(others, False)
        committing = set(record.halves)
        refused = [(f.half, f.remark) for f in failed if f.lost and f.half in committing]
        rows = sum(h.rows for h in record.halves)
        if refused:
            gone = {h for h, _ in refused} | skip
            lost = self.state.record_lost(
                LostBatch(batch_id, tuple(refused), sum(h.rows for h in record.halves if h not in gone))
            )
            raise TransactionLostError(lost_message(lost, self.state))
        if any(f.half in committing for f in failed):
            log.warning(
                "tidemq sink: batch %d committed (%d rows); %d END_TRANSACTION failed, the broker's check "
                "will end them from the checkpoint (the next commit confirms them): %s",
                batch_id,
                rows,
                len(failed),
                [str(f) for f in failed[:3]],
            )
            return
        if failed:
            log.info("tidemq sink: batch %d: %d ROLLBACK failed (the check ends them)", batch_id, len(failed))
        if not self.state.ended(batch_id):
            self.state.mark_ended(batch_id)
        if todo:
            log.info(
                "tidemq sink: batch %d committed, %d rows in %d half messages", batch_id, rows, len(todo)
            )

    def abort(self, messages: Sequence[Any], batch_id: int, run_id: str | None = None) -> None:
        """Record the runs of ``messages`` (and ``run_id``) as having given ``batch_id`` up, then
        ROLLBACK their halves; a batch recorded committed is settled again instead (its lost
        halves, if any, are logged: the next commit of the batch raises)."""
        msgs = [m for m in messages if isinstance(m, TxCommitMessage)]
        record = self.state.commit_record(batch_id)
        if record is not None:
            named = set(record.halves)
            try:
                self.settle(record, [h for m in msgs for h in m.halves if h not in named])
            except TransactionLostError:
                log.error(
                    "tidemq sink: abort of batch %d: the broker refused to commit some of its halves "
                    "(%s); the next commit of the batch fails",
                    batch_id,
                    self.state.lost_path(batch_id),
                )
            return
        for run in {m.run_id for m in msgs} | ({run_id} if run_id else set()):
            self.state.record_abort(batch_id, run)
        self._end([h for m in msgs for h in m.halves], False)
        log.warning("tidemq sink: batch %d aborted; its half messages rolled back", batch_id)

    def _end(self, halves: list[HalfRef], commit: bool) -> list[EndFailure]:
        """END_TRANSACTION for each of ``halves`` (concurrently); the failures. With the
        ``mid-commit`` fault, the process is killed after the first half of the COMMITs."""
        if not halves:
            return []
        conns = connections()
        group, timeout = self.opts.producer_group, self.opts.send_timeout
        cut = len(halves) // 2 if commit else -1

        async def end_all() -> list[EndFailure]:
            gate = asyncio.Semaphore(ENDS_IN_FLIGHT)
            failed: list[EndFailure] = []

            async def one(half: HalfRef) -> None:
                async with gate:
                    try:
                        answer = await conns.remoting.invoke(
                            half.broker_addr, end_request(group, half, commit), timeout
                        )
                    except Exception as exc:  # the check decides it then
                        failed.append(EndFailure(half, None, str(exc)))
                        return
                if answer.code != ResponseCode.SUCCESS:
                    failed.append(EndFailure(half, answer.code, answer.remark or ""))

            if cut > 0:
                await asyncio.gather(*(one(h) for h in halves[:cut]))
                await asyncio.get_running_loop().run_in_executor(None, fault_point, self.root, "mid-commit")
            await asyncio.gather(*(one(h) for h in halves[max(cut, 0) :]))
            return failed

        return conns.loop.run(end_all(), timeout * (len(halves) // ENDS_IN_FLIGHT + 2))


# -- the writers -------------------------------------------------------------------------------


class TideMQTxArrowWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """Batch ``df.write`` with ``transactional=true``: all rows visible at once, or none.

    The write's state is ``<checkpointLocation or the temporary directory>/tidemq-tx/<jobId>``.
    """

    def __init__(self, opts: SinkOptions) -> None:
        job = f"batch-{uuid.uuid4()}"
        try:
            self.root = str(state_root(opts.checkpoint_location or tempfile.gettempdir()) / job)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        self.job_id = job
        self.opts = opts
        self.sink = _TxArrowSink(opts, job, self.root, job)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TxCommitMessage:
        """Executor side: send the task's rows as half messages."""
        return self.sink.write_batches(iterator)

    def commit(self, messages: list[Any]) -> None:
        """Driver side: record the job committed, then commit its half messages."""
        TxCommitter(self.opts, self.root).commit(messages, 0)

    def abort(self, messages: list[Any]) -> None:
        """Driver side: record the job aborted, then roll back the half messages it knows of (those
        of failed tasks are rolled back by the broker's check)."""
        TxCommitter(self.opts, self.root).abort(messages, 0, self.job_id)


class TideMQTxStreamArrowWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """Streaming ``writeStream`` with ``transactional=true``: each micro-batch in the topic once.

    Raises:
        OptionError: no ``checkpointLocation``, or one that is not a local or mounted path.
    """

    def __init__(self, opts: SinkOptions) -> None:
        if not opts.checkpoint_location:
            raise OptionError("the transactional tidemq sink needs the query's checkpointLocation option")
        try:
            self.root = str(state_root(opts.checkpoint_location))
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        self.opts = opts
        self.sink = _TxArrowSink(opts, f"stream-{uuid.uuid4()}", self.root, None)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TxCommitMessage:
        """Executor side: send the task's rows as half messages."""
        return self.sink.write_batches(iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        """Driver side: record ``batchId`` committed, then commit its half messages.

        Raises:
            TransactionLostError: the broker refused to commit some of them (the query stops).
        """
        self._committer().commit(messages, batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Driver side: record the abort, roll back the half messages it knows of."""
        self._committer().abort(messages, batchId)

    def _committer(self) -> TxCommitter:
        return TxCommitter(self.opts, self.root, str(Path(self.root).parent))
