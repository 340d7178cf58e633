"""The header mechanism: declarative fields, ``CommandHeader``, ``HeaderError``."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Self

from tidemq.errors import ProtocolError
from tidemq.protocol.command import RemotingCommand, ext_value_to_str

Kind = Literal["str", "int", "long", "bool"]

_INT_RE = re.compile(r"[+-]?[0-9]+")
_RANGES: Final = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_TRUE: Final = frozenset({"true", "1"})
_SMALL_INTS: Final[dict[str, int]] = {str(number): number for number in range(1024)}
_FALSE: Final = frozenset({"false", "0"})


class HeaderError(ProtocolError):
    """A custom header is missing a required field or has a value that does not parse.

    Attributes:
        header: the header class name, e.g. ``"PullMessageRequestHeader"``.
        field: the wire name of the offending field, e.g. ``"queueId"``.
        value: the raw value received (``None`` when missing).
    """

    def __init__(self, header: str, field: str, value: str | None, message: str) -> None:
        self.header = header
        self.field = field
        self.value = value
        super().__init__(message)


def _hfield(wire: str, kind: Kind, required: bool, default: Any) -> Any:
    meta = {"wire": wire, "kind": kind, "required": required}
    if required:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


def s(wire: str, *, required: bool = True, default: str | None = None) -> Any:
    """Declare a ``String`` header field (required unless ``required=False``)."""
    return _hfield(wire, "str", required, default)


def i32(wire: str, *, required: bool = True, default: int | None = None) -> Any:
    """Declare an ``Integer`` (signed 32-bit) header field."""
    return _hfield(wire, "int", required, default)


def i64(wire: str, *, required: bool = True, default: int | None = None) -> Any:
    """Declare a ``Long`` (signed 64-bit) header field."""
    return _hfield(wire, "long", required, default)


def b(wire: str, *, required: bool = False, default: bool | None = None) -> Any:
    """Declare a ``Boolean`` header field (optional unless ``required=True``)."""
    return _hfield(wire, "bool", required, default)


@dataclass(frozen=True, slots=True)
class _Spec:
    attr: str
    wire: str
    kind: Kind
    required: bool


def _to_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def small_int(digits: str) -> int:
    """``int(digits)`` of plain ASCII digits; the small values requests carry most (queue ids,
    flags, batch sizes) from a table (the per-request header parses)."""
    number = _SMALL_INTS.get(digits)
    return int(digits) if number is None else number


def _parse_value(header: str, wire: str, label: str, kind: Kind, raw: str) -> Any:
    if kind == "str":
        return raw
    if kind == "bool":
        low = raw.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise HeaderError(header, wire, raw, f"{header}: field {label} must be a boolean, got {raw!r}")
    text = raw.strip()
    if not _INT_RE.fullmatch(text):
        bits = 32 if kind == "int" else 64
        raise HeaderError(
            header, wire, raw, f"{header}: field {label} must be a {bits}-bit integer, got {raw!r}"
        )
    number = int(text)
    low_limit, high_limit = _RANGES[kind]
    if not low_limit <= number <= high_limit:
        bits = 32 if kind == "int" else 64
        raise HeaderError(header, wire, raw, f"{header}: field {label} = {raw!r} is out of {bits}-bit range")
    return number


_SPECS: dict[type, tuple[_Spec, ...]] = {}


def _specs_of(cls: type[CommandHeader]) -> tuple[_Spec, ...]:
    specs = _SPECS.get(cls)
    if specs is None:
        specs = _SPECS[cls] = tuple(
            _Spec(f.name, f.metadata["wire"], f.metadata["kind"], f.metadata["required"])
            for f in dataclasses.fields(cls)
            if "wire" in f.metadata
        )
    return specs


_Plan = tuple[tuple[str, str, str, Kind, bool], ...]
_PLANS: dict[tuple[type, int], tuple[Mapping[str, str] | None, _Plan]] = {}


def _plan_of(cls: type[CommandHeader], names: Mapping[str, str] | None) -> _Plan:
    """Per header class and wire-name map: ``(attr, key, label, kind, required)`` for every field,
    computed once (parsing a request then builds no per-field objects)."""
    cache_key = (cls, id(names))
    cached = _PLANS.get(cache_key)
    if cached is not None and cached[0] is names:
        return cached[1]
    plan: list[tuple[str, str, str, Kind, bool]] = []
    for spec in _specs_of(cls):
        key = names.get(spec.wire, spec.wire) if names else spec.wire
        label = repr(key) if key == spec.wire else f"{key!r} ({spec.wire})"
        plan.append((spec.attr, key, label, spec.kind, spec.required))
    _PLANS[cache_key] = (names, tuple(plan))
    return tuple(plan)


@dataclass(slots=True, kw_only=True)
class CommandHeader:
    """Base of every custom header. Mirrors RocketMQ's ``CommandCustomHeader``."""

    @classmethod
    def _specs(cls) -> tuple[_Spec, ...]:
        return _specs_of(cls)

    def to_ext_fields(self) -> dict[str, str]:
        """The header as ``extFields``: Java-style strings, ``None`` fields omitted."""
        out: dict[str, str] = {}
        for spec in self._specs():
            text = _to_str(getattr(self, spec.attr))
            if text is not None:
                out[spec.wire] = text
        return out

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, Any]) -> Self:
        """Parse ``ext`` (a command's ``ext_fields``); unknown keys are ignored.

        Raises:
            HeaderError: a required field is missing, or a value does not parse.
        """
        return cls._from_ext(ext, None)

    @classmethod
    def from_command(cls, cmd: RemotingCommand) -> Self:
        """Parse the header of ``cmd`` (same as ``from_ext_fields(cmd.ext_fields)``)."""
        return cls.from_ext_fields(cmd.ext_fields)

    @classmethod
    def _from_ext(cls, ext: Mapping[str, Any], names: Mapping[str, str] | None) -> Self:
        name = cls.__name__
        kwargs: dict[str, Any] = {}
        for attr, key, label, kind, required in _plan_of(cls, names):
            value = ext.get(key)
            raw = value if type(value) is str else ext_value_to_str(value)
            if raw is None or (raw == "" and kind != "str" and not required):
                if required:
                    raise HeaderError(name, key, None, f"{name}: missing required field {label}")
                continue
            if kind == "str":
                kwargs[attr] = raw
            elif kind != "bool" and raw.isascii() and raw.isdigit() and len(raw) < 10:
                kwargs[attr] = int(raw)  # fast path: plain digits, in range of both int kinds
            else:
                kwargs[attr] = _parse_value(name, key, label, kind, raw)
        return cls(**kwargs)
