"""Evaluating a compiled selector against stored records, straight from their bytes.

RocketMQ evaluates against the record's whole property map (user properties plus ``TAGS``, ``KEYS``,
``UNIQ_KEY``...; ``ExpressionMessageFilter.isMatchedByCommitLog``). Here only the properties the
selector names are looked up, by byte search inside the record's PROPERTIES field (the last pair of
a repeated key wins, as Java's map does), and only their values are decoded.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import lru_cache
from typing import Final

from tidemq.protocol.record_layout import (
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE_V2,
    POS_MAGIC,
    POS_SYS_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
)
from tidemq.protocol.sql92 import Sql92Expression
from tidemq.protocol.sql92.compiler import compile_node

_I32 = struct.Struct(">i").unpack_from
_U16 = struct.Struct(">H").unpack_from
_BODY_LENGTH_V4: Final = 84
"""Position of BODY's length in a record whose born and store hosts are both IPv4."""

RecordFilter = Callable[[bytes, int], bool]
"""``(buffer, record start) -> matched``: what the store calls per candidate record."""


def properties_span(buf: bytes, pos: int) -> tuple[int, int]:
    """``(start, end)`` of the PROPERTIES text of the record at ``buf[pos:]`` (protocol.md §5.1)."""
    sys_flag = _I32(buf, pos + POS_SYS_FLAG)[0]
    p = pos + _BODY_LENGTH_V4
    if sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG):
        p += (12 if sys_flag & BORNHOST_V6_FLAG else 0) + (12 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 0)
    p += 4 + _I32(buf, p)[0]  # past BODY
    if _I32(buf, pos + POS_MAGIC)[0] == MESSAGE_MAGIC_CODE_V2:
        p += 2 + _U16(buf, p)[0]
    else:
        p += 1 + buf[p]
    start = p + 2
    return start, start + _U16(buf, p)[0]


def property_lookup(name: str) -> Callable[[bytes, int, int], str | None]:
    """A function ``(buf, start, end) -> value or None`` finding ``name`` in a properties span."""
    key = name.encode()
    needle, head = b"\x02" + key + b"\x01", key + b"\x01"
    skip_needle, skip_head = len(needle), len(head)

    def lookup(buf: bytes, start: int, end: int) -> str | None:
        i = buf.rfind(needle, start, end)
        if i >= 0:
            i += skip_needle
        elif buf.startswith(head, start, end):
            i = start + skip_head
        else:
            return None
        j = buf.find(b"\x02", i, end)
        return buf[i : j if j >= 0 else end].decode("utf-8", "replace")

    return lookup


_V4_HEAD = struct.Struct(">ii28xi44xi").unpack_from
"""TOTALSIZE, MAGICCODE, SYSFLAG and (IPv4 hosts) the BODY length: one call per record."""
_HOSTS_V6 = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG


def _span(buf: bytes, pos: int) -> tuple[int, int]:
    _size, magic, sys_flag, body_len = _V4_HEAD(buf, pos)
    if sys_flag & _HOSTS_V6:
        return properties_span(buf, pos)
    p = pos + _BODY_LENGTH_V4 + 4 + body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        p += 2 + (buf[p] << 8 | buf[p + 1])
    else:
        p += 1 + buf[p]
    start = p + 2
    return start, start + (buf[p] << 8 | buf[p + 1])


def _record_getter(name: str) -> Callable[[tuple[bytes, int, int]], str | None]:
    """:func:`property_lookup` taking the evaluation context ``(buf, start, end)`` as one tuple."""
    lookup = property_lookup(name)

    def get(ctx: tuple[bytes, int, int]) -> str | None:
        return lookup(*ctx)

    return get


@lru_cache(maxsize=256)
def record_filter(expression: Sql92Expression) -> RecordFilter:
    """The store-side filter of ``expression``: True when the record at ``buf[pos:]`` matches.

    The selector is compiled once more with getters that look a property up in the record's bytes
    when evaluation reaches it (``a > 5 AND b = 'x'`` never looks for ``b`` when ``a`` fails). A
    record whose property bytes cannot be read does not match, nor does one whose evaluation throws
    (RocketMQ catches Throwable there). Cached per expression object (the last 256), so the filters
    the broker builds for one selector under many ``subVersion`` values share one.
    """
    evaluate = compile_node(expression.tree, {name: _record_getter(name) for name in expression.names})

    def match(buf: bytes, pos: int) -> bool:
        try:
            start, end = _span(buf, pos)
            return evaluate((buf, start, end)) is True
        except Exception:
            return False

    return match


def record_properties_value(buf: bytes, pos: int, name: str) -> str | None:
    """One property of the record at ``buf[pos:]`` (e.g. ``RETRY_TOPIC``); None when absent."""
    start, end = properties_span(buf, pos)
    return property_lookup(name)(buf, start, end)
