"""Shared machinery of the JSON bodies: enums, field readers, ``JsonBody``, ``BodyError``."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, Final, Self, TypeVar

import orjson

from tidemq.errors import BodyError
from tidemq.protocol.body.fastjson import fastjson_loads
from tidemq.protocol.message import MessageQueue

EXPRESSION_TYPE_TAG: Final = "TAG"
EXPRESSION_TYPE_SQL92: Final = "SQL92"
SINGLE_TAG: Final = "SINGLE_TAG"
MULTI_TAG: Final = "MULTI_TAG"
MAX_DECOMPRESSED_SIZE: Final = 64 * 1024 * 1024
"""Cap on an inflated compressed RegisterBrokerBody, in bytes."""

_V = TypeVar("_V")


def _now_ms() -> int:
    return int(time.time() * 1000)


# --------------------------------------------------------------------------------------------
# Enums: Java names as values; ``from_wire`` also takes the C++ client's ordinals.
# --------------------------------------------------------------------------------------------


class _WireEnum(StrEnum):
    @classmethod
    def from_wire(cls, value: object) -> Self:
        """Accept a Java enum name (``"CLUSTERING"``) or an ordinal (``1`` or ``"1"``, C++).

        Raises:
            BodyError: unknown name or ordinal out of range.
        """
        if isinstance(value, cls):
            return value
        members = list(cls)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(members):
            return members[value]
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                pass
        names = ", ".join(m.value for m in members)
        raise BodyError(
            f"{cls.__name__}: unknown value {value!r}; expected one of {names} or 0..{len(members) - 1}"
        )

    @property
    def ordinal(self) -> int:
        """Java's ``ordinal()`` (what the C++ client sends)."""
        return list(type(self)).index(self)


class MessageModel(_WireEnum):
    """Mirrors ``MessageModel``: BROADCASTING (0), CLUSTERING (1)."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeType(_WireEnum):
    """Mirrors ``ConsumeType``: pull consumer ACTIVELY (0), push consumer PASSIVELY (1), a group
    seen through its pops POP (2, RocketMQ 5)."""

    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
    CONSUME_POP = "CONSUME_POP"


class ConsumeFromWhere(_WireEnum):
    """Mirrors ``ConsumeFromWhere`` (ordinals 0..5 in this order; 1-3 are deprecated)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = (
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    )
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


# --------------------------------------------------------------------------------------------
# Tolerant field readers
# --------------------------------------------------------------------------------------------


