"""The ``tidemq`` Spark sink: batch and streaming Arrow writers.

Input columns: ``body`` (binary or string, required), ``topic`` (string; or the ``topic`` option,
which wins), and optional ``tags`` (string), ``keys`` (string, space separated), ``properties``
(map<string,string>) and ``queueId`` (int: the queue of that id on the first broker, by name, that
has it). Rows without ``queueId`` are spread round-robin over the topic's writable queues, starting
at the Spark partition id. Each queue's rows go out in SEND_BATCH_MESSAGE requests of at most
``maxBatchBytes``; queues are sent to concurrently, and a queue's rows keep their order.

Delivery is at-least-once. Every message carries a deterministic key, property
``SPARK_ROW_KEY = "<queryId>:<batchId>:<partition>:<row>"`` (a batch write uses a job id made when
the write was planned, and batch id 0), and a ``UNIQ_KEY`` (message id) derived from it, so a replayed
batch produces the same message ids and consumers can drop duplicates. A failed send fails the
task with the broker's error (code, remark, address).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, IntegerType, LongType, MapType, StringType, StructType

from tidemq.client.producer.producer import AsyncProducer, split_batch
from tidemq.errors import ClientError
from tidemq.protocol.message import Message, MessageConst, MessageQueue
from tidemq.spark.conn import ProcessConnections, connections
from tidemq.spark.options import OptionError, SinkOptions

log = logging.getLogger(__name__)

ROW_KEY_PROPERTY = "SPARK_ROW_KEY"
"""Message property holding the row's deterministic key ``queryId:batchId:partition:row``."""


def check_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Validate the DataFrame's columns for the sink. Raises :class:`OptionError` saying what is wrong."""
    fields = {f.name: f.dataType for f in schema.fields}
    body = fields.get("body")
    if body is None:
        raise OptionError(
            f"the tidemq sink needs a column body (binary or string); columns are {sorted(fields)}"
        )
    if not isinstance(body, (BinaryType, StringType)):
        raise OptionError(f"column body must be binary or string, not {body.simpleString()}")
    if opts.topic is None and "topic" not in fields:
        raise OptionError("the tidemq sink needs a topic column or the option topic")
    for name in ("topic", "tags", "keys"):
        if name in fields and not isinstance(fields[name], StringType):
            raise OptionError(f"column {name} must be a string, not {fields[name].simpleString()}")
    if "queueId" in fields and not isinstance(fields["queueId"], (IntegerType, LongType)):
        raise OptionError(f"column queueId must be an int, not {fields['queueId'].simpleString()}")
    props = fields.get("properties")
    if props is not None and not (
        isinstance(props, MapType)
        and isinstance(props.keyType, StringType)
        and isinstance(props.valueType, StringType)
    ):
        raise OptionError(f"column properties must be map<string,string>, not {props.simpleString()}")


