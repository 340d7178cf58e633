"""Restartable, ordered, batched publishing of the flights (the pipeline's producer side).

Every flight becomes one message (JSON body, tag = origin, key = carrier + flight number). The
queue is chosen by :class:`~tidemq.client.producer.selector.SelectMessageQueueByHash` on the
carrier, so each carrier's flights sit in one queue in departure order, and messages go out as
SEND_BATCH_MESSAGE requests (one batch per queue per chunk, the queues' batches in parallel).

**Resume rule.** The flights, their order and their queue are deterministic, so the messages
of queue *q* are always a prefix of the same sequence. The publisher owns the topic: it reads
each queue's max offset (messages already stored) and skips exactly that many of the queue's
flights before sending. A batch is stored contiguously or not at all, and a torn tail after a
broker crash is truncated on recovery, so after any interruption the stored messages are still
a prefix and a rerun completes the sequence with no duplicate and no gap. A failed send is
retried the same way: re-read the queue's max offset, send only what is missing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from tidemq.admin.client import AsyncAdminClient
from tidemq.client.producer.producer import AsyncProducer, batch_record
from tidemq.client.producer.selector import SelectMessageQueueByHash
from tidemq.errors import ClientError, TideMQError
from tidemq.pipelines.flights_data import FlightMessage, flight_messages
from tidemq.protocol.message import Message, MessageConst, MessageQueue
from tidemq.protocol.message_codec import create_unique_ids

__all__ = ["FlightsPublisher", "PublishReport"]

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int], object]
"""``progress(n)``: ``n`` more flights are done (published or found already stored)."""

_YIELD_EVERY = 256
"""Flights built between two turns of the loop while a chunk is in flight."""


_new_message = Message.__new__
_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


def flight_message(topic: str, fm: FlightMessage) -> Message:
    """``Message(topic, fm.body, tags=fm.tag, keys=fm.key)`` (equal, same property order) without
    the general constructor's copies and property setters: it runs once per flight."""
    props: dict[str, str] = {}
    if fm.tag:
        props[_TAGS] = fm.tag
    if fm.key:
        props[_KEYS] = fm.key
    msg = _new_message(Message)
    msg.topic = topic
    msg.body = fm.body
    msg.flag = 0
    msg.properties = props
    return msg


def flight_properties(fm: FlightMessage, uniq_id: str) -> str:
    """The properties text of :func:`flight_message` once the producer gave it ``uniq_id``
    (``properties_to_string`` of ``{TAGS, KEYS, UNIQ_KEY}``, empty tag or key left out)."""
    if fm.tag and fm.key:
        return f"{_TAGS}\x01{fm.tag}\x02{_KEYS}\x01{fm.key}\x02{_UNIQ_KEY}\x01{uniq_id}"
    props = [f"{_TAGS}\x01{fm.tag}"] if fm.tag else []
    if fm.key:
        props.append(f"{_KEYS}\x01{fm.key}")
    props.append(f"{_UNIQ_KEY}\x01{uniq_id}")
    return "\x02".join(props)


@dataclass(slots=True)
class EncodedBatch:
    """Flights of one queue encoded once for SEND_BATCH_MESSAGE (what ``send_batch`` of their
    :func:`flight_message` would send), so a retry resends the same bytes and ids."""

    records: list[bytes]
    uniq_ids: list[str]

    def __len__(self) -> int:
        return len(self.records)


def encode_flights(fms: list[FlightMessage]) -> EncodedBatch:
    """Encode ``fms`` (each with a new ``UNIQ_KEY``) as :func:`batch_record` s."""
    ids = create_unique_ids(len(fms))
    props = flight_properties
    return EncodedBatch(
        [batch_record(fm.body, props(fm, uid)) for fm, uid in zip(fms, ids, strict=True)], ids
    )


def _report_progress(progress: ProgressCallback | None, n: int) -> None:
    if progress is not None and n:
        progress(n)


