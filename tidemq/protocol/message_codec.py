"""The stored-message codec: commit-log records, message ids, batch bodies (protocol.md §5).

Mirrors RocketMQ's ``MessageDecoder``, ``MessageSysFlag``, ``MessageClientIDSetter`` and the record
encoding in ``CommitLog.DefaultAppendMessageCallback``. The same bytes are written to the commit log,
served in PULL_MESSAGE / VIEW_MESSAGE_BY_ID bodies and decoded by the client, so one codec serves
store, broker and client. All integers are big-endian; timestamps are milliseconds.

Record layout (IPv4 hosts, 91 + body + topic + properties bytes)::

    TOTALSIZE 4 | MAGICCODE 4 | BODYCRC 4 | QUEUEID 4 | FLAG 4 | QUEUEOFFSET 8 | PHYSICALOFFSET 8 |
    SYSFLAG 4 | BORNTIMESTAMP 8 | BORNHOST 8 | STORETIMESTAMP 8 | STOREHOST 8 | RECONSUMETIMES 4 |
    PREPARED TRANSACTION OFFSET 8 | BODY 4+n | TOPIC 1+n | PROPERTIES 2+n
"""

from __future__ import annotations

import functools
import ipaddress
import os
import random
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from tidemq.errors import ProtocolError
from tidemq.protocol.message import (
    PROPERTY_SEPARATOR,
    Message,
    MessageExt,
    properties_to_string,
    string_to_properties,
)

# The record layout is defined once, in tidemq.protocol.record_layout (codec, store and Spark use it);
# the public names stay importable from here.
from tidemq.protocol.record_layout import BLANK_MAGIC_CODE as BLANK_MAGIC_CODE
from tidemq.protocol.record_layout import HEAD as _HEAD
from tidemq.protocol.record_layout import HOST4 as _HOST4
from tidemq.protocol.record_layout import HOST6 as _HOST6
from tidemq.protocol.record_layout import IPV4_FIXED_SIZE as IPV4_FIXED_SIZE
from tidemq.protocol.record_layout import MAX_PROPERTIES_BYTES as MAX_PROPERTIES_BYTES
from tidemq.protocol.record_layout import MAX_TOPIC_BYTES as MAX_TOPIC_BYTES
from tidemq.protocol.record_layout import MESSAGE_MAGIC_CODE as MESSAGE_MAGIC_CODE
from tidemq.protocol.record_layout import MESSAGE_MAGIC_CODE_V2 as MESSAGE_MAGIC_CODE_V2
from tidemq.protocol.record_layout import POS_BORN_HOST as POS_BORN_HOST
from tidemq.protocol.record_layout import POS_PHYSICAL_OFFSET as POS_PHYSICAL_OFFSET
from tidemq.protocol.record_layout import POS_QUEUE_OFFSET as POS_QUEUE_OFFSET
from tidemq.protocol.record_layout import POS_SYS_FLAG as POS_SYS_FLAG
from tidemq.protocol.record_layout import SIZE_MAGIC as _SIZE_MAGIC
from tidemq.protocol.record_layout import TAIL as _TAIL
from tidemq.protocol.record_layout import store_timestamp_position as store_timestamp_position

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_BATCH_HEAD = struct.Struct(">iiii")  # total, magic, crc, flag
# Decode fast path: every field before the body of a record whose born and store hosts are both
# IPv4 (the common case) in one unpack: HEAD, born ip + port, store timestamp, store ip + port,
# reconsume times, prepared offset, body length.
_V4_FIXED = struct.Struct(">iiiiiqqiq4siq4siiqi")
_PORT_PHY = struct.Struct(">iq")
_HOST_V6_FLAGS = 0x10 | 0x20  # MessageSysFlag.BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_HOST4_TEXT: dict[tuple[bytes, int], str] = {}
_new_message_ext = MessageExt.__new__


def _host4_text(ip: bytes, port: int) -> str:
    """``"a.b.c.d:port"``, memoised (a consumer sees few distinct hosts; the table is bounded)."""
    key = (ip, port)
    text = _HOST4_TEXT.get(key)
    if text is None:
        if len(_HOST4_TEXT) >= 4096:
            _HOST4_TEXT.clear()
        text = _HOST4_TEXT[key] = f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    return text


