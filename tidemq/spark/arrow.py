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
from collections.abc import Callable, Iterable
from typing import Any, Final

import pyarrow as pa

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
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_TAIL = struct.Struct(">iqi")  # reconsumeTimes, preparedTransactionOffset, bodyLength
_BORN_V6 = MessageSysFlag.BORNHOST_V6_FLAG
_STORE_V6 = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_COMPRESSED = MessageSysFlag.COMPRESSED_FLAG


class RecordBatchBuilder:
    """Accumulates decoded records of one message queue and emits Arrow RecordBatches.

    Args:
        broker_name: value of the ``brokerName`` column.
        tag_filter: ``None`` keeps every record; otherwise a predicate on the ``TAGS`` value
            (``None`` when the message has no tag), e.g. from :func:`tag_predicate`.

    Use :meth:`add_body` with each PULL_MESSAGE body, then :meth:`flush` for a RecordBatch.
    """

    def __init__(self, broker_name: str, tag_filter: Callable[[str | None], bool] | None = None) -> None:
        self.broker_name = broker_name
        self.tag_filter = tag_filter
        self._reset()

    def _reset(self) -> None:
        self.topics: list[str] = []
        self.queue_ids: list[int] = []
        self.queue_offsets: list[int] = []
        self.msg_ids: list[str] = []
        self.keys: list[str | None] = []
        self.tags: list[str | None] = []
        self.body_offsets = array("i", [0])
        self.body_chunks: list[bytes | memoryview] = []
        self.body_size = 0
        self.born: list[int] = []
        self.stored: list[int] = []
        self.reconsume: list[int] = []
        self.prop_offsets = array("i", [0])
        self.prop_keys: list[str] = []
        self.prop_values: list[str] = []

    def __len__(self) -> int:
        return len(self.queue_offsets)

    def add_body(self, buf: bytes | memoryview, end_offset: int) -> tuple[int, int]:
        """Decode the records laid back to back in ``buf``, keeping those below ``end_offset``.

        Returns:
            ``(records kept, last queue offset seen + 1)``, the latter -1 when ``buf`` is empty.

        Raises:
            ProtocolError: a truncated or malformed record.
        """
        view = memoryview(buf)
        pos, n = 0, len(view)
        kept = 0
        next_offset = -1
        head_unpack = _HEAD.unpack_from
        tail_unpack = _TAIL.unpack_from
        while pos < n:
            try:
                total, magic, _crc, qid, _flag, qoff, phy, sys_flag, born = head_unpack(view, pos)
                if total <= 0 or pos + total > n:
                    raise ProtocolError(f"record at {pos}: TOTALSIZE {total} exceeds the {n}-byte body")
                p = pos + 48
                born_host_len = 20 if sys_flag & _BORN_V6 else 8
                p += born_host_len
                store_ts = _I64.unpack_from(view, p)[0]
                p += 8
                store_host_len = 20 if sys_flag & _STORE_V6 else 8
                store_host = view[p : p + store_host_len]
                p += store_host_len
                reconsume, _prepared, body_len = tail_unpack(view, p)
                p += 16
                body = view[p : p + body_len]
                p += body_len
                if magic == MESSAGE_MAGIC_CODE_V2:
                    topic_len = _U16.unpack_from(view, p)[0]
                    p += 2
                else:
                    topic_len = view[p]
                    p += 1
                topic = str(view[p : p + topic_len], "utf-8")
                p += topic_len
                props_len = _U16.unpack_from(view, p)[0]
                p += 2
                props_text = str(view[p : p + props_len], "utf-8") if props_len else ""
            except (struct.error, IndexError, UnicodeDecodeError) as exc:
                raise ProtocolError(f"malformed message record at byte {pos}: {exc}") from None
            pos += total
            next_offset = qoff + 1
            if qoff >= end_offset:
                continue
            props: dict[str, str] = {}
            if props_text:
                for item in props_text.split("\x02"):
                    k, sep, v = item.partition("\x01")
                    if sep:
                        props[k] = v
            tag = props.get("TAGS")
            if self.tag_filter is not None and not self.tag_filter(tag):
                continue
            if sys_flag & _COMPRESSED:
                try:
                    body = memoryview(zlib.decompress(body))
                except zlib.error as exc:
                    raise ProtocolError(
                        f"record at queue offset {qoff}: bad compressed body: {exc}"
                    ) from None
            kept += 1
            self.topics.append(topic)
            self.queue_ids.append(qid)
            self.queue_offsets.append(qoff)
            uniq = props.get("UNIQ_KEY")
            self.msg_ids.append(uniq if uniq else (bytes(store_host) + _I64.pack(phy)).hex().upper())
            self.keys.append(props.get("KEYS"))
            self.tags.append(tag)
            self.body_chunks.append(body)
            self.body_size += len(body)
            self.body_offsets.append(self.body_size)
            self.born.append(born * 1000)
            self.stored.append(store_ts * 1000)
            self.reconsume.append(reconsume)
            self.prop_keys.extend(props.keys())
            self.prop_values.extend(props.values())
            self.prop_offsets.append(len(self.prop_keys))
        return kept, next_offset

    def flush(self) -> pa.RecordBatch | None:
        """The accumulated records as a RecordBatch of :data:`ARROW_SCHEMA` (None if empty); resets."""
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
        props_arr = pa.MapArray.from_arrays(
            pa.array(self.prop_offsets, pa.int32()),
            pa.array(self.prop_keys, pa.string()),
            pa.array(self.prop_values, pa.string()),
            type=PROPERTIES_TYPE,
        )
        columns: list[Any] = [
            pa.array(self.topics, pa.string()),
            pa.array([self.broker_name] * n, pa.string()),
            pa.array(self.queue_ids, pa.int32()),
            pa.array(self.queue_offsets, pa.int64()),
            pa.array(self.msg_ids, pa.string()),
            pa.array(self.keys, pa.string()),
            pa.array(self.tags, pa.string()),
            body_arr,
            pa.array(self.born, pa.int64()).cast(_TS),
            pa.array(self.stored, pa.int64()).cast(_TS),
            pa.array(self.reconsume, pa.int32()),
            props_arr,
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def tag_predicate(expression: str | None) -> Callable[[str | None], bool] | None:
    """The exact client-side tag check for a ``subExpression`` (``*`` / empty = None = all).

    ``"a || b"`` keeps messages whose tag is ``a`` or ``b`` (RocketMQ's TAG expression).
    """
    if expression is None or expression.strip() in ("", "*"):
        return None
    wanted = frozenset(t.strip() for t in expression.split("||") if t.strip())
    return lambda tag: tag is not None and tag in wanted


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