class _R:
    """Reads fields of one JSON object, raising BodyError that names ``ctx`` and the field."""

    __slots__ = ("ctx", "obj")

    def __init__(self, value: Any, ctx: str) -> None:
        if not isinstance(value, dict):
            raise BodyError(f"{ctx} must be a JSON object, got {type(value).__name__}")
        self.obj: dict[Any, Any] = value
        self.ctx = ctx

    def _bad(self, key: str, want: str) -> BodyError:
        return BodyError(f"{self.ctx}: field {key!r} must be {want}, got {self.obj.get(key)!r}")

    def i(self, key: str, default: int = 0) -> int:
        value = self.obj.get(key)
        if value is None:
            return default
        try:
            return _as_int(value)
        except (TypeError, ValueError):
            raise self._bad(key, "an integer") from None

    def f(self, key: str, default: float = 0.0) -> float:
        value = self.obj.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise self._bad(key, "a number")
        try:
            return float(value)
        except ValueError:
            raise self._bad(key, "a number") from None

    def s(self, key: str, default: str = "") -> str:
        value = self.obj.get(key)
        return default if value is None else str(value)

    def req_s(self, key: str) -> str:
        value = self.obj.get(key)
        if value is None:
            raise BodyError(f"{self.ctx}: missing required field {key!r}")
        return str(value)

    def opt_s(self, key: str) -> str | None:
        value = self.obj.get(key)
        return None if value is None else str(value)

    def b(self, key: str, default: bool = False) -> bool:
        value = self.obj.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if value in (0, 1, "0", "1"):
            return bool(int(value))
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise self._bad(key, "a boolean")

    def lst(self, key: str) -> list[Any]:
        value = self.obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            raise self._bad(key, "an array")
        return list(value)

    def dct(self, key: str) -> dict[Any, Any]:
        value = self.obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._bad(key, "an object")
        return value


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError("boolean is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        return int(value)
    raise ValueError(f"not an integer: {value!r}")


def _mq(value: Any, ctx: str) -> MessageQueue:
    r = _R(dict(value) if isinstance(value, tuple) else value, f"{ctx} message queue")
    return MessageQueue(r.req_s("topic"), r.req_s("brokerName"), r.i("queueId"))


def _mq_set(values: Iterable[Any], ctx: str) -> set[MessageQueue]:
    return {_mq(v, ctx) for v in values}


def _mq_list_json(mqs: Iterable[MessageQueue]) -> list[dict[str, Any]]:
    return [mq.to_json() for mq in sorted(mqs)]


_MQ_TO_STRING = re.compile(r"MessageQueue \[topic=(.*), brokerName=(.*), queueId=(-?\d+)\]")


def _mq_key(key: Any, ctx: str) -> MessageQueue:
    """A map key naming a MessageQueue: an object key, JSON text, or Java's ``toString()``."""
    if isinstance(key, tuple):
        return _mq(key, ctx)
    if isinstance(key, str):
        text = key.strip()
        if text.startswith("{"):
            return _mq(loads_body(text, ctx), ctx)
        match = _MQ_TO_STRING.fullmatch(text)
        if match:
            return MessageQueue(match[1], match[2], int(match[3]))
    raise BodyError(f"{ctx}: map key {key!r} does not name a message queue")


def _mq_table(value: Any, ctx: str, parse: Callable[[Any], _V]) -> dict[MessageQueue, _V]:
    """Read a MessageQueue-keyed map in fastjson form (object keys) or list form."""
    if value is None:
        return {}
    if isinstance(value, list | tuple):
        return {_mq(entry, ctx): parse(entry) for entry in value}
    if isinstance(value, dict):
        return {_mq_key(k, ctx): parse(v) for k, v in value.items()}
    raise BodyError(f"{ctx}: offsetTable must be an object or an array, got {type(value).__name__}")


def loads_body(data: bytes | bytearray | memoryview | str, ctx: str = "body") -> Any:
    """Parse a JSON body; fall back to :func:`fastjson_loads` for fastjson's extensions.

    Raises:
        BodyError: empty or not (fastjson-)JSON.
    """
    raw = bytes(data) if isinstance(data, bytearray | memoryview) else data
    if not raw or not raw.strip():
        raise BodyError(f"{ctx}: empty body")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return fastjson_loads(raw)
    except BodyError as exc:
        raise BodyError(f"{ctx}: body is not valid JSON: {exc}") from None


class JsonBody:
    """Base of the JSON bodies. Mirrors RocketMQ's ``RemotingSerializable``."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """This body as JSON-ready Python objects (Java field names)."""
        raise NotImplementedError

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        """Build from parsed JSON. Raises :class:`BodyError` on a missing or mistyped field."""
        raise NotImplementedError

    def encode(self) -> bytes:
        """UTF-8 JSON bytes, keys sorted like fastjson's bean output."""
        return orjson.dumps(self.to_json(), option=orjson.OPT_SORT_KEYS)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse wire bytes. Raises :class:`BodyError` naming the class on bad input."""
        return cls.from_json_checked(loads_body(data, cls.__name__))

    @classmethod
    def from_json_checked(cls, obj: Any) -> Self:
        """:meth:`from_json` of ``obj`` (a nested body's JSON too), any error in it a BodyError.

        Raises:
            BodyError: a missing or mistyped field (the class named in the text).
        """
        try:
            return cls.from_json(obj)
        except BodyError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BodyError(f"{cls.__name__}: malformed body: {exc!r}") from exc
