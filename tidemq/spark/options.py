"""Options of the ``tidemq`` Spark data source, parsed once into typed values.

Spark hands options as a case-insensitive dict of strings (keys lower-cased). The names follow
Spark's Kafka source where the concept is the same. Bad values, and options the data source does
not know (a misspelt ``startingOffset``), raise :class:`OptionError` (a ``ValueError``) naming the
option, what was wrong and, for unknown options, every valid name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

DEFAULT_READER_GROUP: Final = "tidemq-spark-reader"
"""Consumer group named in pull requests when the ``group`` option is unset (it never commits)."""
DEFAULT_PULL_BATCH: Final = 8192
DEFAULT_PRODUCER_GROUP: Final = "tidemq-spark-writer"
DEFAULT_TX_PRODUCER_GROUP: Final = "tidemq-spark-tx-writer"
"""Producer group of the transactional sink: the broker checks its half messages with this group."""


class OptionError(ValueError):
    """A missing or malformed data-source option."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    if value is None:
        value = options.get(name)
    return None if value is None else str(value)


def _int(options: Mapping[str, str], name: str, default: int | None, *, minimum: int) -> int | None:
    raw = _get(options, name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {name} must be >= {minimum}, got {value}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, got {raw!r}")


def _float(options: Mapping[str, str], name: str, default: float) -> float:
    raw = _get(options, name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise OptionError(f"option {name} must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option {name} must be positive, got {value}")
    return value


SOURCE_OPTIONS: Final = (
    "namesrv",
    "subscribe",
    "topic",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "failOnDataLoss",
    "minPartitions",
    "includeHeaders",
    "subExpression",
    "sql",
    "group",
    "pullBatchSize",
    "pullTimeout",
)
"""Every option the source accepts (``topic`` is an alias of ``subscribe``)."""
SINK_OPTIONS: Final = (
    "namesrv",
    "topic",
    "producerGroup",
    "sendTimeout",
    "maxBatchBytes",
    "checkpointLocation",
    "transactional",
)
"""Every option the sink accepts (``checkpointLocation`` is the streaming query's, passed along by Spark)."""
_ALIASES: Final = {"nameserver": "namesrv"}
DEFAULT_MAX_TRIGGER_DELAY_MS: Final = 15 * 60 * 1000
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS: Final = {
    None: 1,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def check_known(options: Mapping[str, str], valid: tuple[str, ...], what: str) -> None:
    """Raise :class:`OptionError` for an option not in ``valid`` (compared case-insensitively)."""
    known = {name.lower() for name in valid} | set(_ALIASES)
    unknown = sorted(str(k) for k in options if str(k).lower() not in known)
    if unknown:
        raise OptionError(
            f"unknown option(s) for the tidemq {what}: {', '.join(unknown)}. Valid options: {', '.join(valid)}"
        )


def _namesrv(options: Mapping[str, str]) -> str:
    namesrv = (_get(options, "namesrv") or _get(options, "nameServer") or "").strip()
    if not namesrv:
        raise OptionError("option namesrv is required: the name server address, e.g. 127.0.0.1:9876")
    return namesrv


def _duration_ms(options: Mapping[str, str], name: str, default: int) -> int:
    raw = _get(options, name)
    if raw is None or raw.strip() == "":
        return default
    m = _DURATION.match(raw)
    if m is None:
        raise OptionError(f"option {name} must be a duration like 500ms, 30s, 15m or 1h, got {raw!r}")
    unit = m.group(2).lower() if m.group(2) else None
    return int(m.group(1)) * _DURATION_MS[unit]


def _offsets_spec(options: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    raw = _get(options, name)
    if raw is None or raw.strip() == "":
        return None
    text = raw.strip()
    if text.lower() in allowed:
        return text.lower()
    if not text.startswith("{"):
        raise OptionError(f"option {name} must be {', '.join(allowed)} or a JSON object, got {text!r}")
    return text


def _json_object(options: Mapping[str, str], name: str, example: str) -> dict[str, Any] | None:
    raw = _get(options, name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise OptionError(f"option {name} is not valid JSON ({exc}); expected e.g. {example}") from None
    if not isinstance(value, dict) or not value:
        raise OptionError(f"option {name} must be a non-empty JSON object like {example}, got {raw!r}")
    return value


def _assign(options: Mapping[str, str]) -> tuple[tuple[str, str | int], ...] | None:
    """``{"Orders": [0, 1], "Refunds": ["broker-a:2"]}`` -> ((topic, queue id or "broker:queueId"), ...)."""
    obj = _json_object(options, "assign", '{"Orders": [0, 1]} or {"Orders": ["broker-a:0"]}')
    if obj is None:
        return None
    out: list[tuple[str, str | int]] = []
    for topic, queues in obj.items():
        if not isinstance(queues, list) or not queues:
            raise OptionError(f"option assign: topic {topic!r} must map to a non-empty list of queues")
        for q in queues:
            if (isinstance(q, int) and not isinstance(q, bool) and q >= 0) or (
                isinstance(q, str) and re.fullmatch(r".+:\d+", q)
            ):
                out.append((str(topic), q))
            else:
                raise OptionError(
                    f"option assign: topic {topic!r}: queue {q!r} is neither a queue id (int >= 0) "
                    "nor 'brokerName:queueId'"
                )
    return tuple(out)


def _timestamps(options: Mapping[str, str], name: str) -> str | None:
    obj = _json_object(options, name, '{"Orders": {"broker-a:0": 1700000000000}}')
    return None if obj is None else orjson.dumps(obj).decode()


def _sql(options: Mapping[str, Any], sub_expression: str) -> str | None:
    """Option ``sql``: an SQL92 selector, checked here so a bad one fails the query at once."""
    text = (_get(options, "sql") or "").strip()
    if not text:
        return None
    if sub_expression != "*":
        raise OptionError("options sql and subExpression cannot be combined (filter by TAGS in the sql)")
    from tidemq.protocol.sql92 import Sql92Error, compile_sql92

    try:
        compile_sql92(text)
    except Sql92Error as exc:
        raise OptionError(f"option sql: {exc}") from None
    return text


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Reader options (batch and streaming), at parity with Spark's Kafka source.

    Exactly one of ``subscribe`` (alias ``topic``), ``subscribePattern`` and ``assign`` names what
    to read. Start and end: ``...OffsetsByTimestamp`` wins over ``...Timestamp``, which wins over
    ``...Offsets`` (Kafka's precedence).

    Attributes:
        namesrv: name-server address(es), ``host:port[;host:port]`` (option ``namesrv``, required).
        topics: topics of ``subscribe`` / ``topic`` (a comma list); empty with a pattern or assign.
        pattern: ``subscribePattern``: a regex matched against the whole name of every topic the
            name server knows (system topics and ``%RETRY%`` / ``%DLQ%`` excluded); new matching
            topics are picked up by a running stream.
        assign: ``assign``: ``(topic, queueId | "broker:queueId")`` pairs (an int = that queue id on
            every broker of the topic).
        starting_offsets: ``earliest`` | ``latest`` | ``group`` | JSON (None = ``latest`` for
            streaming, ``earliest`` for batch).
        ending_offsets: batch only: ``latest`` (default) | ``group`` | JSON.
        starting_timestamp / ending_timestamp: ms; the first message stored at or after the time,
            or the queue's end when there is none.
        starting_by_timestamp / ending_by_timestamp: JSON ``{topic: {"broker:queueId": ms}}``.
        max_offsets_per_trigger: admission control, messages per micro-batch (None = all).
        min_offsets_per_trigger: wait for at least this many new messages per micro-batch ...
        max_trigger_delay_ms: ... but no longer than this after the previous batch (default 15 min).
        fail_on_data_loss: fail when requested offsets are gone (default true).
        min_partitions: split queues into at least about this many Spark partitions.
        include_headers: the ``properties`` column (default true; false drops it).
        sub_expression: tag filter, ``*`` or ``a || b``.
        sql: an SQL92 filter on message properties (option ``sql``, e.g. ``"a > 5 AND b = 'x'"``),
            evaluated by the broker (docs/filters.md); None = none. Not with a ``subExpression``.
        group: consumer group; with ``startingOffsets=group`` the start, and what the offset
            committer writes to.
        pull_batch_size: messages asked per pull (``pullBatchSize``, default 8192).
        pull_timeout: seconds per pull request (``pullTimeout``, default 10).
        columns: not an option: the columns of a schema given with ``.schema(...)`` (a subset of
            the source's, see :func:`tidemq.spark.projection`); None = every column.
    """

    namesrv: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[tuple[str, str | int], ...] | None = None
    starting_offsets: str | None = None
    ending_offsets: str = "latest"
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_by_timestamp: str | None = None
    ending_by_timestamp: str | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    fail_on_data_loss: bool = True
    sub_expression: str = "*"
    sql: str | None = None
    min_partitions: int | None = None
    include_headers: bool = True
    group: str | None = None
    pull_batch_size: int = DEFAULT_PULL_BATCH
    pull_timeout: float = 10.0
    ending_given: bool = False
    columns: tuple[str, ...] | None = None

    @property
    def reader_group(self) -> str:
        """The group named in pull requests (never committed: the commit flag is off)."""
        return self.group or DEFAULT_READER_GROUP

    @property
    def description(self) -> str:
        """What the source reads, for messages: ``subscribe=A,B`` / ``subscribePattern=...``."""
        if self.pattern is not None:
            return f"subscribePattern={self.pattern}"
        if self.assign is not None:
            return "assign=" + ",".join(f"{t}/{q}" for t, q in self.assign)
        return "subscribe=" + ",".join(self.topics)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Parse Spark's option dict. Raises :class:`OptionError`."""
        check_known(options, SOURCE_OPTIONS, "source")
        namesrv = _namesrv(options)
        topics, pattern, assign = _what_to_read(options)
        starting = _offsets_spec(options, "startingOffsets", ("earliest", "latest", "group"))
        ending_raw = _offsets_spec(options, "endingOffsets", ("earliest", "latest", "group"))
        if ending_raw == "earliest":
            raise OptionError(
                "option endingOffsets cannot be earliest (nothing would be read); use latest or JSON"
            )
        group = (_get(options, "group") or "").strip() or None
        if group is None and "group" in (starting, ending_raw):
            raise OptionError("startingOffsets=group / endingOffsets=group needs the option group")
        max_per, min_per = _per_trigger(options)
        ending_ts = _int(options, "endingTimestamp", None, minimum=0)
        ending_by_ts = _timestamps(options, "endingOffsetsByTimestamp")
        sub_expression = (_get(options, "subExpression") or "*").strip() or "*"
        sql = _sql(options, sub_expression)
        return cls(
            namesrv=namesrv,
            topics=topics,
            pattern=pattern,
            assign=assign,
            starting_offsets=starting,
            ending_offsets=ending_raw or "latest",
            starting_timestamp=_int(options, "startingTimestamp", None, minimum=0),
            ending_timestamp=ending_ts,
            starting_by_timestamp=_timestamps(options, "startingOffsetsByTimestamp"),
            ending_by_timestamp=ending_by_ts,
            max_offsets_per_trigger=max_per,
            min_offsets_per_trigger=min_per,
            max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            sub_expression=sub_expression,
            sql=sql,
            min_partitions=_int(options, "minPartitions", None, minimum=1),
            include_headers=_bool(options, "includeHeaders", True),
            group=group,
            pull_batch_size=_int(options, "pullBatchSize", DEFAULT_PULL_BATCH, minimum=1)
            or DEFAULT_PULL_BATCH,
            pull_timeout=_float(options, "pullTimeout", 10.0),
            ending_given=ending_raw is not None or ending_ts is not None or ending_by_ts is not None,
        )

    def check_streaming(self) -> None:
        """Raise :class:`OptionError` for options a streaming query cannot use (the ending ones)."""
        if self.ending_given:
            raise OptionError(
                "endingOffsets, endingTimestamp and endingOffsetsByTimestamp are for batch queries only; "
                "a stream runs until it is stopped (use Trigger.AvailableNow to stop at the current end)"
            )


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Writer options.

    Attributes:
        namesrv: name-server address(es) (required).
        topic: topic for every row (overrides a ``topic`` column); None = the column is required.
        producer_group: producer group of the writer (``producerGroup``, default
            ``tidemq-spark-writer``).
        send_timeout: seconds per send request (``sendTimeout``, default 10).
        max_batch_bytes: largest SEND_BATCH_MESSAGE body (``maxBatchBytes``, default 4 MiB).
        transactional: exactly-once through transactional messages (``transactional``, default
            false; :mod:`tidemq.spark.tx_sink`); the default producer group is then
            ``tidemq-spark-tx-writer``.
        checkpoint_location: ``checkpointLocation`` (a stream's, passed by Spark; for a batch write
            the directory of its transaction state, default the system's temporary directory).
    """

    namesrv: str
    topic: str | None = None
    producer_group: str = DEFAULT_PRODUCER_GROUP
    send_timeout: float = 10.0
    max_batch_bytes: int = 4 * 1024 * 1024
    transactional: bool = False
    checkpoint_location: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Parse Spark's option dict. Raises :class:`OptionError`."""
        check_known(options, SINK_OPTIONS, "sink")
        topic = (_get(options, "topic") or "").strip() or None
        if topic is not None and "," in topic:
            raise OptionError(f"the sink writes to one topic; option topic is a list: {topic!r}")
        if topic is not None:
            from tidemq.protocol.topic import check_topic

            problem = check_topic(topic)
            if problem is not None:  # checked in the driver, before any task runs
                raise OptionError(f"option topic is not a valid topic name: {problem}")
        transactional = _bool(options, "transactional", False)
        group = DEFAULT_TX_PRODUCER_GROUP if transactional else DEFAULT_PRODUCER_GROUP
        return cls(
            namesrv=_namesrv(options),
            topic=topic,
            producer_group=(_get(options, "producerGroup") or group).strip(),
            send_timeout=_float(options, "sendTimeout", 10.0),
            max_batch_bytes=_int(options, "maxBatchBytes", 4 * 1024 * 1024, minimum=1024) or 4 * 1024 * 1024,
            transactional=transactional,
            checkpoint_location=(_get(options, "checkpointLocation") or "").strip() or None,
        )


def _what_to_read(
    options: Mapping[str, str],
) -> tuple[tuple[str, ...], str | None, tuple[tuple[str, str | int], ...] | None]:
    """``(topics, pattern, assign)`` of the options subscribe (or its alias topic), subscribePattern
    and assign, exactly one of which is given. Raises :class:`OptionError`."""
    subscribe, topic_alias = _get(options, "subscribe"), _get(options, "topic")
    if subscribe is not None and topic_alias is not None:
        raise OptionError("options subscribe and topic are the same; give only one")
    topic_text = subscribe if subscribe is not None else topic_alias
    topics = tuple(dict.fromkeys(t.strip() for t in (topic_text or "").split(",") if t.strip()))
    pattern = _get(options, "subscribePattern")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option subscribePattern is not a valid regex: {exc}") from None
    assign = _assign(options)
    given = [n for n, v in (("subscribe", topics), ("subscribePattern", pattern), ("assign", assign)) if v]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options subscribe (or topic), subscribePattern and assign must be "
            f"given, got {given or 'none'}"
        )
    return topics, pattern, assign


def _per_trigger(options: Mapping[str, str]) -> tuple[int | None, int | None]:
    """``(maxOffsetsPerTrigger, minOffsetsPerTrigger)``, min not above max. Raises :class:`OptionError`."""
    max_per = _int(options, "maxOffsetsPerTrigger", None, minimum=1)
    min_per = _int(options, "minOffsetsPerTrigger", None, minimum=1)
    if max_per is not None and min_per is not None and min_per > max_per:
        raise OptionError(
            f"option minOffsetsPerTrigger ({min_per}) must not exceed maxOffsetsPerTrigger ({max_per})"
        )
    return max_per, min_per