@dataclass
class SinkCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one task wrote: row count and the queue offsets of its first/last message per queue."""

    partition_id: int
    rows: int
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)


def message_id_for(key: str) -> str:
    """A 32-hex-character message id (the shape of a RocketMQ id) derived from a row key."""
    return hashlib.md5(key.encode()).hexdigest().upper()


def _producer(conns: ProcessConnections, opts: SinkOptions) -> AsyncProducer:
    key = f"producer:{opts.namesrv}:{opts.producer_group}"
    producer = conns.extras.get(key)
    if producer is None:
        producer = AsyncProducer(namesrv_addr=opts.namesrv, producer_group=opts.producer_group)
        conns.loop.run(producer.start(), 60)
        conns.extras[key] = producer
    return producer  # type: ignore[no-any-return]


def _task_ids(default_query: str) -> tuple[int, str, str]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, default_query, "0"
    query = ctx.getLocalProperty("sql.streaming.queryId") or default_query
    batch = ctx.getLocalProperty("streaming.sql.batchId") or "0"
    return int(ctx.partitionId()), query, batch


class _ArrowSink:
    """Shared write logic of the batch and streaming writers."""

    def __init__(self, opts: SinkOptions, job_id: str) -> None:
        self.opts = opts
        self.job_id = job_id

    def write_batches(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        partition, query, batch_id = _task_ids(self.job_id)
        conns = connections()
        producer = self._producer(conns)
        queues: dict[str, list[MessageQueue]] = {}
        row = 0
        offsets: dict[str, tuple[int, int]] = {}
        for rb in iterator:
            data = rb.to_pydict()
            n = rb.num_rows
            bodies = data["body"]
            topics = [self.opts.topic] * n if self.opts.topic else data.get("topic", [None] * n)
            tags = data.get("tags", [None] * n)
            keys = data.get("keys", [None] * n)
            props = data.get("properties", [None] * n)
            qids = data.get("queueId", [None] * n)
            per_queue: dict[MessageQueue, list[Message]] = {}
            for i in range(n):
                topic = topics[i]
                if not topic:
                    raise ClientError(f"row {row} of partition {partition} has no topic")
                body = bodies[i]
                if body is None:
                    raise ClientError(f"row {row} of partition {partition} has a null body")
                if topic not in queues:
                    queues[topic] = sorted(conns.loop.run(producer.fetch_publish_message_queues(topic), 60))
                mqs = queues[topic]
                qid = qids[i]
                if qid is None:
                    mq = mqs[(partition + row) % len(mqs)]
                else:
                    found = [m for m in mqs if m.queue_id == qid]
                    if not found:
                        raise ClientError(f"row {row}: topic {topic} has no writable queue {qid}")
                    mq = found[0]
                msg = Message(
                    topic, body, tags=tags[i] or None, keys=keys[i] or None, properties=dict(props[i] or [])
                )
                row_key = f"{query}:{batch_id}:{partition}:{row}"
                msg.properties[ROW_KEY_PROPERTY] = row_key
                msg.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = message_id_for(row_key)
                per_queue.setdefault(mq, []).append(msg)
                row += 1
            if per_queue:
                results = conns.loop.run(
                    self._send_all(producer, per_queue), self.opts.send_timeout * 10 + 60
                )
                for mq, (first, last) in results.items():
                    key = f"{mq.topic}/{mq.broker_name}:{mq.queue_id}"
                    prev = offsets.get(key)
                    offsets[key] = (prev[0] if prev else first, last)
        return SinkCommitMessage(partition, row, offsets)

    def _producer(self, conns: ProcessConnections) -> AsyncProducer:
        """This process's producer for the sink (the transactional sink's is another kind)."""
        return _producer(conns, self.opts)

    async def _send_all(
        self, producer: AsyncProducer, per_queue: dict[MessageQueue, list[Message]]
    ) -> dict[MessageQueue, tuple[int, int]]:
        async def send_queue(mq: MessageQueue, msgs: list[Message]) -> tuple[int, int]:
            first = last = -1
            for chunk in split_batch(msgs, self.opts.max_batch_bytes):
                result = await producer.send_batch(chunk, self.opts.send_timeout, queue=mq)
                if first < 0:
                    first = result.queue_offset
                last = result.queue_offset + len(chunk) - 1
            return first, last

        items = list(per_queue.items())
        done = await asyncio.gather(*(send_queue(mq, msgs) for mq, msgs in items))
        return {mq: r for (mq, _), r in zip(items, done, strict=True)}


class TideMQArrowWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """Batch ``df.write.format("tidemq")``: each task sends its rows; commit/abort only log."""

    def __init__(self, opts: SinkOptions) -> None:
        self.sink = _ArrowSink(opts, f"batch-{uuid.uuid4()}")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        """Executor side: send the task's rows. Raises the broker's error on failure."""
        return self.sink.write_batches(iterator)

    def commit(self, messages: list[Any]) -> None:
        """Driver side: log the totals."""
        rows = sum(m.rows for m in messages if m is not None)
        log.info("tidemq sink: batch write committed, %d rows", rows)

    def abort(self, messages: list[Any]) -> None:
        """Driver side: messages already sent stay sent (at-least-once)."""
        rows = sum(m.rows for m in messages if m is not None)
        log.warning("tidemq sink: batch write aborted after %d rows were sent by successful tasks", rows)


class TideMQStreamArrowWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """Streaming ``writeStream.format("tidemq")``: keys derive from (query id, batch id, partition, row)."""

    def __init__(self, opts: SinkOptions) -> None:
        self.sink = _ArrowSink(opts, f"stream-{uuid.uuid4()}")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        """Executor side: send the task's rows. Raises the broker's error on failure."""
        return self.sink.write_batches(iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        """Driver side: log the batch's totals."""
        if self.sink.opts.checkpoint_location:  # the test hook of tidemq.spark.tx_state.fault_point
            from tidemq.spark.tx_state import fault_point, state_root

            with contextlib.suppress(ValueError):  # a checkpoint on another file system: no hook
                fault_point(state_root(self.sink.opts.checkpoint_location), "before-record")
        rows = sum(m.rows for m in messages if m is not None)
        log.info("tidemq sink: batch %d committed, %d rows", batchId, rows)

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Driver side: a replay of ``batchId`` re-sends with the same keys and message ids."""
        log.warning("tidemq sink: batch %d aborted", batchId)