class MessageSysFlag:
    """Bits of a record's SYSFLAG (RocketMQ's ``MessageSysFlag``)."""

    COMPRESSED_FLAG: Final = 0x1
    MULTI_TAGS_FLAG: Final = 0x2
    TRANSACTION_NOT_TYPE: Final = 0x0
    TRANSACTION_PREPARED_TYPE: Final = 0x4
    TRANSACTION_COMMIT_TYPE: Final = 0x8
    TRANSACTION_ROLLBACK_TYPE: Final = 0xC
    BORNHOST_V6_FLAG: Final = 0x10
    STOREHOSTADDRESS_V6_FLAG: Final = 0x20
    NEED_UNWRAP_FLAG: Final = 0x40
    INNER_BATCH_FLAG: Final = 0x80
    COMPRESSION_TYPE_MASK: Final = 0x700
    COMPRESSION_ZLIB: Final = 0x300

    @staticmethod
    def get_transaction_value(flag: int) -> int:
        """The transaction type bits (``flag & 0xC``)."""
        return flag & 0xC

    @staticmethod
    def reset_transaction_value(flag: int, tran_type: int) -> int:
        """``flag`` with its transaction bits replaced by ``tran_type``."""
        return (flag & ~0xC) | tran_type


# --------------------------------------------------------------------------------------------- hosts


@functools.lru_cache(maxsize=4096)
def _pack_host(host: str) -> tuple[bytes, bool]:
    """``"ip:port"`` (or ``"[v6]:port"``) -> (packed ip + 4-byte port, is_v6). IPv4-mapped v6 -> v4."""
    ip_text, sep, port_text = host.rpartition(":")
    if not sep:
        raise ProtocolError(f"host {host!r} is not 'ip:port'")
    try:
        port = int(port_text)
        ip = ipaddress.ip_address(ip_text.strip("[]"))
    except ValueError as exc:
        raise ProtocolError(f"host {host!r} is not 'ip:port': {exc}") from exc
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if not 0 <= port <= 0x7FFFFFFF:
        raise ProtocolError(f"host {host!r}: port out of range")
    if isinstance(ip, ipaddress.IPv4Address):
        return _HOST4.pack(ip.packed, port), False
    return _HOST6.pack(ip.packed, port), True


def _unpack_host(raw: bytes | memoryview) -> str:
    ip = bytes(raw[:-4])
    port = _I32.unpack(raw[-4:])[0]
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    return f"[{ipaddress.IPv6Address(ip)}]:{port}"


# ------------------------------------------------------------------------------------------ body CRC


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """RocketMQ's ``UtilAll.crc32``: IEEE CRC32 of ``body`` masked to 31 bits (``& 0x7FFFFFFF``)."""
    return zlib.crc32(body) & 0x7FFFFFFF


def compress_body(body: bytes, level: int = 5) -> bytes:
    """zlib stream (RFC 1950) of ``body`` at ``level`` (5, as Java and C++ producers use)."""
    return zlib.compress(body, level)


def decompress_body(body: bytes | memoryview) -> bytes:
    """Inflate a zlib stream. Raises ``ProtocolError`` if ``body`` is not valid zlib data."""
    try:
        return zlib.decompress(body)
    except zlib.error as exc:
        raise ProtocolError(f"compressed message body is not valid zlib data: {exc}") from exc


# ---------------------------------------------------------------------------------------- encoding


@functools.lru_cache(maxsize=8)
def _fixed_struct(born_size: int, store_size: int) -> struct.Struct:
    """TOTALSIZE .. BODY length (HEAD, born host, store timestamp, store host, TAIL, body length)."""
    return struct.Struct(f">iiiiiqqiq{born_size}sq{store_size}siqi")


_HOST_V6_BITS = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG


