"""Offsets of the Spark source: the checkpoint JSON, ranges per queue, rate limiting, splitting.

Pure code (no Spark, no sockets). The checkpoint offset is ``{topic: {"broker:queueId": next}}``
with keys in sorted order (Spark compares offsets as JSON strings) and values the *exclusive end*:
the next queue offset to read, the same meaning as a RocketMQ consumer offset.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import orjson

from tidemq.protocol.message import MessageQueue

EARLIEST: Final = -2
"""Offset placeholder in ``startingOffsets`` / ``endingOffsets`` JSON: the queue's min offset."""
LATEST: Final = -1
"""Offset placeholder: the queue's max offset (the next offset to be written)."""

OffsetMap = dict[MessageQueue, int]
"""Next offset to read per message queue."""


class OffsetError(ValueError):
    """A malformed offset option or checkpoint offset; the message says what was wrong."""


def queue_key(mq: MessageQueue) -> str:
    """The key of ``mq`` inside its topic's dict: ``"brokerName:queueId"``."""
    return f"{mq.broker_name}:{mq.queue_id}"


def parse_queue_key(topic: str, key: str) -> MessageQueue:
    """Inverse of :func:`queue_key`.

    Raises:
        OffsetError: ``key`` is not ``"brokerName:queueId"`` with an integer queue id >= 0.
    """
    broker, sep, qid = key.rpartition(":")
    if not sep or not broker or not qid.isdigit():
        raise OffsetError(f"topic {topic}: queue key {key!r} is not 'brokerName:queueId'")
    return MessageQueue(topic, broker, int(qid))


def to_offset_json(offsets: Mapping[MessageQueue, int]) -> dict[str, dict[str, int]]:
    """``{topic: {"broker:queueId": offset}}`` with topics and queue keys in sorted order."""
    out: dict[str, dict[str, int]] = {}
    for mq in sorted(offsets, key=lambda m: (m.topic, queue_key(m))):
        out.setdefault(mq.topic, {})[queue_key(mq)] = int(offsets[mq])
    return {t: out[t] for t in sorted(out)}


