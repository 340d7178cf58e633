"""The source's schema and the decoder from stored-message records straight to Arrow RecordBatches.

Pure code over ``pyarrow`` (no Spark session, no sockets). The record layout is protocol.md §5
(``tidemq.protocol.message_codec``); this decoder reads only what the columns need and builds the
Arrow arrays column by column, which is several times faster than building ``MessageExt`` objects.

Columns (Spark DDL, see :data:`SOURCE_SCHEMA_DDL`), like Kafka's source plus RocketMQ's fields:

==================  ========================  ==================================================
column              Spark / Arrow type        meaning
==================  ========================  ==================================================
topic               string                    the message's topic
brokerName          string                    broker (group) name of its queue
queueId             int / int32               queue id
queueOffset         bigint / int64            offset in the consume queue
msgId               string                    ``UNIQ_KEY`` (the client's id), else the offset id
keys                string                    ``KEYS`` property (space separated), null if none
tags                string                    ``TAGS`` property, null if none
body                binary                    body (inflated when it was stored compressed)
bornTimestamp       timestamp (us, UTC)       when the producer created it (ms on the wire)
storeTimestamp      timestamp (us, UTC)       when the broker stored it
reconsumeTimes      int / int32               redeliveries so far
properties          map<string,string>        all user and system properties
==================  ========================  ==================================================
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Iterable
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from tidemq.errors import ProtocolError
from tidemq.protocol.message_codec import MESSAGE_MAGIC_CODE_V2, MessageSysFlag

SOURCE_SCHEMA_DDL: Final = (
    "topic string, brokerName string, queueId int, queueOffset bigint, msgId string, keys string, "
    "tags string, body binary, bornTimestamp timestamp, storeTimestamp timestamp, reconsumeTimes int, "
    "properties map<string,string>"
)
"""The source's schema as a Spark DDL string."""

_TS = pa.timestamp("us", tz="UTC")
PROPERTIES_TYPE: Final = pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string()))
ARROW_SCHEMA: Final = pa.schema(
    [
        ("topic", pa.string()),
        ("brokerName", pa.string()),
        ("queueId", pa.int32()),
        ("queueOffset", pa.int64()),
        ("msgId", pa.string()),
        ("keys", pa.string()),
        ("tags", pa.string()),
        ("body", pa.binary()),
        ("bornTimestamp", _TS),
        ("storeTimestamp", _TS),
        ("reconsumeTimes", pa.int32()),
        ("properties", PROPERTIES_TYPE),
    ]
)
"""Arrow schema of the RecordBatches ``read()`` yields (equals ``to_arrow_schema`` of the DDL, UTC)."""

_HEAD = struct.Struct(">iiiiiqqiq")  # total, magic, crc, queueId, flag, queueOffset, phyOffset, sysFlag, born
# The whole fixed part of a record whose hosts are both IPv4 (the common case), up to the body length.
_FIXED_V4 = struct.Struct(">iiiiiqqiq8sq8siqi")
_FIXED_V4_SIZE = _FIXED_V4.size  # 88
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_TAIL = struct.Struct(">iqi")  # reconsumeTimes, preparedTransactionOffset, bodyLength
_V6 = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_BORN_V6 = MessageSysFlag.BORNHOST_V6_FLAG
_STORE_V6 = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_COMPRESSED = MessageSysFlag.COMPRESSED_FLAG
_MS_TO_US = pa.scalar(1000, pa.int64())


def _parse_properties_python(raw: list[bytes]) -> tuple[pa.Array, pa.Array, pa.Array]:
    offsets = [0]
    keys: list[str] = []
    values: list[str] = []
    for item in raw:
        for pair in item.decode().split("\x02"):
            k, sep, v = pair.partition("\x01")
            if sep:
                keys.append(k)
                values.append(v)
        offsets.append(len(keys))
    return pa.array(offsets, pa.int32()), pa.array(keys, pa.string()), pa.array(values, pa.string())