class RecordEncoder:
    """Encodes commit-log records (protocol.md §5.1) of one topic, born host and store host. The
    store keeps one per (topic, born host) and encodes a put's records with their final queue and
    commit-log offsets in one pass: one struct pack and four slices per record.

    Mirrors ``CommitLog.DefaultAppendMessageCallback.doAppend`` / ``MessageExtBatchEncoder``. The v6
    bits of the written sys flag are set or cleared to match the hosts (an IPv4-mapped IPv6 address is
    stored as IPv4, which every client decodes).

    Attributes:
        fixed_size: bytes of a record without its body and properties bytes.

    Raises (constructor):
        ProtocolError: topic longer than 127 UTF-8 bytes, or a host that is not ``"ip:port"``.
    """

    __slots__ = ("_born_raw", "_fixed", "_store_raw", "_topic_part", "_v6_bits", "fixed_size")

    def __init__(self, topic: str, born_host: str, store_host: str) -> None:
        topic_raw = topic.encode()
        if len(topic_raw) > MAX_TOPIC_BYTES:
            raise ProtocolError(f"topic is {len(topic_raw)} bytes, more than {MAX_TOPIC_BYTES}")
        born_raw, born_v6 = _pack_host(born_host)
        store_raw, store_v6 = _pack_host(store_host)
        self._v6_bits = (MessageSysFlag.BORNHOST_V6_FLAG if born_v6 else 0) | (
            MessageSysFlag.STOREHOSTADDRESS_V6_FLAG if store_v6 else 0
        )
        self._fixed = _fixed_struct(len(born_raw), len(store_raw))
        self._born_raw = born_raw
        self._store_raw = store_raw
        self._topic_part = _U8.pack(len(topic_raw)) + topic_raw
        self.fixed_size = self._fixed.size + len(self._topic_part) + 2

    def encode(
        self,
        out: list[bytes],
        flags: Sequence[int],
        bodies: Sequence[bytes],
        properties: Sequence[bytes],
        sizes: Sequence[int],
        *,
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        reconsume_times: int,
        prepared_transaction_offset: int,
        queue_offset: int,
        queue_offset_step: int,
        commit_log_offset: int,
        store_timestamp: int,
    ) -> None:
        """Append the parts of one record per ``(flag, body, properties, size)`` to ``out``.

        ``properties`` are UTF-8 bytes of at most 32767 each and ``sizes[i]`` is
        ``fixed_size + len(bodies[i]) + len(properties[i])`` (the caller checked both). Record ``i``
        gets queue offset ``queue_offset + i * queue_offset_step`` (step 0: a record with no
        consume-queue entry) and starts at ``commit_log_offset`` plus the sizes before it; the other
        fields are shared by every record.
        """
        pack = self._fixed.pack
        crc32 = zlib.crc32
        append = out.append
        born_raw, store_raw, topic_part = self._born_raw, self._store_raw, self._topic_part
        sys_flag = (sys_flag & ~_HOST_V6_BITS) | self._v6_bits
        q, phy = queue_offset, commit_log_offset
        for flag, body, props, size in zip(flags, bodies, properties, sizes, strict=True):
            append(
                pack(
                    size,
                    MESSAGE_MAGIC_CODE,
                    crc32(body) & 0x7FFFFFFF,
                    queue_id,
                    flag,
                    q,
                    phy,
                    sys_flag,
                    born_timestamp,
                    born_raw,
                    store_timestamp,
                    store_raw,
                    reconsume_times,
                    prepared_transaction_offset,
                    len(body),
                )
            )
            append(body)
            append(topic_part)
            append(_U16.pack(len(props)))
            append(props)
            q += queue_offset_step
            phy += size

    def encode_one(
        self,
        flag: int,
        body: bytes,
        properties: bytes,
        size: int,
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        reconsume_times: int,
        prepared_transaction_offset: int,
        queue_offset: int,
        commit_log_offset: int,
        store_timestamp: int,
    ) -> bytes:
        """One record, as :meth:`encode` writes it for a single message, as bytes (the single-send
        hot path: positional arguments, no loop, one join)."""
        return b"".join(
            (
                self._fixed.pack(
                    size,
                    MESSAGE_MAGIC_CODE,
                    zlib.crc32(body) & 0x7FFFFFFF,
                    queue_id,
                    flag,
                    queue_offset,
                    commit_log_offset,
                    (sys_flag & ~_HOST_V6_BITS) | self._v6_bits,
                    born_timestamp,
                    self._born_raw,
                    store_timestamp,
                    self._store_raw,
                    reconsume_times,
                    prepared_transaction_offset,
                    len(body),
                ),
                body,
                self._topic_part,
                _U16.pack(len(properties)),
                properties,
            )
        )


