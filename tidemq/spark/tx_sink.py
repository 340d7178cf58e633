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
   also confirms a few older batches not yet ended, and purges the files of ended batches Spark
   keeps no more. The driver side is :mod:`tidemq.spark.tx_commit`.

Whatever the driver does not end (it died, an END was lost, a failed task's halves) the broker
checks with the producer group: every producer of the group -- each write task's and
:func:`transaction_checker`'s -- answers with :class:`SparkCheckListener`, from the checkpoint
files named in the half message (:meth:`TxState.decide`), never from memory.

Test hook: a file ``<state root>/_fault`` holding ``before-record``, ``after-record`` or
``mid-commit`` makes the next driver commit SIGKILL its own process at that point (the file is
removed first), to test the recovery from a driver dying there; ``pause-<point>`` makes it wait
there until the file is removed (:func:`tidemq.spark.tx_state.fault_point`).
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
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.protocol.message_codec import decode_offset_msg_id, encode_batch_body
from tidemq.spark import tx_retention
from tidemq.spark.conn import ProcessConnections
from tidemq.spark.options import DEFAULT_TX_PRODUCER_GROUP, OptionError, SinkOptions
from tidemq.spark.sink import _ArrowSink, _task_ids
from tidemq.spark.tx_commit import (
    EndFailure,
    TransactionLostError,
    TxCommitter,
    lost_message,
)
from tidemq.spark.tx_state import HalfRef, TxState, state_root

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
        producer.send_heartbeat_to_all_brokers()
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
            addr = await producer.broker_addr(mq)
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


# -- the writers -------------------------------------------------------------------------------


class TideMQTxArrowWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """Batch ``df.write`` with ``transactional=true``: all rows visible at once, or none.

    The write's state is ``<checkpointLocation or the temporary directory>/tidemq-tx/<jobId>``,
    removed by a later transactional batch write there a day after its last change.
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
        """Driver side: record the job committed, then commit its half messages; then remove the
        state of earlier batch writes here that nothing needs any more
        (:func:`~tidemq.spark.tx_retention.purge_batch_writes`)."""
        TxCommitter(self.opts, self.root).commit(messages, 0)
        tx_retention.purge_batch_writes(Path(self.root).parent)

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
