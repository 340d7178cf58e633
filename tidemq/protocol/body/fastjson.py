"""fastjson's non-standard JSON: objects and unquoted integers as map keys."""

from __future__ import annotations

import re
from collections.abc import Callable
from json import decoder as _json_decoder
from typing import Any

import orjson

from tidemq.errors import BodyError, LocalProtocolError

FrozenObject = tuple[tuple[Any, Any], ...]
"""How :func:`fastjson_loads` returns an object used as a map key: ``dict(key)`` gives it back."""


def fastjson_dumps(obj: Any) -> bytes:
    """Serialise like fastjson, which writes non-string map keys without quotes.

    Keys may be ``str`` (quoted), ``int`` (unquoted: ``{0:"a"}``), a ``MessageQueue`` or anything
    with ``to_json()`` (written as a JSON object: ``{{"brokerName":..}:5}``), or a
    :data:`FrozenObject` tuple. Values may be dicts, lists/tuples/sets, scalars, or objects with
    ``to_fastjson()`` / ``to_json()``.

    Raises:
        LocalProtocolError: an unsupported key or value type.
    """
    out: list[str] = []
    _dump(obj, out)
    return "".join(out).encode()


def _dump(obj: Any, out: list[str]) -> None:
    if isinstance(obj, dict):
        out.append("{")
        for n, (key, value) in enumerate(obj.items()):
            if n:
                out.append(",")
            _dump_key(key, out)
            out.append(":")
            _dump(value, out)
        out.append("}")
    elif isinstance(obj, list | tuple | set | frozenset):
        items = list(obj)
        if isinstance(obj, set | frozenset):
            try:
                items.sort()
            except TypeError:
                pass
        out.append("[")
        for n, item in enumerate(items):
            if n:
                out.append(",")
            _dump(item, out)
        out.append("]")
    elif obj is None or isinstance(obj, str | int | float):
        out.append(orjson.dumps(obj).decode())
    elif hasattr(obj, "to_fastjson"):
        _dump(obj.to_fastjson(), out)
    elif hasattr(obj, "to_json"):
        _dump(obj.to_json(), out)
    else:
        raise LocalProtocolError(f"fastjson_dumps: cannot serialise {type(obj).__name__}")


def _dump_key(key: Any, out: list[str]) -> None:
    if isinstance(key, bool):
        raise LocalProtocolError("fastjson_dumps: boolean map keys are not supported")
    if isinstance(key, str):
        out.append(orjson.dumps(key).decode())
    elif isinstance(key, int):
        out.append(str(key))
    elif isinstance(key, tuple):
        _dump(dict(key), out)
    elif hasattr(key, "to_json"):
        _dump(key.to_json(), out)
    else:
        raise LocalProtocolError(f"fastjson_dumps: cannot use {type(key).__name__} as a map key")


_WS = frozenset(" \t\r\n")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_BARE_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_MAX_DEPTH = 256
_scanstring: Callable[[str, int, bool], tuple[str, int]] = vars(_json_decoder)["scanstring"]


def fastjson_loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON plus fastjson's extensions, tolerantly.

    Accepts map keys that are unquoted integers (``{0:"x"}`` -> key ``0``), JSON objects or
    arrays (returned as :data:`FrozenObject` / tuples so they can be dict keys), and bare words;
    any whitespace (C++ pretty-printing). Standard JSON parses as usual.

    Raises:
        BodyError: not UTF-8, or not parseable (with the character position).
    """
    try:
        text = bytes(data).decode() if isinstance(data, bytes | bytearray | memoryview) else data
    except UnicodeDecodeError as exc:  # found by bench.chaos fuzz: was a traceback, not a remark
        raise BodyError(f"not UTF-8: {exc}") from None
    parser = _Parser(text)
    value = parser.value(0)
    parser.ws()
    if parser.pos != len(text):
        raise parser.error("trailing data")
    return value


class _Parser:
    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, what: str) -> BodyError:
        snippet = self.text[self.pos : self.pos + 20]
        return BodyError(f"{what} at character {self.pos} ({snippet!r})")

    def ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def value(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise self.error("nesting too deep")
        self.ws()
        if self.pos >= len(self.text):
            raise self.error("unexpected end of input")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.arr(depth)
        if ch == '"':
            return self.string()
        for word, literal in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal
        return self.number()

    def string(self) -> str:
        try:
            value, self.pos = _scanstring(self.text, self.pos + 1, False)
        except ValueError as exc:
            raise self.error(f"bad string ({exc})") from None
        return value

    def number(self) -> int | float:
        match = _NUMBER.match(self.text, self.pos)
        if not match:
            raise self.error("unexpected character")
        self.pos = match.end()
        return float(match[0]) if match[1] or match[2] else int(match[0])

    def key(self, depth: int) -> Any:
        ch = self.text[self.pos]
        if ch == '"':
            return self.string()
        if ch in "{[":
            return _freeze(self.value(depth + 1))
        match = _BARE_WORD.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return match[0]
        return self.number()

    def obj(self, depth: int) -> dict[Any, Any]:
        self.pos += 1
        out: dict[Any, Any] = {}
        self.ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return out
        while True:
            self.ws()
            if self.pos >= len(self.text):
                raise self.error("unexpected end of input in object")
            key = self.key(depth)
            self.ws()
            if not self.text.startswith(":", self.pos):
                raise self.error("expected ':'")
            self.pos += 1
            out[key] = self.value(depth + 1)
            self.ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("}", self.pos):
                self.pos += 1
                return out
            else:
                raise self.error("expected ',' or '}'")

    def arr(self, depth: int) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        self.ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return out
        while True:
            out.append(self.value(depth + 1))
            self.ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("]", self.pos):
                self.pos += 1
                return out
            else:
                raise self.error("expected ',' or ']'")


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value