def encode_stored_message(
    *,
    topic: str,
    body: bytes,
    properties: str | dict[str, str] = "",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    commit_log_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: str = "0.0.0.0:0",
    store_timestamp: int = 0,
    store_host: str = "0.0.0.0:0",
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
) -> bytes:
    """Encode one commit-log record (protocol.md §5.1); ``body`` is stored as given.

    BODYCRC is computed here over ``body``. One record through :class:`RecordEncoder`.

    Raises:
        ProtocolError: topic longer than 127 UTF-8 bytes, properties longer than 32767 bytes, or a
            host that is not ``"ip:port"``.
    """
    props_text = properties if isinstance(properties, str) else properties_to_string(properties)
    props_raw = props_text.encode()
    if len(props_raw) > MAX_PROPERTIES_BYTES:
        raise ProtocolError(f"properties are {len(props_raw)} bytes, more than {MAX_PROPERTIES_BYTES}")
    encoder = RecordEncoder(topic, born_host, store_host)
    out: list[bytes] = []
    size = encoder.fixed_size + len(body) + len(props_raw)
    encoder.encode(
        out,
        (flag,),
        (body,),
        (props_raw,),
        (size,),
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        queue_offset=queue_offset,
        queue_offset_step=0,
        commit_log_offset=commit_log_offset,
        store_timestamp=store_timestamp,
    )
    return b"".join(out)


def patch_stored_message(
    buf: bytearray, pos: int, *, queue_offset: int, commit_log_offset: int, store_timestamp: int
) -> None:
    """Set QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP of the record at ``buf[pos:]`` in place.

    The store encodes a record before taking its lock and fills in these three under the lock,
    as ``CommitLog.DefaultAppendMessageCallback`` does.
    """
    _I64.pack_into(buf, pos + POS_QUEUE_OFFSET, queue_offset)
    _I64.pack_into(buf, pos + POS_PHYSICAL_OFFSET, commit_log_offset)
    sys_flag = _I32.unpack_from(buf, pos + POS_SYS_FLAG)[0]
    _I64.pack_into(buf, pos + store_timestamp_position(sys_flag), store_timestamp)


# ---------------------------------------------------------------------------------------- decoding


@dataclass(slots=True)
class RecordInfo:
    """What the store needs from a record to dispatch it to a consume queue (``DispatchRequest``)."""

    total_size: int
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    store_timestamp: int
    body_crc: int
    properties: str
    body_offset: int
    """Position of the body bytes, relative to the record start."""
    body_length: int


def _read_topic_and_properties(view: memoryview, p: int, magic: int) -> tuple[str, str, int]:
    """Read the TOPIC (1-byte length, 2 bytes for magic V2) and PROPERTIES (2-byte length) fields
    at ``p``; returns ``(topic, properties text, position after the record)``."""
    if magic == MESSAGE_MAGIC_CODE_V2:
        topic_len = _U16.unpack_from(view, p)[0]
        p += 2
    else:
        topic_len = view[p]
        p += 1
    topic = bytes(view[p : p + topic_len]).decode()
    p += topic_len
    props_len = _U16.unpack_from(view, p)[0]
    p += 2
    return topic, bytes(view[p : p + props_len]).decode(), p + props_len