def _as_offset(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.lstrip("-").isdigit():
            return int(value)
        raise OffsetError(f"{where}: offset {value!r} is not an integer")
    if value < EARLIEST:
        raise OffsetError(f"{where}: offset {value} is invalid (use >= 0, -2 = earliest, -1 = latest)")
    return value


def from_offset_json(obj: Any, *, what: str = "offset") -> OffsetMap:
    """Parse ``{topic: {"broker:queueId": offset}}`` (also ``{topic: {broker: {queueId: offset}}}``).

    Values may be -2 (earliest) and -1 (latest), to be resolved by the caller.

    Raises:
        OffsetError: not a dict of dicts, a bad queue key, or a non-integer offset.
    """
    if isinstance(obj, (str, bytes)):
        try:
            obj = orjson.loads(obj)
        except orjson.JSONDecodeError as exc:
            raise OffsetError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise OffsetError(
            f"{what} must be a JSON object {{topic: {{'broker:queueId': offset}}}}, got {obj!r}"
        )
    out: OffsetMap = {}
    for topic, queues in obj.items():
        if not isinstance(queues, dict):
            raise OffsetError(f"{what}: topic {topic!r} must map to an object of queues, got {queues!r}")
        for key, value in queues.items():
            if isinstance(value, dict):  # nested {broker: {queueId: offset}}
                for qid, off in value.items():
                    if not str(qid).isdigit():
                        raise OffsetError(
                            f"{what}: topic {topic} broker {key}: queue id {qid!r} is not an integer"
                        )
                    mq = MessageQueue(str(topic), str(key), int(qid))
                    out[mq] = _as_offset(off, f"{what} {topic}/{queue_key(mq)}")
            else:
                mq = parse_queue_key(str(topic), str(key))
                out[mq] = _as_offset(value, f"{what} {topic}/{key}")
    return out


def dumps_offsets(offsets: Mapping[MessageQueue, int]) -> str:
    """:func:`to_offset_json` as a compact JSON string."""
    return orjson.dumps(to_offset_json(offsets)).decode()


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Offsets ``[start, end)`` of one message queue, plus where to read them.

    Attributes:
        mq: the message queue.
        start: first offset to read.
        end: exclusive end offset.
        broker_addr: the broker master's ``"host:port"`` resolved on the driver ("" if unknown).
    """

    mq: MessageQueue
    start: int
    end: int
    broker_addr: str = ""

    @property
    def size(self) -> int:
        """Number of offsets in the range (0 when empty or inverted)."""
        return max(0, self.end - self.start)


def rate_limit(
    start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int], limit: int
) -> OffsetMap:
    """End offsets that admit at most about ``limit`` messages. Kafka's ``rateLimit``.

    The limit is shared in proportion to each queue's backlog ``latest - start``; a queue whose share
    is below one still gets one (no starvation), so the total may exceed ``limit`` by the number of
    queues. Queues absent from ``start`` start at ``latest`` (nothing admitted).

    Args:
        start: next offset per queue.
        latest: max offset per queue (exclusive).
        limit: max messages for the trigger, > 0.

    Returns:
        The end offset per queue of ``latest``; never below its start nor above its latest.
    """
    if limit <= 0:
        raise OffsetError(f"maxOffsetsPerTrigger must be positive, got {limit}")
    sizes = {mq: max(0, end - start.get(mq, end)) for mq, end in latest.items()}
    total = sum(sizes.values())
    if total <= limit:
        return {mq: max(end, start.get(mq, end)) for mq, end in latest.items()}
    out: OffsetMap = {}
    for mq, end in latest.items():
        begin = start.get(mq, end)
        size = sizes[mq]
        if size == 0:
            out[mq] = max(begin, end)
            continue
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[mq] = min(end, begin + share)
    return out


def split_ranges(ranges: Iterable[QueueRange], min_partitions: int | None) -> list[QueueRange]:
    """Split ranges into more Spark partitions when ``min_partitions`` asks. Kafka's
    ``KafkaOffsetRangeCalculator``.

    Empty ranges are dropped. With ``min_partitions`` unset or not above the number of non-empty
    ranges, each range stays whole. Otherwise a range of ``size`` gets
    ``max(1, round(size / total * min_partitions))`` contiguous parts of near-equal size.
    The result is ordered by queue, then offset.
    """
    todo = sorted((r for r in ranges if r.size > 0), key=lambda r: (r.mq, r.start))
    if not min_partitions or min_partitions <= len(todo):
        return todo
    total = sum(r.size for r in todo)
    out: list[QueueRange] = []
    for r in todo:
        parts = max(1, round(r.size / total * min_partitions))
        parts = min(parts, r.size)
        for i in range(parts):
            lo = r.start + r.size * i // parts
            hi = r.start + r.size * (i + 1) // parts
            out.append(replace(r, start=lo, end=hi))
    return out


PARTITION_MIN_ROWS = 25_000
"""Below this many messages a queue range shares its Spark partition with the next ones (see
:func:`group_ranges`)."""


def group_ranges(ranges: Sequence[QueueRange], min_rows: int = PARTITION_MIN_ROWS) -> list[list[QueueRange]]:
    """Pack ranges, in order, into Spark partitions of at least ``min_rows`` messages (the last one
    may hold fewer); a range of ``min_rows`` or more gets a partition of its own.

    Every Spark task of a Python data source costs tens of milliseconds whatever it reads (a Python
    worker gets the pickled reader and partition, sets up, and reports back), so a micro-batch of
    50,000 messages spread over 8 queues runs in 2 tasks instead of 8; a large backlog still gets a
    partition per queue.
    """
    groups: list[list[QueueRange]] = []
    current: list[QueueRange] = []
    rows = 0
    for r in ranges:
        if r.size >= min_rows:
            groups.append([r])
            continue
        current.append(r)
        rows += r.size
        if rows >= min_rows:
            groups.append(current)
            current, rows = [], 0
    if current:
        groups.append(current)
    return groups
