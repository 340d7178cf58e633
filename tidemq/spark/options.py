"""Options of the ``tidemq`` Spark data source, parsed once into typed values.

Spark hands options as a case-insensitive dict of strings (keys lower-cased). Bad values raise
:class:`OptionError` (a ``ValueError``) naming the option and what was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

DEFAULT_READER_GROUP: Final = "tidemq-spark-reader"
"""Consumer group named in pull requests when the ``group`` option is unset (it never commits)."""
DEFAULT_PULL_BATCH: Final = 4096
DEFAULT_PRODUCER_GROUP: Final = "tidemq-spark-writer"


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


def _namesrv(options: Mapping[str, str]) -> str:
    namesrv = (_get(options, "namesrv") or _get(options, "nameServer") or "").strip()
    if not namesrv:
        raise OptionError("option namesrv is required: the name server address, e.g. 127.0.0.1:9876")
    return namesrv


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Reader options (batch and streaming).

    Attributes:
        namesrv: name-server address(es), ``host:port[;host:port]`` (option ``namesrv``, required).
        topics: topics to read (option ``topic``: one or a comma list, required).
        starting_offsets: ``earliest`` | ``latest`` | ``group`` | JSON (default ``latest`` for
            streaming, ``earliest`` for batch; None = that default).
        ending_offsets: batch only: ``latest`` (default) | JSON.
        starting_timestamp: ms; start at the first message stored at or after it (wins over
            ``startingOffsets``).
        max_offsets_per_trigger: admission control, messages per micro-batch (None = all).
        fail_on_data_loss: fail when requested offsets are gone (default true).
        sub_expression: tag filter, ``*`` or ``a || b``.
        min_partitions: split queues into at least about this many Spark partitions.
        group: consumer group; with ``startingOffsets=group`` the start, and what the offset
            committer writes to.
        pull_batch_size: messages asked per pull (``pullBatchSize``, default 4096).
        pull_timeout: seconds per pull request (``pullTimeout``, default 10).
    """

    namesrv: str
    topics: tuple[str, ...]
    starting_offsets: str | None = None
    ending_offsets: str = "latest"
    starting_timestamp: int | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    sub_expression: str = "*"
    min_partitions: int | None = None
    group: str | None = None
    pull_batch_size: int = DEFAULT_PULL_BATCH
    pull_timeout: float = 10.0

    @property
    def reader_group(self) -> str:
        """The group named in pull requests (never committed: the commit flag is off)."""
        return self.group or DEFAULT_READER_GROUP

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Parse Spark's option dict. Raises :class:`OptionError`."""
        namesrv = _namesrv(options)
        topic_text = _get(options, "topic") or _get(options, "subscribe") or ""
        topics = tuple(dict.fromkeys(t.strip() for t in topic_text.split(",") if t.strip()))
        if not topics:
            raise OptionError("option topic is required: one topic or a comma-separated list")
        starting = _get(options, "startingOffsets")
        if starting is not None:
            starting = starting.strip()
            low = starting.lower()
            if low in ("earliest", "latest", "group"):
                starting = low
            elif not starting.startswith("{"):
                raise OptionError(
                    f"option startingOffsets must be earliest, latest, group or a JSON object, got {starting!r}"
                )
        ending = (_get(options, "endingOffsets") or "latest").strip()
        if ending.lower() == "latest":
            ending = "latest"
        elif not ending.startswith("{"):
            raise OptionError(f"option endingOffsets must be latest or a JSON object, got {ending!r}")
        group = (_get(options, "group") or "").strip() or None
        if starting == "group" and group is None:
            raise OptionError("startingOffsets=group needs the option group")
        return cls(
            namesrv=namesrv,
            topics=topics,
            starting_offsets=starting,
            ending_offsets=ending,
            starting_timestamp=_int(options, "startingTimestamp", None, minimum=0),
            max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", None, minimum=1),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            sub_expression=(_get(options, "subExpression") or "*").strip() or "*",
            min_partitions=_int(options, "minPartitions", None, minimum=1),
            group=group,
            pull_batch_size=_int(options, "pullBatchSize", DEFAULT_PULL_BATCH, minimum=1)
            or DEFAULT_PULL_BATCH,
            pull_timeout=_float(options, "pullTimeout", 10.0),
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
    """

    namesrv: str
    topic: str | None = None
    producer_group: str = DEFAULT_PRODUCER_GROUP
    send_timeout: float = 10.0
    max_batch_bytes: int = 4 * 1024 * 1024

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Parse Spark's option dict. Raises :class:`OptionError`."""
        topic = (_get(options, "topic") or "").strip() or None
        if topic is not None and "," in topic:
            raise OptionError(f"the sink writes to one topic; option topic is a list: {topic!r}")
        return cls(
            namesrv=_namesrv(options),
            topic=topic,
            producer_group=(_get(options, "producerGroup") or DEFAULT_PRODUCER_GROUP).strip(),
            send_timeout=_float(options, "sendTimeout", 10.0),
            max_batch_bytes=_int(options, "maxBatchBytes", 4 * 1024 * 1024, minimum=1024) or 4 * 1024 * 1024,
        )
