"""Java value semantics of RocketMQ's SQL92 filter (``filter/expression/ComparisonExpression.java``).

Values are Python objects standing for Java ones: ``None`` (null), ``bool`` (Boolean), ``str``
(String), ``float`` (Double), ``int`` (Integer: a decimal literal within int32) and :class:`JLong`
(Long: a decimal literal beyond int32). Property values are always strings.

:func:`java_compare` is ``ComparisonExpression.__compare`` with string conversion on (the parser
always sets ``CONVERT_STRING_EXPRESSIONS``): a String against a number is parsed *as that number's
type* (``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf``), so ``"7.5"`` against ``5``
fails; a failure raises :class:`JavaError`, which makes the message not match.
"""

from __future__ import annotations

import math
import re
from typing import Final

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1


class JavaError(Exception):
    """An exception thrown while evaluating (a ``NumberFormatException``, a ``ClassCastException``,
    comparing strings by ``<``): the message does not match."""


class JLong(int):
    """A Java ``Long`` (a plain ``int`` is an ``Integer``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}L"


Value = None | bool | int | float | str


def parse_int(text: str, low: int = INT_MIN, high: int = INT_MAX) -> int:
    """``Integer.valueOf`` (or ``Long.valueOf`` with the long bounds): an optional sign and decimal
    digits, nothing else (no spaces, no ``_``); out of range or malformed -> :class:`JavaError`."""
    if len(text) < 10 and text.isdecimal():  # the usual case: within int32 whatever the bound
        return int(text)
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body.isdecimal():
        raise JavaError(f'For input string: "{text}"')
    try:
        value = int(text)
    except ValueError:  # more digits than Python converts: out of range anyway
        raise JavaError(f'For input string: "{text}"') from None
    if not low <= value <= high:
        raise JavaError(f'For input string: "{text}"')
    return value


def parse_long(text: str) -> JLong:
    """``Long.valueOf``."""
    return JLong(parse_int(text, LONG_MIN, LONG_MAX))


_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?"
    r"|0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?)",
    re.ASCII,
)
_JAVA_SPACE: Final = "".join(map(chr, range(33)))


def parse_double(text: str) -> float:
    """``Double.valueOf``: Java's grammar (surrounding chars <= space trimmed; ``NaN``,
    ``Infinity``, a ``f``/``d`` suffix, hex floats), not Python's (no ``inf``, no ``_``)."""
    s = text.strip(_JAVA_SPACE)
    if _DOUBLE.fullmatch(s) is None:
        raise JavaError(f'For input string: "{text}"')
    body = s.lstrip("+-")
    negative = s.startswith("-")
    if body == "NaN":
        return math.nan
    if body == "Infinity":
        return -math.inf if negative else math.inf
    if s[-1] in "fFdD":  # a type suffix (a hex float ends with its decimal exponent)
        s = s[:-1]
    if "x" in body.lower():
        return float.fromhex(s)
    return float(s)


def boolean_value_of(text: str) -> bool:
    """``Boolean.valueOf``: true for ``"true"`` in any case, else false."""
    return text.lower() == "true"


def double_compare(a: float, b: float) -> int:
    """``Double.compare``: NaN equals NaN and is above everything; -0.0 is below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    if a == b:
        if a == 0.0:
            sa, sb = math.copysign(1.0, a), math.copysign(1.0, b)
            return 0 if sa == sb else (-1 if sa < sb else 1)
        return 0
    a_nan, b_nan = a != a, b != b
    if a_nan and b_nan:
        return 0
    return 1 if a_nan else -1


def _sign(a: int | str | bool, b: int | str | bool) -> int:
    return (a > b) - (a < b)  # type: ignore[operator]


def string_compare(a: str, b: str) -> int:
    """``String.compareTo`` (UTF-16 code units; equal code points order the same for the BMP)."""
    if a == b:
        return 0
    return _sign(a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass"))  # type: ignore[arg-type]


def _kind(value: Value) -> str:
    t = type(value)
    if t is bool:
        return "B"
    if t is int:
        return "I"
    if t is JLong:
        return "L"
    if t is float:
        return "D"
    if t is str:
        return "S"
    raise JavaError(f"not comparable: {value!r}")


def _convert(lv: Value, rv: Value, lk: str, rk: str) -> tuple[Value, Value, str] | None:
    """The two values converted to one kind as ``__compare`` does; None: "not equal" (-1)."""
    if lk == "B":
        if rk == "S":
            raise JavaError("java.lang.Boolean cannot be cast to java.lang.String")
        return None
    if lk == "S":
        assert isinstance(lv, str)
        if rk == "B":
            return boolean_value_of(lv), rv, "B"
        if rk == "I":
            return parse_int(lv), rv, "I"
        if rk == "L":
            return parse_long(lv), rv, "L"
        if rk == "D":
            return parse_double(lv), rv, "D"
        return None
    if rk == "S":  # a number against a string: the string is parsed as the number's type
        assert isinstance(rv, str)
        parsed: Value = parse_int(rv) if lk == "I" else parse_long(rv) if lk == "L" else parse_double(rv)
        return lv, parsed, lk
    if rk == "B":
        return None
    if "D" in (lk, rk):
        return float(lv), float(rv), "D"  # type: ignore[arg-type]
    return lv, rv, "L"  # Integer and Long: widened to long


def java_compare(lv: Value, rv: Value) -> int:
    """``ComparisonExpression.__compare(lv, rv, true)``: <0, 0 or >0 (both not null).

    Raises:
        JavaError: a string that does not parse as the other side's number type, or a Boolean
            against a String (Java's ClassCastException in that branch).
    """
    lk, rk = _kind(lv), _kind(rv)
    if lk != rk:
        converted = _convert(lv, rv, lk, rk)
        if converted is None:
            return -1
        lv, rv, lk = converted
    if lk == "D":
        return double_compare(lv, rv)  # type: ignore[arg-type]
    if lk == "S":
        return string_compare(lv, rv)  # type: ignore[arg-type]
    return _sign(lv, rv)  # type: ignore[arg-type]


def negate(value: Value) -> Value:
    """``UnaryExpression.createNegate``: numbers negated with Java's wrap-around, anything else null."""
    t = type(value)
    if t is int:
        n = -value  # type: ignore[operator]
        return n if n <= INT_MAX else INT_MIN
    if t is JLong:
        n = -int(value)  # type: ignore[arg-type]
        return JLong(n if n <= LONG_MAX else LONG_MIN)
    if t is float:
        return -value  # type: ignore[operator]
    return None


def java_str(value: Value) -> str:
    """``ConstantExpression.toString`` (strings quoted, ``''`` for a quote)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float):
        return repr(value).replace("inf", "Infinity").replace("e+", "E").replace("e-", "E-")
    return str(int(value))