@dataclass(slots=True)
class PublishReport:
    """What :meth:`FlightsPublisher.publish` did.

    Attributes:
        total: flights in the input.
        already_stored: flights skipped because a previous run stored them.
        sent: flights sent by this run.
        seconds: wall time of the run.
        per_queue: messages of each queue id after the run (= the queue's share of ``total``).
    """

    total: int = 0
    already_stored: int = 0
    sent: int = 0
    seconds: float = 0.0
    per_queue: dict[int, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        """Messages sent per second."""
        return self.sent / self.seconds if self.seconds > 0 else 0.0


class FlightsPublisher:
    """Publishes a flights table to ``topic``, resuming where a previous run stopped.

    Args:
        producer: a started :class:`AsyncProducer`.
        admin: an :class:`AsyncAdminClient` on the same cluster (queue offsets).
        topic: the topic (created beforehand with its final queue count).
        batch_size: flights per chunk; each chunk sends at most one batch per queue (default 2048).
        send_timeout: seconds per batch send (default 10).
        retries: extra attempts per batch after a failed send (default 3).
        fault_after: test hook; raise ``RuntimeError`` once this many flights were sent.
    """

    def __init__(
        self,
        producer: AsyncProducer,
        admin: AsyncAdminClient,
        topic: str,
        *,
        batch_size: int = 2048,
        send_timeout: float = 10.0,
        retries: int = 3,
        fault_after: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ClientError(f"batch_size must be >= 1, got {batch_size}")
        self.producer = producer
        self.admin = admin
        self.topic = topic
        self.batch_size = batch_size
        self.send_timeout = send_timeout
        self.retries = retries
        self.fault_after = fault_after
        self.selector = SelectMessageQueueByHash()

    async def queues(self) -> list[MessageQueue]:
        """The topic's writable queues, sorted (the selector's input).

        Raises:
            NoRouteError: the topic does not exist.
        """
        mqs = sorted(await self.producer.fetch_publish_message_queues(self.topic))
        if not mqs:
            raise ClientError(f"topic {self.topic} has no writable queue")
        return mqs

    async def stored_counts(self, mqs: list[MessageQueue]) -> dict[MessageQueue, int]:
        """Messages stored per queue (its max offset: the next offset to be written)."""
        return await self.admin.fetch_max_offsets(mqs)

    def _select(self, mqs: list[MessageQueue], fm: FlightMessage, msg: Message) -> MessageQueue:
        return self.selector.select(mqs, msg, fm.carrier)

    async def publish(self, flights: pa.Table, progress: ProgressCallback | None = None) -> PublishReport:
        """Publish every flight of ``flights`` not stored yet; returns a :class:`PublishReport`.

        Chunks are pipelined: while one chunk's batches are in flight (at most one per queue, so
        each queue's batches still go out one after another, in order), the next chunk is built,
        yielding to the loop every :data:`_YIELD_EVERY` flights so the sends and their answers
        proceed meanwhile.

        Raises:
            TideMQError: a batch still failed after ``retries`` retries (rerun to resume).
            RuntimeError: the ``fault_after`` test hook fired.
        """
        started = time.monotonic()
        mqs = await self.queues()
        stored_by_mq = await self.stored_counts(mqs)
        next_offset = dict(stored_by_mq)
        stored = [stored_by_mq[mq] for mq in mqs]
        seen = [0] * len(mqs)
        report = PublishReport(total=flights.num_rows)
        pending: list[list[FlightMessage]] = [[] for _ in mqs]
        queue_of: dict[str, int] = {}  # carrier -> queue index (the hash selector is a function of it)
        in_chunk = 0
        inflight: asyncio.Task[None] | None = None
        inflight_count = 0
        topic = self.topic
        try:
            for fm in flight_messages(flights):
                qi = queue_of.get(fm.carrier)
                if qi is None:
                    qi = queue_of[fm.carrier] = mqs.index(self._select(mqs, fm, flight_message(topic, fm)))
                seen[qi] += 1
                in_chunk += 1
                if seen[qi] <= stored[qi]:
                    report.already_stored += 1
                else:
                    pending[qi].append(fm)
                if in_chunk % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                if in_chunk >= self.batch_size:
                    jobs = [(mqs[i], encode_flights(fms)) for i, fms in enumerate(pending) if fms]
                    pending = [[] for _ in mqs]
                    if inflight is not None:
                        await inflight
                        _report_progress(progress, inflight_count)
                    inflight = asyncio.ensure_future(self._flush(jobs, next_offset, report))
                    inflight_count, in_chunk = in_chunk, 0
            if inflight is not None:
                await inflight
                _report_progress(progress, inflight_count)
                inflight = None
            await self._flush(
                [(mqs[i], encode_flights(fms)) for i, fms in enumerate(pending) if fms], next_offset, report
            )
            _report_progress(progress, in_chunk)
        finally:
            if inflight is not None and not inflight.done():
                await asyncio.gather(inflight, return_exceptions=True)
        self._finish(report, mqs, seen, stored)
        report.seconds = time.monotonic() - started
        return report

    def _finish(
        self, report: PublishReport, mqs: list[MessageQueue], seen: list[int], stored: list[int]
    ) -> None:
        """Per queue of ``mqs``: ``seen`` flights this run and ``stored`` before it; fill in
        ``report.per_queue`` and warn when a queue holds more than this run publishes."""
        extra = {mq.queue_id: stored[i] - seen[i] for i, mq in enumerate(mqs) if stored[i] > seen[i]}
        if extra:
            log.warning(
                "topic %s holds more messages than this run publishes (extra per queue: %s); "
                "was it filled by another run with a larger --limit or by another producer?",
                self.topic,
                extra,
            )
        report.per_queue = {mq.queue_id: max(seen[i], stored[i]) for i, mq in enumerate(mqs)}

    async def _flush(
        self,
        jobs: list[tuple[MessageQueue, EncodedBatch]],
        next_offset: dict[MessageQueue, int],
        report: PublishReport,
    ) -> None:
        """Send one chunk: one batch per queue, the queues' batches in parallel."""
        if not jobs:
            return
        await asyncio.gather(*(self._send_queue_batch(mq, msgs, next_offset) for mq, msgs in jobs))
        report.sent += sum(len(batch) for _, batch in jobs)
        if self.fault_after is not None and report.sent >= self.fault_after:
            raise RuntimeError(f"fault injected after {report.sent} flights were sent")

    async def _send_queue_batch(
        self, mq: MessageQueue, msgs: EncodedBatch, next_offset: dict[MessageQueue, int]
    ) -> None:
        """Send ``msgs`` to ``mq`` so that they end at offset ``next_offset[mq] + len(msgs)``."""
        base = next_offset[mq]
        done = 0
        for attempt in range(self.retries + 1):
            try:
                await self.producer.send_batch_records(
                    self.topic, msgs.records[done:], msgs.uniq_ids[done:], self.send_timeout, queue=mq
                )
                next_offset[mq] = base + len(msgs)
                return
            except TideMQError as exc:
                if attempt == self.retries:
                    raise
                log.warning(
                    "batch of %d to %s failed (%s); checking what was stored", len(msgs) - done, mq, exc
                )
                await asyncio.sleep(0.5 * (attempt + 1))
                stored_now = await self.admin.max_offset(mq)
                done = stored_now - base
                if done < 0 or done > len(msgs):
                    raise ClientError(
                        f"queue {mq} is at offset {stored_now}, expected {base}..{base + len(msgs)}: "
                        "another producer writes to this topic"
                    ) from exc
                if done == len(msgs):
                    next_offset[mq] = base + len(msgs)
                    return