def read_record_info(buf: bytes | bytearray | memoryview, pos: int = 0) -> RecordInfo:
    """Parse the header fields, topic and properties of the record at ``buf[pos:]`` (body untouched).

    Raises:
        ProtocolError: the bytes do not form a complete record.
    """
    view = memoryview(buf)
    try:
        total, magic, crc, queue_id, _flag, queue_offset, phy, sys_flag, _born = _HEAD.unpack_from(view, pos)
        p = pos + POS_BORN_HOST + (20 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 8)
        store_ts = _I64.unpack_from(view, p)[0]
        p += 8 + (20 if sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else 8) + 12
        body_len = _I32.unpack_from(view, p)[0]
        body_off = p + 4
        p = body_off + body_len
        topic, props, p = _read_topic_and_properties(view, p, magic)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"truncated or malformed message record at {pos}: {exc}") from exc
    if body_len < 0 or p - pos != total or p > len(view):
        raise ProtocolError(f"message record at {pos}: TOTALSIZE {total} does not match its fields")
    return RecordInfo(
        total, topic, queue_id, queue_offset, phy, sys_flag, store_ts, crc, props, body_off - pos, body_len
    )


def decode_message(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, decompress: bool = True, read_body: bool = True
) -> tuple[MessageExt, int]:
    """Decode the record at ``buf[pos:]``. Mirrors ``MessageDecoder.decode``.

    Returns:
        ``(message, next_pos)``; ``message.offset_msg_id`` is filled from store host and
        physical offset. With ``decompress`` a COMPRESSED body is inflated (zlib).

    Raises:
        ProtocolError: truncated or inconsistent record, or a compressed body that is not zlib.
    """
    view = memoryview(buf)
    if len(view) - pos >= _V4_FIXED.size and not view[pos + POS_SYS_FLAG + 3] & _HOST_V6_FLAGS:
        return _decode_message_v4(view, pos, decompress, read_body)
    try:
        total, _magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts = _HEAD.unpack_from(
            view, pos
        )
        p = pos + POS_BORN_HOST
        hl = 20 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 8
        born_host = _unpack_host(view[p : p + hl])
        p += hl
        store_ts = _I64.unpack_from(view, p)[0]
        p += 8
        hl = 20 if sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else 8
        store_host = _unpack_host(view[p : p + hl])
        p += hl
        reconsume, prepared = _TAIL.unpack_from(view, p)
        p += 12
        body_len = _I32.unpack_from(view, p)[0]
        p += 4
        body = bytes(view[p : p + body_len]) if read_body else b""
        p += body_len
        topic, props_text, p = _read_topic_and_properties(view, p, _magic)
        props = string_to_properties(props_text) if props_text else {}
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"truncated or malformed message record at {pos}: {exc}") from exc
    if body_len < 0 or p - pos != total or p > len(view):
        raise ProtocolError(f"message record at {pos}: TOTALSIZE {total} does not match its fields")
    if decompress and read_body and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        body = decompress_body(body)
    msg = MessageExt(
        topic,
        body,
        flag=flag,
        properties=props,
        queue_id=queue_id,
        store_size=total,
        queue_offset=queue_offset,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=born_host,
        store_timestamp=store_ts,
        store_host=store_host,
        offset_msg_id=create_offset_msg_id(store_host, phy),
        commit_log_offset=phy,
        body_crc=crc,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
    )
    return msg, p


def _decode_message_v4(
    view: memoryview, pos: int, decompress: bool, read_body: bool
) -> tuple[MessageExt, int]:
    """:func:`decode_message` for a record with IPv4 born and store hosts (one unpack for the
    fixed part; the offset msg id straight from the stored host bytes)."""
    try:
        (total, magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts, born_ip, born_port,
         store_ts, store_ip, store_port, reconsume, prepared, body_len) = _V4_FIXED.unpack_from(view, pos)  # fmt: skip
        p = pos + _V4_FIXED.size
        body = bytes(view[p : p + body_len]) if read_body else b""
        p += body_len
        topic, props_text, p = _read_topic_and_properties(view, p, magic)
        props = string_to_properties(props_text) if props_text else {}
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"truncated or malformed message record at {pos}: {exc}") from exc
    if body_len < 0 or p - pos != total or p > len(view):
        raise ProtocolError(f"message record at {pos}: TOTALSIZE {total} does not match its fields")
    if decompress and read_body and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        body = decompress_body(body)
    # Every slot set directly (what MessageExt(...) does, without its keyword call, the base
    # class's copies of fresh objects and the defaults): 3.4 -> 2.4 us a message.
    msg = _new_message_ext(MessageExt)
    msg.topic = topic
    msg.body = body
    msg.flag = flag
    msg.properties = props
    msg.queue_id = queue_id
    msg.store_size = total
    msg.queue_offset = queue_offset
    msg.sys_flag = sys_flag
    msg.born_timestamp = born_ts
    msg.born_host = _host4_text(born_ip, born_port)
    msg.store_timestamp = store_ts
    msg.store_host = _host4_text(store_ip, store_port)
    msg.offset_msg_id = (store_ip + _PORT_PHY.pack(store_port, phy)).hex().upper()  # createMessageId
    msg.commit_log_offset = phy
    msg.body_crc = crc
    msg.reconsume_times = reconsume
    msg.prepared_transaction_offset = prepared
    msg.broker_name = ""
    return msg, p


