"""The ``tidemq`` Spark source: batch reader and streaming reader (Python Data Source API, PySpark >= 4.2).

One Spark partition per message queue ``(topic, brokerName, queueId)``, split further when
``minPartitions`` asks. Offsets are ``{topic: {"broker:queueId": next offset}}`` (sorted keys,
exclusive ends). The driver side (``initialOffset``, ``latestOffset``, ``partitions``) talks to the
name server and brokers through one :class:`~tidemq.admin.AdminClient` per driver process; executors
pull directly from brokers (:func:`tidemq.spark.conn.read_queue_range`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from tidemq.admin.client import AdminClient
from tidemq.errors import NoRouteError
from tidemq.protocol.message import MessageQueue
from tidemq.spark.conn import ReadSettings, read_queue_range
from tidemq.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetError,
    OffsetMap,
    QueueRange,
    from_offset_json,
    rate_limit,
    split_ranges,
    to_offset_json,
)
from tidemq.spark.options import SourceOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueuePartition(InputPartition):  # type: ignore[misc]
    """One Spark input partition: a queue range plus where to read it (picklable)."""

    range: QueueRange
    settings: ReadSettings


class _OffsetResolver:
    """Driver-side offset look-ups over one lazily created AdminClient (never pickled)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._admin: AdminClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_admin": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.opts = state["opts"]
        self._admin = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.opts.namesrv)
        return self._admin

    def queues(self) -> list[MessageQueue]:
        """Readable queues of every topic. Raises ``NoRouteError`` naming an unknown topic."""
        out: list[MessageQueue] = []
        for topic in self.opts.topics:
            try:
                out.extend(self.admin.fetch_subscribe_message_queues(topic))
            except NoRouteError as exc:
                raise NoRouteError(
                    f"topic {topic} does not exist (name server {self.opts.namesrv}): {exc}"
                ) from None
        return out

    def broker_addrs(self, mqs: Sequence[MessageQueue]) -> dict[str, str]:
        return {name: self.admin.broker_addr(name) for name in {mq.broker_name for mq in mqs}}

    def resolve(self, spec: str, mqs: Sequence[MessageQueue], *, what: str) -> OffsetMap:
        """Offsets for ``earliest`` / ``latest`` / ``group`` / JSON (placeholders resolved)."""
        if spec == "earliest":
            return self.admin.fetch_min_offsets(mqs)
        if spec == "latest":
            return self.admin.fetch_max_offsets(mqs)
        if spec == "group":
            assert self.opts.group is not None
            committed = self.admin.query_consumer_offsets(self.opts.group, mqs)
            missing = [mq for mq, off in committed.items() if off < 0]
            mins = self.admin.fetch_min_offsets(missing) if missing else {}
            return {mq: (off if off >= 0 else mins[mq]) for mq, off in committed.items()}
        given = from_offset_json(spec, what=what)
        known = set(mqs)
        unknown = sorted(set(given) - known)
        if unknown:
            raise OffsetError(f"{what} names queues the topic does not have: {[str(m) for m in unknown]}")
        wanted = {mq: given.get(mq, EARLIEST) for mq in mqs}
        need_min = [mq for mq, off in wanted.items() if off == EARLIEST]
        need_max = [mq for mq, off in wanted.items() if off == LATEST]
        mins = self.admin.fetch_min_offsets(need_min) if need_min else {}
        maxs = self.admin.fetch_max_offsets(need_max) if need_max else {}
        return {mq: mins.get(mq, maxs.get(mq, off)) for mq, off in wanted.items()}

    def starting(self, mqs: Sequence[MessageQueue], default: str) -> OffsetMap:
        if self.opts.starting_timestamp is not None:
            return self.admin.search_offsets(mqs, self.opts.starting_timestamp)
        return self.resolve(self.opts.starting_offsets or default, mqs, what="startingOffsets")

    def settings(self) -> ReadSettings:
        o = self.opts
        return ReadSettings(
            namesrv=o.namesrv,
            group=o.reader_group,
            sub_expression=o.sub_expression,
            fail_on_data_loss=o.fail_on_data_loss,
            pull_batch_size=o.pull_batch_size,
            pull_timeout=o.pull_timeout,
        )

    def plan(self, start: OffsetMap, end: OffsetMap) -> list[QueuePartition]:
        """Partitions for ``[start, end)`` per queue (split by ``minPartitions``)."""
        mqs = sorted(end)
        addrs = self.broker_addrs(mqs) if mqs else {}
        ranges = [
            QueueRange(mq, start.get(mq, end[mq]), end[mq], addrs.get(mq.broker_name, "")) for mq in mqs
        ]
        settings = self.settings()
        return [QueuePartition(r, settings) for r in split_ranges(ranges, self.opts.min_partitions)]

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, QueuePartition):
        raise TypeError(f"tidemq source got a foreign partition {partition!r}")
    return read_queue_range(partition.range, partition.settings)