def parse_properties(raw: list[bytes]) -> pa.MapArray:
    """RocketMQ property strings (``k\\x01v\\x02k\\x01v``) to a ``map<string,string>`` array.

    Vectorised with Arrow compute; strings with empty segments (a C++ client's trailing
    ``\\x02``, empty properties) take a per-record Python path.
    """
    text = pa.array(raw, pa.binary()).cast(pa.string())
    lists = pc.split_pattern(text, "\x02")
    flat = pc.list_flatten(lists)
    if len(flat) and pc.all(pc.match_substring(flat, "\x01")).as_py():
        pairs = pc.split_pattern(flat, "\x01", max_splits=1)
        offsets, keys, values = lists.offsets, pc.list_element(pairs, 0), pc.list_element(pairs, 1)
    else:
        offsets, keys, values = _parse_properties_python(raw)
    return pa.MapArray.from_arrays(offsets, keys, values, type=PROPERTIES_TYPE)


class RecordBatchBuilder:
    """Accumulates decoded records of one message queue and emits Arrow RecordBatches.

    Args:
        broker_name: value of the ``brokerName`` column.
        tag_filter: ``None`` keeps every record; otherwise the set of tags to keep (a record without
            a tag is dropped), e.g. from :func:`tag_predicate`.

    All records of a builder come from one queue, hence one topic (the first record's). Use
    :meth:`add_body` with each PULL_MESSAGE body, then :meth:`flush` for a RecordBatch. The
    per-record Python loop only slices; properties, keys, tags and timestamps are built with Arrow
    compute in :meth:`flush`.
    """

    def __init__(self, broker_name: str, tag_filter: frozenset[str] | None = None) -> None:
        self.broker_name = broker_name
        self.tag_filter = tag_filter
        self._reset()

    def _reset(self) -> None:
        self.topic: str | None = None
        self.queue_ids: list[int] = []
        self.queue_offsets: list[int] = []
        self.store_hosts: list[bytes] = []
        self.phys: list[int] = []
        self.body_offsets = array("i", [0])
        self.body_chunks: list[bytes | memoryview] = []
        self.body_size = 0
        self.born: list[int] = []
        self.stored: list[int] = []
        self.reconsume: list[int] = []
        self.props: list[bytes] = []

    def __len__(self) -> int:
        return len(self.queue_offsets)

    def add_body(self, buf: bytes | memoryview, end_offset: int) -> tuple[int, int]:
        """Decode the records laid back to back in ``buf``, keeping those below ``end_offset``.

        Returns:
            ``(records kept before tag filtering, last queue offset seen + 1)``, the latter -1 when
            ``buf`` is empty.

        Raises:
            ProtocolError: a truncated or malformed record.
        """
        view = memoryview(buf)
        pos, n = 0, len(view)
        kept = 0
        next_offset = -1
        fixed = _FIXED_V4.unpack_from
        a_qid, a_qoff = self.queue_ids.append, self.queue_offsets.append
        a_host, a_phy = self.store_hosts.append, self.phys.append
        a_body, a_boff = self.body_chunks.append, self.body_offsets.append
        a_born, a_stored, a_rc = self.born.append, self.stored.append, self.reconsume.append
        a_props = self.props.append
        topic = self.topic
        size = self.body_size
        while pos < n:
            try:
                (total, magic, _crc, qid, _flag, qoff, phy, sys_flag, born, _bh, store_ts, store_host, reconsume,
                 _prep, body_len) = fixed(view, pos)  # fmt: skip
                if total <= 0 or pos + total > n:
                    raise ProtocolError(f"record at {pos}: TOTALSIZE {total} exceeds the {n}-byte body")
                if sys_flag & _V6:
                    p = pos + 48 + (20 if sys_flag & _BORN_V6 else 8)
                    store_ts = _I64.unpack_from(view, p)[0]
                    p += 8
                    hl = 20 if sys_flag & _STORE_V6 else 8
                    store_host = bytes(view[p : p + hl])
                    p += hl
                    reconsume, _prep, body_len = _TAIL.unpack_from(view, p)
                    p += 16
                else:
                    p = pos + _FIXED_V4_SIZE
                body = view[p : p + body_len]
                p += body_len
                if magic == MESSAGE_MAGIC_CODE_V2:
                    topic_len = _U16.unpack_from(view, p)[0]
                    p += 2
                else:
                    topic_len = view[p]
                    p += 1
                if topic is None:
                    topic = bytes(view[p : p + topic_len]).decode()
                p += topic_len
                props_len = (view[p] << 8) | view[p + 1]
                props = bytes(view[p + 2 : p + 2 + props_len])
            except (struct.error, IndexError, UnicodeDecodeError) as exc:
                raise ProtocolError(f"malformed message record at byte {pos}: {exc}") from None
            pos += total
            next_offset = qoff + 1
            if qoff >= end_offset:
                continue
            if sys_flag & _COMPRESSED:
                try:
                    body = memoryview(zlib.decompress(body))
                except zlib.error as exc:
                    raise ProtocolError(
                        f"record at queue offset {qoff}: bad compressed body: {exc}"
                    ) from None
            kept += 1
            a_qid(qid)
            a_qoff(qoff)
            a_host(store_host)
            a_phy(phy)
            a_body(body)
            size += len(body)
            a_boff(size)
            a_born(born)
            a_stored(store_ts)
            a_rc(reconsume)
            a_props(props)
        self.body_size = size
        self.topic = topic
        return kept, next_offset

    def flush(self) -> pa.RecordBatch | None:
        """The accumulated records as a RecordBatch of :data:`ARROW_SCHEMA` (None if empty); resets.

        Raises:
            ProtocolError: properties that are not UTF-8, or more than 2 GiB of bodies.
        """
        n = len(self.queue_offsets)
        if n == 0:
            return None
        if self.body_size >= 2**31:
            raise ProtocolError("more than 2 GiB of bodies in one batch; flush more often")
        body_arr = pa.Array.from_buffers(
            pa.binary(),
            n,
            [None, pa.py_buffer(self.body_offsets), pa.py_buffer(b"".join(self.body_chunks))],
        )
        try:
            props_arr = parse_properties(self.props)
        except pa.ArrowInvalid as exc:
            raise ProtocolError(f"message properties are not UTF-8: {exc}") from None
        uniq = pc.map_lookup(props_arr, pa.scalar("UNIQ_KEY"), "first")
        if uniq.null_count:
            pack = _I64.pack
            offset_ids = pa.array(
                [(h + pack(o)).hex().upper() for h, o in zip(self.store_hosts, self.phys, strict=True)],
                pa.string(),
            )
            msg_ids = pc.coalesce(uniq, offset_ids)
        else:
            msg_ids = uniq
        tags = pc.map_lookup(props_arr, pa.scalar("TAGS"), "first")
        columns: list[Any] = [
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.broker_name] * n, pa.string()),
            pa.array(self.queue_ids, pa.int32()),
            pa.array(self.queue_offsets, pa.int64()),
            msg_ids,
            pc.map_lookup(props_arr, pa.scalar("KEYS"), "first"),
            tags,
            body_arr,
            pc.multiply(pa.array(self.born, pa.int64()), _MS_TO_US).cast(_TS),
            pc.multiply(pa.array(self.stored, pa.int64()), _MS_TO_US).cast(_TS),
            pa.array(self.reconsume, pa.int32()),
            props_arr,
        ]
        self._reset()
        batch = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
        if self.tag_filter is not None:
            keep = pc.fill_null(pc.is_in(tags, pa.array(sorted(self.tag_filter), pa.string())), False)
            batch = batch.filter(keep)
        return batch


def tag_predicate(expression: str | None) -> frozenset[str] | None:
    """The tags an exact client-side check keeps for a ``subExpression`` (``*`` / empty = None = all).

    ``"a || b"`` keeps messages whose tag is ``a`` or ``b`` (RocketMQ's TAG expression).
    """
    if expression is None or expression.strip() in ("", "*"):
        return None
    return frozenset(t.strip() for t in expression.split("||") if t.strip())


def decode_to_batches(
    bodies: Iterable[bytes], broker_name: str, end_offset: int = 2**63 - 1
) -> list[pa.RecordBatch]:
    """Convenience for tests and tools: decode whole pull bodies into RecordBatches (one per body)."""
    out: list[pa.RecordBatch] = []
    builder = RecordBatchBuilder(broker_name)
    for body in bodies:
        builder.add_body(body, end_offset)
        batch = builder.flush()
        if batch is not None:
            out.append(batch)
    return out
