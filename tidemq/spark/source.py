"""The ``tidemq`` Spark source: batch reader and streaming reader (Python Data Source API, PySpark >= 4.2).

One Spark partition per message queue ``(topic, brokerName, queueId)``, split further when
``minPartitions`` asks. Offsets are ``{topic: {"broker:queueId": next offset}}`` (sorted keys,
exclusive ends). The driver side (``initialOffset``, ``latestOffset``, ``partitions``) talks to the
name server and brokers through one :class:`~tidemq.admin.AdminClient` per driver process; executors
pull directly from brokers (:func:`tidemq.spark.conn.read_queue_range`).
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from collections.abc import Iterator, Mapping, Sequence
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
from tidemq.protocol.topic import is_internal_topic
from tidemq.spark.conn import ReadSettings, read_queue_range, store_timestamp_at
from tidemq.spark.group_handoff import wait_group_released
from tidemq.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetError,
    OffsetMap,
    QueueRange,
    from_offset_json,
    group_ranges,
    queue_key,
    rate_limit,
    split_ranges,
    to_offset_json,
)
from tidemq.spark.options import OptionError, SourceOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueuePartition(InputPartition):  # type: ignore[misc]
    """One Spark input partition: queue ranges, read one after the other, plus how to read them
    (picklable)."""

    ranges: tuple[QueueRange, ...]
    settings: ReadSettings


class _OffsetResolver:
    """Driver-side queue and offset look-ups over one lazily created AdminClient (never pickled)."""

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

    def topic_list(self) -> list[str]:
        """Every topic the name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), sorted."""
        return self.admin.fetch_all_topic_list()

    def _topic_queues(self, topic: str, *, missing_ok: bool = False) -> list[MessageQueue]:
        try:
            return self.admin.fetch_subscribe_message_queues(topic)
        except NoRouteError as exc:
            if missing_ok:
                return []
            raise NoRouteError(
                f"topic {topic} does not exist (name server {self.opts.namesrv}): {exc}"
            ) from None

    def queues(self) -> list[MessageQueue]:
        """Readable queues of what the options name (subscribe / subscribePattern / assign).

        Raises:
            NoRouteError: a subscribed or assigned topic does not exist.
            OptionError: ``assign`` names a queue the topic does not have.
        """
        o = self.opts
        if o.pattern is not None:
            regex = re.compile(o.pattern)
            topics = [t for t in self.topic_list() if regex.fullmatch(t) and not is_internal_topic(t)]
            return [mq for t in topics for mq in self._topic_queues(t, missing_ok=True)]
        if o.assign is not None:
            out: list[MessageQueue] = []
            by_topic: dict[str, list[MessageQueue]] = {}
            for topic, queue in o.assign:
                mqs = by_topic.get(topic)
                if mqs is None:
                    mqs = by_topic[topic] = self._topic_queues(topic)
                if isinstance(queue, int):
                    hit = [mq for mq in mqs if mq.queue_id == queue]
                else:
                    hit = [mq for mq in mqs if queue_key(mq) == queue]
                if not hit:
                    raise OptionError(
                        f"option assign: topic {topic} has no queue {queue!r}; its queues are "
                        f"{[queue_key(mq) for mq in sorted(mqs)]}"
                    )
                out.extend(mq for mq in hit if mq not in out)
            return out
        return [mq for topic in o.topics for mq in self._topic_queues(topic)]

    def broker_addrs(self, mqs: Sequence[MessageQueue]) -> dict[str, str]:
        return {name: self.admin.broker_addr(name) for name in {mq.broker_name for mq in mqs}}

    def resolve(self, spec: str, mqs: Sequence[MessageQueue], *, what: str) -> OffsetMap:
        """Offsets for ``earliest`` / ``latest`` / ``group`` / JSON (placeholders resolved)."""
        if not mqs:
            return {}
        if spec == "earliest":
            return self.admin.fetch_min_offsets(mqs)
        if spec == "latest":
            return self.admin.fetch_max_offsets(mqs)
        if spec == "group":
            assert self.opts.group is not None
            wait_group_released(self.admin, self.opts.group, mqs)  # a stopped query's last offsets
            committed = self.admin.query_consumer_offsets(self.opts.group, mqs)
            missing = [mq for mq, off in committed.items() if off < 0]
            mins = self.admin.fetch_min_offsets(missing) if missing else {}
            return {mq: (off if off >= 0 else mins[mq]) for mq, off in committed.items()}
        given = from_offset_json(spec, what=what)
        known = set(mqs)
        unknown = sorted(set(given) - known)
        if unknown:
            raise OffsetError(f"{what} names queues the source does not read: {[str(m) for m in unknown]}")
        wanted = {mq: given.get(mq, EARLIEST if what == "startingOffsets" else LATEST) for mq in mqs}
        need_min = [mq for mq, off in wanted.items() if off == EARLIEST]
        need_max = [mq for mq, off in wanted.items() if off == LATEST]
        mins = self.admin.fetch_min_offsets(need_min) if need_min else {}
        maxs = self.admin.fetch_max_offsets(need_max) if need_max else {}
        return {mq: mins.get(mq, maxs.get(mq, off)) for mq, off in wanted.items()}

    def offset_for_time(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms``; the queue's max offset
        (nothing to read) when every message is older.

        RocketMQ's SEARCH_OFFSET_BY_TIMESTAMP answers the *closer* neighbour of the time, and the
        last message for a time in the future; its answer is only the starting point of a check
        (and, rarely, a binary search) on the store times of the messages themselves.
        """
        low, high = self.admin.min_offset(mq), self.admin.max_offset(mq)
        if high <= low:
            return high
        addr = self.admin.broker_addr(mq.broker_name)
        settings = self.settings()

        def at_or_after(offset: int) -> bool:
            ts = store_timestamp_at(mq, addr, offset, settings)
            return ts is not None and ts >= timestamp_ms

        hint = min(max(self.admin.search_offset(mq, timestamp_ms), low), high - 1)
        if at_or_after(hint):
            if hint == low or not at_or_after(hint - 1):
                return hint
            lo, hi = low, hint - 1
        else:
            if hint + 1 == high or at_or_after(hint + 1):
                return hint + 1
            lo, hi = hint + 2, high
        while lo < hi:  # invariant: the answer is in [lo, hi]; hi == high means none
            mid = (lo + hi) // 2
            if at_or_after(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def by_time(self, mqs: Sequence[MessageQueue], times: Mapping[MessageQueue, int]) -> OffsetMap:
        return {mq: self.offset_for_time(mq, times[mq]) for mq in mqs if mq in times}

    def _times_json(self, text: str, mqs: Sequence[MessageQueue], what: str) -> dict[MessageQueue, int]:
        times = from_offset_json(text, what=what)
        unknown = sorted(set(times) - set(mqs))
        if unknown:
            raise OffsetError(f"{what} names queues the source does not read: {[str(m) for m in unknown]}")
        bad = [str(mq) for mq, ts in times.items() if ts < 0]
        if bad:
            raise OffsetError(f"{what}: timestamps must be ms >= 0 ({bad})")
        return times

    def starting(self, mqs: Sequence[MessageQueue], default: str) -> OffsetMap:
        """Start offsets: startingOffsetsByTimestamp > startingTimestamp > startingOffsets > default.

        Queues left out of ``startingOffsetsByTimestamp`` follow ``startingOffsets`` (or the default).
        """
        o = self.opts
        spec = o.starting_offsets or default
        if o.starting_by_timestamp is not None:
            times = self._times_json(o.starting_by_timestamp, mqs, "startingOffsetsByTimestamp")
            rest = [mq for mq in mqs if mq not in times]
            return {**self.resolve(spec, rest, what="startingOffsets"), **self.by_time(mqs, times)}
        if o.starting_timestamp is not None:
            return self.by_time(mqs, dict.fromkeys(mqs, o.starting_timestamp))
        return self.resolve(spec, mqs, what="startingOffsets")

    def ending(self, mqs: Sequence[MessageQueue]) -> OffsetMap:
        """End offsets (batch): endingOffsetsByTimestamp > endingTimestamp > endingOffsets."""
        o = self.opts
        if o.ending_by_timestamp is not None:
            times = self._times_json(o.ending_by_timestamp, mqs, "endingOffsetsByTimestamp")
            rest = [mq for mq in mqs if mq not in times]
            return {**self.resolve(o.ending_offsets, rest, what="endingOffsets"), **self.by_time(mqs, times)}
        if o.ending_timestamp is not None:
            return self.by_time(mqs, dict.fromkeys(mqs, o.ending_timestamp))
        return self.resolve(o.ending_offsets, mqs, what="endingOffsets")

    def settings(self) -> ReadSettings:
        o = self.opts
        return ReadSettings(
            namesrv=o.namesrv,
            group=o.reader_group,
            sub_expression=o.sql or o.sub_expression,
            expression_type="SQL92" if o.sql else "TAG",
            fail_on_data_loss=o.fail_on_data_loss,
            pull_batch_size=o.pull_batch_size,
            pull_timeout=o.pull_timeout,
            include_properties=o.include_headers,
            columns=o.columns,
        )

    def plan(self, start: OffsetMap, end: OffsetMap) -> list[QueuePartition]:
        """Partitions for ``[start, end)`` per queue; empty ranges dropped. With ``minPartitions``,
        ranges are split to give at least that many partitions, one range each; without it, small
        ranges share partitions (:func:`~tidemq.spark.offsets.group_ranges`)."""
        mqs = sorted(mq for mq in end if end[mq] > start.get(mq, end[mq]))
        addrs = self.broker_addrs(mqs) if mqs else {}
        ranges = [
            QueueRange(mq, start.get(mq, end[mq]), end[mq], addrs.get(mq.broker_name, "")) for mq in mqs
        ]
        settings = self.settings()
        if self.opts.min_partitions:
            return [QueuePartition((r,), settings) for r in split_ranges(ranges, self.opts.min_partitions)]
        return [QueuePartition(tuple(g), settings) for g in group_ranges(split_ranges(ranges, None))]

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, QueuePartition):
        settings = partition.settings
        return itertools.chain.from_iterable(read_queue_range(r, settings) for r in partition.ranges)
    if getattr(partition, "value", None) is None:
        # Spark's stand-in when partitions() planned nothing (empty topic, start == end): no rows.
        return iter(())
    raise TypeError(f"tidemq source got a foreign partition {partition!r}")