def decode_messages(
    buf: bytes | bytearray | memoryview,
    *,
    decompress: bool = True,
    broker_name: str = "",
    extra_properties: str = "",
) -> list[MessageExt]:
    """Decode records laid back to back (a PULL_MESSAGE body). Mirrors ``MessageDecoder.decodes``.

    The IPv4 records (the usual case) are decoded inline here over ``bytes`` (slices instead of
    memoryview copies, the store host's text and id prefix worked out once per body); other records
    go through :func:`decode_message`. Same messages as :func:`decode_message` one by one.

    The inline path leaves each message's properties as their stored text, parsed at the first read
    of ``msg.properties`` (:meth:`MessageExt.set_properties_text`).

    Args:
        broker_name: set as every message's ``broker_name``.
        extra_properties: a properties string (``"K\x01v\x02K2\x01v2"``) added to every message's
            properties after its own, as if each pair were then set on ``msg.properties``.

    Raises:
        ProtocolError: a truncated or malformed record.
    """
    data = buf if type(buf) is bytes else bytes(buf)
    out: list[MessageExt] = []
    append = out.append
    pos, end = 0, len(data)
    unpack = _V4_FIXED.unpack_from
    fixed = _V4_FIXED.size
    flag_at = POS_SYS_FLAG + 3
    new = _new_message_ext
    set_text = MessageExt.set_properties_text
    store_key: tuple[bytes, int] | None = None
    store_text = store_id = ""
    extra = PROPERTY_SEPARATOR + extra_properties if extra_properties else ""
    while pos < end:
        if end - pos < fixed or data[pos + flag_at] & _HOST_V6_FLAGS:
            msg, pos = decode_message(data, pos, decompress=decompress)
            msg.broker_name = broker_name
            if extra_properties:
                msg.properties.update(string_to_properties(extra_properties))
            append(msg)
            continue
        try:
            (total, magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts, born_ip, born_port,
             store_ts, store_ip, store_port, reconsume, prepared, body_len) = unpack(data, pos)  # fmt: skip
            p = pos + fixed
            body = data[p : p + body_len]
            p += body_len
            if magic == MESSAGE_MAGIC_CODE_V2:
                topic_len = (data[p] << 8) | data[p + 1]
                p += 2
            else:
                topic_len = data[p]
                p += 1
            topic = data[p : p + topic_len].decode()
            p += topic_len
            props_len = (data[p] << 8) | data[p + 1]
            p += 2
            props_text = data[p : p + props_len].decode() + extra if props_len else extra_properties
            p += props_len
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
            raise ProtocolError(f"truncated or malformed message record at {pos}: {exc}") from exc
        if body_len < 0 or p - pos != total or p > end:
            raise ProtocolError(f"message record at {pos}: TOTALSIZE {total} does not match its fields")
        if decompress and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
            body = decompress_body(body)
        if store_key != (store_ip, store_port):
            store_key = (store_ip, store_port)
            store_text = _host4_text(store_ip, store_port)
            store_id = (store_ip + _I32.pack(store_port)).hex().upper()
        msg = new(MessageExt)  # every slot set directly, as _decode_message_v4
        msg.topic = topic
        msg.body = body
        msg.flag = flag
        set_text(msg, props_text)
        msg.queue_id = queue_id
        msg.store_size = total
        msg.queue_offset = queue_offset
        msg.sys_flag = sys_flag
        msg.born_timestamp = born_ts
        msg.born_host = _host4_text(born_ip, born_port)
        msg.store_timestamp = store_ts
        msg.store_host = store_text
        # createMessageId: store ip, port (int32) and commit-log offset (int64), upper-case hex
        msg.offset_msg_id = (
            f"{store_id}{phy:016X}"
            if phy >= 0
            else (store_ip + _PORT_PHY.pack(store_port, phy)).hex().upper()
        )
        msg.commit_log_offset = phy
        msg.body_crc = crc
        msg.reconsume_times = reconsume
        msg.prepared_transaction_offset = prepared
        msg.broker_name = broker_name
        append(msg)
        pos = p
    return out