class TideMQBatchReader(DataSourceReader):  # type: ignore[misc]
    """Batch read of ``[startingOffsets, endingOffsets)``; defaults earliest .. latest."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.resolver = _OffsetResolver(opts)

    def partitions(self) -> list[QueuePartition]:
        """Resolve the offsets now and plan one partition per non-empty queue range."""
        try:
            mqs = self.resolver.queues()
            start = self.resolver.starting(mqs, "earliest")
            if self.opts.ending_offsets == "latest":
                end = self.resolver.admin.fetch_max_offsets(mqs)
            else:
                end = self.resolver.resolve(self.opts.ending_offsets, mqs, what="endingOffsets")
            bad = [mq for mq in mqs if end[mq] < start[mq]]
            if bad:
                raise OffsetError(
                    "endingOffsets is before startingOffsets for "
                    + ", ".join(
                        f"{mq.topic}/{mq.broker_name}:{mq.queue_id} ({start[mq]} > {end[mq]})" for mq in bad
                    )
                )
            return self.resolver.plan(start, end)
        finally:
            self.resolver.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor side: pull the partition's range and yield RecordBatches."""
        return _read(partition)


class TideMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batch reader with admission control (``maxOffsetsPerTrigger``) and Trigger.AvailableNow.

    New queues of a topic (more queues, a new broker) are picked up at their min offset.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.resolver = _OffsetResolver(opts)
        self._latest: OffsetMap | None = None
        self._available_now_target: OffsetMap | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "resolver": self.resolver, "_latest": None, "_available_now_target": None}

    def initialOffset(self) -> dict[str, dict[str, int]]:
        """First start of a query: resolve startingOffsets (default latest) / startingTimestamp."""
        mqs = self.resolver.queues()
        return to_offset_json(self.resolver.starting(mqs, "latest"))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)`` when set, else everything available."""
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def _fetch_latest(self) -> OffsetMap:
        mqs = self.resolver.queues()
        latest = self.resolver.admin.fetch_max_offsets(mqs)
        self._latest = latest
        return latest

    def prepareForTriggerAvailableNow(self) -> None:
        """Snapshot the max offsets: an AvailableNow run never reads past them."""
        self._available_now_target = self._fetch_latest()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        """End offset of the next micro-batch (``start`` unchanged when there is nothing new)."""
        begin = from_offset_json(start, what="start offset")
        latest = self._fetch_latest()
        if self._available_now_target is not None:
            target = self._available_now_target
            latest = {mq: min(off, target.get(mq, begin.get(mq, 0))) for mq, off in latest.items()}
        new = [mq for mq in latest if mq not in begin]
        if new:
            mins = self.resolver.admin.fetch_min_offsets(new)
            log.info("tidemq source: new queues %s start at their min offsets", [str(m) for m in new])
            begin = {**begin, **mins}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, latest, int(limit.max_rows))
        elif isinstance(limit, ReadMinRows):
            backlog = sum(max(0, latest[mq] - begin[mq]) for mq in latest)
            end = latest if backlog >= int(limit.min_rows) else {mq: begin[mq] for mq in latest}
        else:
            end = dict(latest)
        for mq, off in begin.items():  # monotonic; vanished queues keep their offset
            end[mq] = max(end.get(mq, off), off)
        return to_offset_json(end)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        """The max offsets last fetched (shown as ``latestOffset`` in the query progress)."""
        return to_offset_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[QueuePartition]:
        """Ranges ``[start, end)`` per queue; a queue new since ``start`` begins at its min offset."""
        begin = from_offset_json(start, what="start offset")
        stop = from_offset_json(end, what="end offset")
        new = [mq for mq in stop if mq not in begin]
        if new:
            begin.update(self.resolver.admin.fetch_min_offsets(new))
        return self.resolver.plan(begin, stop)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor side: pull the partition's range and yield RecordBatches."""
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing: Spark's checkpoint is the source of truth; group offsets come from the listener."""

    def stop(self) -> None:
        """Close the driver's connections (Spark 4.3 does not reliably call this)."""
        self.resolver.close()


def wait_for_topic(namesrv: str, topic: str, timeout: float = 10.0) -> None:
    """Block until the name server has a route for ``topic`` (helper for scripts and tests)."""
    deadline = time.monotonic() + timeout
    with AdminClient(namesrv) as admin:
        admin.wait_for_route(topic, max(0.1, deadline - time.monotonic()))