class TideMQBatchReader(DataSourceReader):  # type: ignore[misc]
    """Batch read of ``[startingOffsets, endingOffsets)``; defaults earliest .. latest."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.resolver = _OffsetResolver(opts)

    def partitions(self) -> list[QueuePartition]:
        """Resolve the offsets now and plan one partition per non-empty queue range (none at all:
        Spark then reads one empty stand-in partition and the DataFrame is empty)."""
        try:
            mqs = self.resolver.queues()
            start = self.resolver.starting(mqs, "earliest")
            end = self.resolver.ending(mqs)
            bad = [mq for mq in mqs if end[mq] < start[mq]]
            if bad:
                raise OffsetError(
                    "the end offset is before the start offset for "
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
    """Micro-batch reader with admission control and Trigger.AvailableNow.

    ``maxOffsetsPerTrigger`` caps a batch (Kafka's proportional split over queues);
    ``minOffsetsPerTrigger`` holds a batch back until that many messages are new or
    ``maxTriggerDelay`` has passed since the previous batch (both ignored under AvailableNow, which
    reads up to the end offsets snapshotted at its start). New queues of a topic, and new topics
    matching ``subscribePattern``, are picked up at their min offset.

    Raises:
        OptionError: an ending option (batch only) was given.
    """

    def __init__(self, opts: SourceOptions) -> None:
        opts.check_streaming()
        self.opts = opts
        self.resolver = _OffsetResolver(opts)
        self._latest: OffsetMap | None = None
        self._available_now_target: OffsetMap | None = None
        self._last_batch_at = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        return {
            "opts": self.opts,
            "resolver": self.resolver,
            "_latest": None,
            "_available_now_target": None,
            "_last_batch_at": 0.0,
        }

    def initialOffset(self) -> dict[str, dict[str, int]]:
        """First start of a query: resolve the starting options (default latest)."""
        mqs = self.resolver.queues()
        return to_offset_json(self.resolver.starting(mqs, "latest"))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)``, else ``ReadMinRows(minOffsetsPerTrigger)``, else all."""
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def _fetch_latest(self) -> OffsetMap:
        mqs = self.resolver.queues()
        latest = self.resolver.admin.fetch_max_offsets(mqs) if mqs else {}
        self._latest = latest
        return latest

    def prepareForTriggerAvailableNow(self) -> None:
        """Snapshot the max offsets: an AvailableNow run never reads past them."""
        self._available_now_target = self._fetch_latest()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        """End offset of the next micro-batch (``start`` unchanged when there is nothing to run)."""
        begin = from_offset_json(start, what="start offset")
        latest = self._fetch_latest()
        available_now = self._available_now_target is not None
        if self._available_now_target is not None:
            target = self._available_now_target
            latest = {mq: min(off, target.get(mq, begin.get(mq, 0))) for mq, off in latest.items()}
        new = [mq for mq in latest if mq not in begin]
        if new:
            mins = self.resolver.admin.fetch_min_offsets(new)
            log.info("tidemq source: new queues %s start at their min offsets", [str(m) for m in new])
            begin = {**begin, **mins}
        max_rows = int(limit.max_rows) if isinstance(limit, ReadMaxRows) else None
        min_rows = None if available_now else self.opts.min_offsets_per_trigger
        if isinstance(limit, ReadMinRows) and not available_now:
            min_rows = int(limit.min_rows)
        if isinstance(limit, ReadAllAvailable):
            max_rows = min_rows = None
        elif max_rows is None and not isinstance(limit, ReadMaxRows):
            max_rows = self.opts.max_offsets_per_trigger
        backlog = sum(max(0, latest[mq] - begin[mq]) for mq in latest)
        waited_ms = (time.monotonic() - self._last_batch_at) * 1000
        if min_rows and backlog < min_rows and waited_ms < self.opts.max_trigger_delay_ms:
            end = {mq: begin[mq] for mq in latest}
        elif max_rows:
            end = rate_limit(begin, latest, max_rows)
        else:
            end = dict(latest)
        for mq, off in begin.items():  # monotonic; vanished queues keep their offset
            end[mq] = max(end.get(mq, off), off)
        if any(end[mq] > begin.get(mq, end[mq]) for mq in end):
            self._last_batch_at = time.monotonic()
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