def read_size_and_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """``(TOTALSIZE, MAGICCODE)`` of the record (or blank filler) at ``buf[pos:]``."""
    size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    return int(size), int(magic)


# -------------------------------------------------------------------------------------- message ids


def create_offset_msg_id(store_host: str, commit_log_offset: int) -> str:
    """The broker's message id: hex of store IP + port (int) + commit-log offset (protocol.md §5.3).

    32 upper-case hex characters for IPv4 (56 for IPv6). Mirrors ``MessageDecoder.createMessageId``.
    """
    raw, _ = _pack_host(store_host)
    return (raw + _I64.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """Inverse of :func:`create_offset_msg_id`: ``(store host "ip:port", commit-log offset)``.

    Raises:
        ProtocolError: not 32 / 56 hex characters.
    """
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise ProtocolError(f"message id {msg_id!r} is not hex") from exc
    if len(raw) not in (16, 28):
        raise ProtocolError(f"message id {msg_id!r} must be 32 (IPv4) or 56 (IPv6) hex characters")
    return _unpack_host(raw[:-8]), _I64.unpack(raw[-8:])[0]


class _UniqueIdGenerator:
    """``MessageClientIDSetter``: IP(4) + pid(2) + random(4) + ms since month start(4) + counter(2)."""

    def __init__(self, ip: str | None = None) -> None:
        self._lock = threading.Lock()
        self._counter = random.getrandbits(16)
        self._fixed = b""
        self._ip = ip
        self._start = 0
        self._next_start = 0

    def _fixed_part(self) -> bytes:
        if not self._fixed:
            ip = self._ip or _local_ipv4()
            self._fixed = (
                ipaddress.IPv4Address(ip).packed
                + struct.pack(">H", os.getpid() & 0xFFFF)
                + random.getrandbits(32).to_bytes(4, "big")
            )
        return self._fixed

    def _set_start_time(self, now_ms: int) -> None:
        now = datetime.fromtimestamp(now_ms / 1000)
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = (
            start.replace(year=start.year + 1, month=1)
            if start.month == 12
            else start.replace(month=start.month + 1)
        )
        self._start = int(start.timestamp() * 1000)
        self._next_start = int(nxt.timestamp() * 1000)

    def create(self) -> str:
        now_ms = int(time.time() * 1000)
        with self._lock:
            fixed = self._fixed_part()
            if now_ms >= self._next_start:
                self._set_start_time(now_ms)
            self._counter = (self._counter + 1) & 0xFFFF
            counter = self._counter
        diff = (now_ms - self._start) & 0xFFFFFFFF
        return (fixed + struct.pack(">IH", diff, counter)).hex().upper()

    def create_many(self, n: int) -> list[str]:
        """``n`` ids as ``n`` calls of :meth:`create` in the same millisecond would give them
        (consecutive counters), with the time and the fixed part's hex worked out once."""
        now_ms = int(time.time() * 1000)
        with self._lock:
            fixed = self._fixed_part()
            if now_ms >= self._next_start:
                self._set_start_time(now_ms)
            first = self._counter + 1
            self._counter = (self._counter + n) & 0xFFFF
            diff = (now_ms - self._start) & 0xFFFFFFFF
        prefix = f"{fixed.hex().upper()}{diff:08X}"
        return [f"{prefix}{c & 0xFFFF:04X}" for c in range(first, first + n)]


def _local_ipv4() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent; picks the outgoing interface
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


_ID_GENERATOR = _UniqueIdGenerator()


def create_unique_id() -> str:
    """A new client message id (``UNIQ_KEY``), 32 upper-case hex chars (protocol.md §5.3).

    Mirrors ``MessageClientIDSetter.createUniqID``; thread-safe; only the last 6 bytes vary.
    """
    return _ID_GENERATOR.create()


def create_unique_ids(n: int) -> list[str]:
    """``n`` new client message ids at once (what ``n`` calls of :func:`create_unique_id` give)."""
    return _ID_GENERATOR.create_many(n)


# ------------------------------------------------------------------------------------- batch bodies


@dataclass(slots=True)
class BatchItem:
    """One message of a batch body (protocol.md §5.6): user flag, body and properties."""

    flag: int
    body: bytes
    properties_string: str
    """The properties exactly as sent (the broker appends the batch-level ones to this text)."""

    @property
    def properties(self) -> dict[str, str]:
        """The properties as a dict (parsed on each access: the broker's put path reads the text)."""
        return string_to_properties(self.properties_string)


def encode_batch_body(msgs: Iterable[Message]) -> bytes:
    """Encode messages as a SEND_BATCH_MESSAGE body. Mirrors ``MessageDecoder.encodeMessages``.

    Raises:
        ProtocolError: a message's properties exceed 32767 bytes.
    """
    parts: list[bytes] = []
    for msg in msgs:
        props = properties_to_string(msg.properties).encode()
        if len(props) > MAX_PROPERTIES_BYTES:
            raise ProtocolError(f"properties are {len(props)} bytes, more than {MAX_PROPERTIES_BYTES}")
        parts.append(_BATCH_HEAD.pack(20 + len(msg.body) + 2 + len(props), 0, 0, msg.flag))
        parts.append(_I32.pack(len(msg.body)))
        parts.append(msg.body)
        parts.append(_U16.pack(len(props)))
        parts.append(props)
    return b"".join(parts)


def decode_batch_body(body: bytes | bytearray | memoryview) -> list[BatchItem]:
    """Decode a SEND_BATCH_MESSAGE body. Mirrors ``MessageDecoder.decodesBatch``.

    Raises:
        ProtocolError: truncated, or a TOTALSIZE that does not match the inner fields.
    """
    flags, bodies, texts = decode_batch_columns(body)
    return [BatchItem(f, b, t) for f, b, t in zip(flags, bodies, texts, strict=True)]


_BATCH_ITEM_HEAD = struct.Struct(">iiiii")  # total, magic, crc, flag, body length


def decode_batch_columns(body: bytes | bytearray | memoryview) -> tuple[list[int], list[bytes], list[str]]:
    """Decode a SEND_BATCH_MESSAGE body as columns ``(flags, bodies, properties texts)``: the broker's
    put path, with no object per message. Same checks as :func:`decode_batch_body`.

    Raises:
        ProtocolError: truncated, or a TOTALSIZE that does not match the inner fields.
    """
    raw = bytes(body)
    flags: list[int] = []
    bodies: list[bytes] = []
    texts: list[str] = []
    unpack_head = _BATCH_ITEM_HEAD.unpack_from
    pos, end = 0, len(raw)
    while pos < end:
        try:
            total, _magic, _crc, flag, body_len = unpack_head(raw, pos)
            p = pos + 20
            if body_len < 0 or p + body_len > end:
                raise ProtocolError(f"batch item at {pos}: body length {body_len} runs past the end")
            item_body = raw[p : p + body_len]
            p += body_len
            props_len = (raw[p] << 8) | raw[p + 1]
            p += 2
            if p + props_len > end:
                raise ProtocolError(f"batch item at {pos}: properties run past the end")
            text = raw[p : p + props_len].decode()
            p += props_len
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise ProtocolError(f"truncated or malformed batch item at {pos}: {exc}") from exc
        if p - pos != total:
            raise ProtocolError(
                f"batch item at {pos}: TOTALSIZE {total} does not match its fields ({p - pos})"
            )
        flags.append(flag)
        bodies.append(item_body)
        texts.append(text)
        pos = p
    return flags, bodies, texts
