"""The source's schema and the decoder from stored-message records straight to Arrow RecordBatches.

Pure code over ``pyarrow`` and ``numpy`` (no Spark session, no sockets). The record layout is
protocol.md §5, defined once in :mod:`tidemq.protocol.record_layout`. The decoder is column-wise:
one Python step per record finds where it starts (TOTALSIZE), then every field of every record is
gathered with numpy, and bodies and properties are cut out of the pull body by one Arrow ``take``
over a zero-copy binary array of record pieces. No Python object is made per record. A pull body
of records laid out alike (one size, the same property keys and value lengths: one producer's
messages, the usual case) takes a shorter path: every field is at one position in every record, so
bodies and property values are copied out as fixed-width columns and the properties are split by the
first record's structure (:class:`FixedProperties`), with the same result.

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

import zlib
from array import array
from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tidemq.errors import ProtocolError
from tidemq.protocol import record_layout as L

# pyarrow.compute is imported where it is used: its import builds a wrapper for every compute
# function (about 0.15 s), which every Python process Spark starts for the driver side of a query
# would pay (the streaming source runner is a new process per query) without decoding anything.

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
ARROW_SCHEMA_NO_PROPERTIES: Final = ARROW_SCHEMA.remove(ARROW_SCHEMA.get_field_index("properties"))
"""The schema with ``includeHeaders=false``: no ``properties`` column."""
SOURCE_SCHEMA_DDL_NO_PROPERTIES: Final = SOURCE_SCHEMA_DDL.rsplit(", properties", 1)[0]
"""The DDL with ``includeHeaders=false``."""

_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_TOTAL_SIZE = L.SIZE_MAGIC.unpack_from
_WIDTH = {w: np.arange(w, dtype=np.int64) for w in (1, 2, 4, 8)}
IntArray = npt.NDArray[np.int64]
ByteArray = npt.NDArray[np.uint8]


_MAGIC_BYTES = L.SIZE_MAGIC.pack(L.MESSAGE_MAGIC_CODE, L.MESSAGE_MAGIC_CODE_V2)  # both codes, big-endian
_MAGIC_HEAD = np.frombuffer(_MAGIC_BYTES[:3], np.uint8)  # both codes share their first 3 bytes
_MAGIC_LAST = np.frombuffer(_MAGIC_BYTES[3:] + _MAGIC_BYTES[7:], np.uint8)


def _starts_by_magic(buf: bytes | memoryview) -> IntArray | None:
    """Record starts found by searching MAGICCODE with numpy and checking that the TOTALSIZEs chain
    them from byte 0 to the end; None when they do not (a body containing the magic bytes)."""
    b = np.frombuffer(buf, np.uint8)
    n = len(b)
    at = L.POS_MAGIC
    starts: IntArray = np.flatnonzero(b[at : n - 3] == _MAGIC_HEAD[0]).astype(np.int64)
    starts = starts[
        (b[starts + at + 1] == _MAGIC_HEAD[1])
        & (b[starts + at + 2] == _MAGIC_HEAD[2])
        & ((b[starts + at + 3] == _MAGIC_LAST[0]) | (b[starts + at + 3] == _MAGIC_LAST[1]))
    ]
    if len(starts) == 0 or starts[0] != 0:
        return None
    total = np.frombuffer(buf, np.uint8)[starts[:, None] + _WIDTH[4]].view(">i4").ravel().astype(np.int64)
    ends = starts + total
    if ends[-1] != n or (total <= 8).any() or (ends[:-1] != starts[1:]).any():
        return None
    return starts


def record_starts(buf: bytes | memoryview) -> IntArray:
    """Start position of every record laid back to back in ``buf``.

    The MAGICCODE search (:func:`_starts_by_magic`) needs no per-record Python; when the bodies
    happen to contain the magic bytes it falls back to walking the TOTALSIZEs one by one.

    Raises:
        ProtocolError: a TOTALSIZE that is not positive or runs past the end of ``buf``.
    """
    if len(buf) >= 8:
        quick = _starts_by_magic(buf)
        if quick is not None:
            return quick
    starts = array("q")
    add = starts.append
    pos, n = 0, len(buf)
    try:
        while pos < n:
            add(pos)
            total = _TOTAL_SIZE(buf, pos)[0]
            if total <= 8:
                raise ProtocolError(f"record at byte {pos}: TOTALSIZE {total} is too small")
            pos += total
    except Exception as exc:  # struct.error: fewer than 8 bytes left
        if isinstance(exc, ProtocolError):
            raise
        raise ProtocolError(f"truncated message record at byte {pos} of {n}") from None
    if pos != n:
        raise ProtocolError(f"the last record (at byte {starts[-1]}) runs past the {n}-byte body")
    return np.frombuffer(starts, np.int64) if len(starts) else np.zeros(0, np.int64)


def _gather(buf: ByteArray, pos: IntArray, width: int) -> ByteArray:
    """``(n, width)`` bytes: ``buf[pos[i] : pos[i] + width]`` for every ``i``."""
    out: ByteArray = buf[pos[:, None] + _WIDTH[width]]
    return out


def _int(buf: ByteArray, pos: IntArray, dtype: str) -> IntArray:
    """Big-endian integers of ``dtype`` (``>i4``, ``>i8``, ``>u2``) at ``pos``, as int64."""
    width = np.dtype(dtype).itemsize
    return _gather(buf, pos, width).view(dtype).ravel().astype(np.int64)


def uniform_stride(buf: bytes | memoryview) -> int | None:
    """The record size when ``buf`` holds records of one size back to back (the usual pull body of
    same-sized messages), checked by the TOTALSIZE and MAGICCODE of every record; else None."""
    n = len(buf)
    if n < 8:
        return None
    size = _TOTAL_SIZE(buf, 0)[0]
    if size <= 8 or n % size:
        return None
    count = n // size
    totals = np.ndarray((count,), ">i4", buffer=buf, offset=L.POS_TOTAL_SIZE, strides=(size,))
    magics = np.ndarray((count,), ">i4", buffer=buf, offset=L.POS_MAGIC, strides=(size,))
    if not (totals == size).all():
        return None
    if not ((magics == L.MESSAGE_MAGIC_CODE) | (magics == L.MESSAGE_MAGIC_CODE_V2)).all():
        return None
    return int(size)


Rel = int | IntArray
"""A field's position relative to the start of each record: one number when it is the same in
every record, else one per record."""


def _same(rel: IntArray) -> Rel:
    """``rel`` as one number when all its values are equal (then fields are read by strided views)."""
    if len(rel) and (rel == rel[0]).all():
        return int(rel[0])
    return rel


class _Records:
    """Big-endian integer fields of records laid back to back in a pull body.

    With records of one size (``stride``) a field at the same position in every record is a strided
    numpy view over the body (no index arrays, no gather); otherwise it is gathered by fancy indexing.
    """

    def __init__(self, buf: ByteArray, raw: bytes | memoryview, starts: IntArray, stride: int | None) -> None:
        self.buf = buf
        self.raw = raw
        self.starts = starts
        self.stride = stride

    def ints(self, rel: Rel, dtype: str) -> IntArray:
        """The field of ``dtype`` (``>i4``, ``>i8``, ``>u2``, ``u1``) at ``start + rel`` of every record,
        as int64."""
        width = np.dtype(dtype).itemsize
        stride = self.stride
        if isinstance(rel, int) and stride is not None and rel >= 0 and rel + width <= stride:
            view = np.ndarray((len(self.starts),), dtype, buffer=self.raw, offset=rel, strides=(stride,))
            return view.astype(np.int64)
        return _int(self.buf, self.starts + rel, dtype)


def _hex_ids(raw: ByteArray) -> pa.Array:
    """Upper-case hex strings of the rows of ``raw`` (``(n, w)`` bytes), as an Arrow string array."""
    n, w = raw.shape
    chars = np.empty((n, 2 * w), np.uint8)
    chars[:, 0::2] = _HEX[raw >> 4]
    chars[:, 1::2] = _HEX[raw & 0x0F]
    offsets = np.arange(0, (n + 1) * 2 * w, 2 * w, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes())])


class Properties:
    """Property strings (``k\x01v\x02k\x01v``) of a batch of records, split column-wise.

    One numpy pass finds every ``\x02`` and ``\x01`` of all the strings at once; a segment between
    separators splits at its first ``\x01`` into key and value, and keys and values are cut out of
    the strings' bytes by one Arrow ``take`` each. Segments without a ``\x01`` (empty properties, a
    C++ client's trailing ``\x02``) are dropped. :meth:`lookup` finds one key per record with numpy,
    several times faster than ``map_lookup`` on the map array.

    Args:
        raw: binary or string array, one property string per record (nulls count as empty).

    Raises:
        pyarrow.ArrowInvalid: a property string that is not UTF-8.
    """

    def __init__(self, raw: pa.Array) -> None:
        import pyarrow.compute as pc

        text = raw.cast(pa.string())  # validates UTF-8 (a separator never splits a character)
        if text.null_count:
            text = pc.fill_null(text, "")
        self.rows = rows = len(text)
        _, offsets_buf, data_buf = text.buffers()
        bounds = np.frombuffer(offsets_buf, np.int32, count=rows + 1, offset=4 * text.offset).astype(np.int64)
        ends = bounds[1:]
        data: ByteArray = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        lo, hi = int(bounds[0]), int(bounds[-1])
        region = data[lo:hi]
        seps = np.flatnonzero(region == 2) + lo
        ones = np.flatnonzero(region == 1) + lo
        # segments: from a string's start or after a \x02, to a \x02 or the string's end (two sorted
        # runs each: a stable sort merges them in one pass)
        seg_start = np.concatenate([bounds[:-1], seps + 1])
        seg_start.sort(kind="stable")
        seg_end = np.concatenate([ends, seps])
        seg_end.sort(kind="stable")
        nonempty = seg_start < seg_end
        start_ne, end_ne = seg_start[nonempty], seg_end[nonempty]
        if len(ones) == len(start_ne) and (ones >= start_ne).all() and (ones < end_ne).all():
            # the usual case: one \x01 in every non-empty segment (pairs of a key and a value
            # without \x01), the i-th one in the i-th segment
            seg_start, seg_end, at = start_ne, end_ne, ones
        else:
            first_one = np.searchsorted(ones, seg_start)
            at = (
                ones[np.minimum(first_one, len(ones) - 1)]
                if len(ones)
                else np.zeros(len(seg_start), np.int64)
            )
            pair = (first_one < len(ones)) & (at < seg_end)
            seg_start, seg_end, at = seg_start[pair], seg_end[pair], at[pair]
        parents = np.searchsorted(bounds, seg_start, side="right") - 1
        m = len(seg_start)
        # pieces [key | \x01 | value | up to the next key] of one zero-copy array over the bytes
        cuts = np.empty(4 * m + 1, np.int64)
        cuts[0:-1:4], cuts[1::4], cuts[2::4], cuts[3::4] = seg_start, at, at + 1, seg_end
        cuts[-1] = max(hi, int(seg_end[-1])) if m else hi
        pieces = pa.Array.from_buffers(
            pa.string(), 4 * m, [None, pa.py_buffer(cuts.astype(np.int32)), data_buf]
        )
        self.keys = pieces.take(_numeric(np.arange(0, 4 * m, 4)))
        self.values = pieces.take(_numeric(np.arange(2, 4 * m, 4)))
        counts = np.bincount(parents, minlength=rows)
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        self.parents = parents

    def to_map(self) -> pa.MapArray:
        """The properties as a ``map<string,string>`` array."""
        return pa.MapArray.from_arrays(_numeric(self.offsets), self.keys, self.values, type=PROPERTIES_TYPE)

    def lookup(self, key: str) -> pa.Array:
        """The first value of ``key`` per record (null where absent), a string array."""
        import pyarrow.compute as pc

        hits = np.flatnonzero(pc.equal(self.keys, key).to_numpy(zero_copy_only=False))
        index = np.zeros(self.rows, np.int64)
        found = np.zeros(self.rows, bool)
        if len(hits):
            rows = self.parents[hits]
            first = np.concatenate([[True], rows[1:] != rows[:-1]])
            index[rows[first]] = hits[first]
            found[rows[first]] = True
        return self.values.take(_numeric(index, valid=found))


class FixedProperties:
    """Property strings of one length laid out alike in every record (the same keys, in the same
    order, with values of the same lengths: the usual pull body of one producer's messages), split
    by the structure of the first one.

    The same interface and results as :class:`Properties`; :meth:`of` gives None when the strings
    are not laid out alike, or a value holds a byte outside ``0x03..0x7F`` (a separator, or
    non-ASCII text that would need UTF-8 validation), and :class:`Properties` then splits them.
    """

    def __init__(self, rows: int, keys: list[str], data: ByteArray, values: list[ByteArray]) -> None:
        self.rows = rows
        self._keys = keys
        self._data = data  # every row's values back to back, C-contiguous
        self._values = values  # views of data: each key's values

    @classmethod
    def of(cls, raw: ByteArray) -> FixedProperties | None:
        """The split of ``raw``, or None when :class:`Properties` must do it.

        Args:
            raw: ``(rows, width)`` bytes, one property string per row (a strided view is fine).
        """
        rows, width = raw.shape
        first = raw[0].tobytes()
        try:
            first.decode()
        except UnicodeDecodeError:
            return None
        keys: list[str] = []
        spans: list[tuple[int, int]] = []  # each value's [start, end) in a row
        fixed: list[tuple[int, int]] = []  # what is not a value: keys, separators, dropped pieces
        pos = 0
        for piece in first.split(b"\x02"):
            end = pos + len(piece)
            one = piece.find(b"\x01")
            if one >= 0:
                keys.append(piece[:one].decode())
                spans.append((pos + one + 1, end))
                fixed.append((pos, pos + one + 1))
            else:
                fixed.append((pos, end))
            if end < width:
                fixed.append((end, end + 1))  # the \x02
            pos = end + 1
        # the fixed bytes compared 8 at a time: rows padded to whole 64-bit words, values masked out
        words = -(-width // 8)
        padded = np.zeros((rows, 8 * words), np.uint8)
        padded[:, :width] = raw
        mask = np.zeros(8 * words, np.uint8)
        for lo, hi in fixed:
            mask[lo:hi] = 0xFF
        as_words = padded.view(np.uint64)
        if ((as_words ^ as_words[0]) & mask.view(np.uint64)).any():
            return None
        data = np.empty((rows, sum(hi - lo for lo, hi in spans)), np.uint8)
        values, at = [], 0
        for lo, hi in spans:
            data[:, at : at + hi - lo] = padded[:, lo:hi]
            values.append(data[:, at : at + hi - lo])
            at += hi - lo
        if data.size and ((data - np.uint8(3)) >= 125).any():  # a byte outside 0x03..0x7F
            return None
        return cls(rows, keys, data, values)

    def to_map(self) -> pa.MapArray:
        """The properties as a ``map<string,string>`` array."""
        n, m = self.rows, len(self._keys)
        offsets = np.arange(0, (n + 1) * m, m, dtype=np.int32) if m else np.zeros(n + 1, np.int32)
        key_bytes = [k.encode() for k in self._keys]
        key_widths = np.array([len(k) for k in key_bytes], np.int64)
        value_widths = np.array([v.shape[1] for v in self._values], np.int64)

        def strings(data: bytes | ByteArray, widths: IntArray) -> pa.Array:
            lengths = np.tile(widths, n)
            ends = np.empty(n * m + 1, np.int64)
            ends[0] = 0
            np.cumsum(lengths, out=ends[1:])
            return pa.Array.from_buffers(
                pa.string(), n * m, [None, pa.py_buffer(ends.astype(np.int32)), pa.py_buffer(data)]
            )

        keys = strings(b"".join(key_bytes) * n, key_widths)
        values = strings(self._data.reshape(-1), value_widths)
        return pa.MapArray.from_arrays(_numeric(offsets), keys, values, type=PROPERTIES_TYPE)

    def lookup(self, key: str) -> pa.Array:
        """The first value of ``key`` per record (null where absent), a string array."""
        if key not in self._keys:
            return pa.nulls(self.rows, pa.string())
        return _fixed_width(pa.string(), self._values[self._keys.index(key)])


_ARROW_INT = {np.dtype(np.int32): pa.int32(), np.dtype(np.int64): pa.int64()}


def _numeric(values: npt.NDArray[Any], valid: npt.NDArray[np.bool_] | None = None) -> pa.Array:
    """An int32 / int64 Arrow array of ``values`` (null where ``valid`` is False), built from the
    buffers: ``pa.array`` on a numpy array would import pandas (see :func:`_repeat`)."""
    values = np.ascontiguousarray(values)
    bitmap = None
    if valid is not None and not valid.all():
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(_ARROW_INT[values.dtype], len(values), [bitmap, pa.py_buffer(values)])


def _repeat(text: str, n: int) -> pa.Array:
    """A string array of ``text`` ``n`` times. (``pa.repeat(pa.scalar(...))`` would do, but making a
    scalar from a Python object imports pandas when it is installed: 0.2 s and 34,000 objects that
    PySpark's worker then walks in the ``gc.collect()`` it runs after every task.)"""
    data = text.encode()
    offsets = (
        np.arange(0, (n + 1) * len(data), len(data), dtype=np.int32) if data else np.zeros(n + 1, np.int32)
    )
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def _fixed_width(kind: pa.DataType, rows: ByteArray) -> pa.Array:
    """A string or binary array of the rows of ``rows`` (``(n, width)`` bytes), one value each."""
    n, width = rows.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32) if width else np.zeros(n + 1, np.int32)
    data = np.ascontiguousarray(rows).reshape(-1)
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def parse_properties(raw: pa.Array | list[bytes]) -> pa.MapArray:
    """RocketMQ property strings to a ``map<string,string>`` array (see :class:`Properties`)."""
    return Properties(raw if isinstance(raw, pa.Array) else pa.array(raw, pa.binary())).to_map()


class RecordBatchBuilder:
    """Decodes PULL_MESSAGE bodies of one message queue into Arrow RecordBatches, column-wise.

    Args:
        broker_name: value of the ``brokerName`` column.
        tag_filter: ``None`` keeps every record; otherwise the set of tags to keep (a record without
            a tag is dropped), e.g. from :func:`tag_predicate`.
        include_properties: False drops the ``properties`` column (schema
            :data:`ARROW_SCHEMA_NO_PROPERTIES`, option ``includeHeaders=false``).
        columns: only these columns of :data:`ARROW_SCHEMA`, in this order (a schema the user gave
            with ``spark.read.schema(...)``); None = every column. Columns left out are not decoded
            at all (no properties parsing when none of msgId, keys, tags, properties is asked for).

    Raises:
        ValueError: ``columns`` names a column the source does not have.

    All records of a builder come from one queue, hence one topic (the first record's). Use
    :meth:`add_body` with each PULL_MESSAGE body, then :meth:`flush` for the RecordBatch.
    """

    def __init__(
        self,
        broker_name: str,
        tag_filter: frozenset[str] | None = None,
        *,
        include_properties: bool = True,
        columns: Sequence[str] | None = None,
    ) -> None:
        self.broker_name = broker_name
        self.tag_filter = tag_filter
        self.include_properties = include_properties
        base = ARROW_SCHEMA if include_properties else ARROW_SCHEMA_NO_PROPERTIES
        if columns is None:
            self.schema = base
        else:
            unknown = [c for c in columns if c not in base.names]
            if unknown:
                raise ValueError(f"the source has no column(s) {unknown}; its columns are {base.names}")
            self.schema = pa.schema([base.field(c) for c in columns])
        self._names = frozenset(self.schema.names)
        self._pending: list[pa.RecordBatch] = []
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add_body(self, buf: bytes | memoryview, end_offset: int) -> tuple[int, int]:
        """Decode the records laid back to back in ``buf``, keeping those below ``end_offset``.

        Returns:
            ``(records kept before tag filtering, last queue offset seen + 1)``, the latter -1 when
            ``buf`` is empty.

        Raises:
            ProtocolError: a truncated or malformed record, a bad compressed body, properties that
                are not UTF-8.
        """
        stride = uniform_stride(buf)
        fixed = self._decode_fixed(buf, stride, end_offset) if stride else None
        if fixed is not None:
            batch, kept, next_offset = fixed
        else:
            starts = np.arange(0, len(buf), stride, dtype=np.int64) if stride else record_starts(buf)
            if len(starts) == 0:
                return 0, -1
            try:
                records = _Records(np.frombuffer(buf, np.uint8), buf, starts, stride)
                batch, kept, next_offset = self._decode(records, end_offset)
            except (IndexError, ValueError, pa.ArrowInvalid) as exc:
                raise ProtocolError(f"malformed message records: {exc}") from None
        if batch is not None and batch.num_rows:
            self._pending.append(batch)
            self._rows += batch.num_rows
        return kept, next_offset

    def _decode_fixed(
        self, raw: bytes | memoryview, stride: int, end_offset: int
    ) -> tuple[pa.RecordBatch | None, int, int] | None:
        """:meth:`_decode` for records of one size laid out alike (the usual pull body): the same
        MAGICCODE, SYSFLAG (uncompressed), body, topic and properties lengths in every record, the
        records kept a prefix. Every field is then at one position in every record: integers are
        strided views, bodies and property values are copied out as fixed-width columns, and
        properties of one structure are split by the first one's (:class:`FixedProperties`).
        Gives exactly what :meth:`_decode` gives; None (decode with :meth:`_decode`) when the
        records are not alike or anything is out of the ordinary, errors included.
        """
        if stride < L.IPV4_FIXED_SIZE:
            return None
        n_all = len(raw) // stride

        def field(pos: int, dtype: str | np.dtype[Any]) -> IntArray:
            view: IntArray = np.ndarray((n_all,), dtype, buffer=raw, offset=pos, strides=(stride,))
            return view

        def alike(pos: int, dtype: str) -> int | None:
            """The field's value when it is the same in every record (compared in native byte order)."""
            same = field(pos, np.dtype(dtype).newbyteorder("="))
            if not (same == same[0]).all():
                return None
            return int(field(pos, dtype)[0])

        magic = alike(L.POS_MAGIC, ">i4")
        sys_flag = alike(L.POS_SYS_FLAG, ">i4")
        if magic is None or sys_flag is None or sys_flag & L.COMPRESSED_FLAG:
            return None
        after_born = L.POS_BORN_HOST + L.born_host_size(sys_flag)
        store_host = after_born + L.AFTER_BORN_STORE_HOST
        after_store = store_host + L.store_host_size(sys_flag)
        if after_store + L.AFTER_STORE_BODY > stride:
            return None
        body_len = alike(after_store + L.AFTER_STORE_BODY_LENGTH, ">i4")
        if body_len is None or body_len < 0:
            return None
        body_pos = after_store + L.AFTER_STORE_BODY
        topic_at = body_pos + body_len
        width = L.topic_length_size(magic)
        if topic_at + width > stride:
            return None
        topic_len = alike(topic_at, ">u2" if width == 2 else "u1")
        if topic_len is None or topic_at + width + topic_len + 2 > stride:
            return None
        props_pos = topic_at + width + topic_len + 2
        props_len = alike(props_pos - 2, ">u2")
        if props_len is None or props_pos + props_len != stride:
            return None
        queue_offset = field(L.POS_QUEUE_OFFSET, ">i8").astype(np.int64)
        next_offset = int(queue_offset[-1]) + 1
        n = int(np.count_nonzero(queue_offset < end_offset))
        if n == 0:
            return None, 0, next_offset
        if n < n_all and not (queue_offset[:n] < end_offset).all():
            return None  # the records kept are not the first ones
        records: ByteArray = np.ndarray((n, stride), np.uint8, buffer=raw, strides=(stride, 1))
        names = self._names
        props: FixedProperties | None = None
        if self.tag_filter is not None or not names.isdisjoint(("msgId", "keys", "tags", "properties")):
            props = FixedProperties.of(records[:, props_pos:])
            if props is None:
                return None
        tags = (
            props.lookup("TAGS")
            if props is not None and (self.tag_filter is not None or "tags" in names)
            else None
        )

        def ints(pos: int, dtype: str, out: Any = np.int64) -> pa.Array:
            return _numeric(field(pos, dtype)[:n].astype(out))

        def timestamp(pos: int) -> pa.Array:
            micros = field(pos, ">i8")[:n].astype(np.int64)
            micros *= 1000
            return pa.Array.from_buffers(_TS, n, [None, pa.py_buffer(micros)])

        def msg_id() -> pa.Array:
            assert props is not None
            ids = props.lookup("UNIQ_KEY")
            if not ids.null_count:
                return ids
            host = records[:, store_host:after_store]
            phy = records[:, L.POS_PHYSICAL_OFFSET : L.POS_PHYSICAL_OFFSET + 8]
            return _hex_ids(np.hstack([host, phy]))

        try:
            topic = records[0, topic_at + width : topic_at + width + topic_len].tobytes().decode()
        except UnicodeDecodeError:
            return None
        makers: dict[str, Any] = {
            "topic": lambda: _repeat(topic, n),
            "brokerName": lambda: _repeat(self.broker_name, n),
            "queueId": lambda: ints(L.POS_QUEUE_ID, ">i4", np.int32),
            "queueOffset": lambda: _numeric(queue_offset[:n]),
            "msgId": msg_id,
            "keys": lambda: props.lookup("KEYS") if props is not None else None,
            "tags": lambda: tags,
            "body": lambda: _fixed_width(pa.binary(), records[:, body_pos:topic_at]),
            "bornTimestamp": lambda: timestamp(L.POS_BORN_TIMESTAMP),
            "storeTimestamp": lambda: timestamp(after_born + L.AFTER_BORN_STORE_TIMESTAMP),
            "reconsumeTimes": lambda: ints(after_store + L.AFTER_STORE_RECONSUME_TIMES, ">i4", np.int32),
            "properties": lambda: props.to_map() if props is not None else None,
        }
        return self._assemble(makers, tags), n, next_offset

    def _assemble(self, makers: dict[str, Any], tags: pa.Array | None) -> pa.RecordBatch:
        """The batch of this decoder's schema, each column made by its maker (only the columns the
        schema names are decoded), without the records whose tag the tag filter rejects."""
        batch = pa.RecordBatch.from_arrays([makers[name]() for name in self.schema.names], schema=self.schema)
        if self.tag_filter is not None:
            import pyarrow.compute as pc

            assert tags is not None
            wanted = pc.fill_null(pc.is_in(tags, pa.array(sorted(self.tag_filter), pa.string())), False)
            batch = batch.filter(wanted)
        return batch

    def _decode(self, rec: _Records, end_offset: int) -> tuple[pa.RecordBatch | None, int, int]:
        import pyarrow.compute as pc

        buf, raw, starts = rec.buf, rec.raw, rec.starts
        size = len(buf)
        names = self._names
        total = rec.ints(L.POS_TOTAL_SIZE, ">i4")
        magic = rec.ints(L.POS_MAGIC, ">i4")
        v2 = magic == L.MESSAGE_MAGIC_CODE_V2
        known = v2 | (magic == L.MESSAGE_MAGIC_CODE)
        if not known.all():
            raise ProtocolError(f"record at byte {int(starts[~known][0])}: unknown MAGICCODE")
        queue_offset = rec.ints(L.POS_QUEUE_OFFSET, ">i8")
        next_offset = int(queue_offset[-1]) + 1
        keep = np.flatnonzero(queue_offset < end_offset)
        if len(keep) == 0:
            return None, 0, next_offset
        sys_flag = rec.ints(L.POS_SYS_FLAG, ">i4")
        store_v6 = (sys_flag & L.STOREHOSTADDRESS_V6_FLAG) != 0
        born_rel = _same(
            L.POS_BORN_HOST + np.where(sys_flag & L.BORNHOST_V6_FLAG, L.HOST_V6_SIZE, L.HOST_V4_SIZE)
        )
        store_host_rel = born_rel + L.AFTER_BORN_STORE_HOST
        after_store_rel = _same(store_host_rel + np.where(store_v6, L.HOST_V6_SIZE, L.HOST_V4_SIZE))
        body_len = rec.ints(after_store_rel + L.AFTER_STORE_BODY_LENGTH, ">i4")
        body_rel = after_store_rel + L.AFTER_STORE_BODY
        body_end_rel = _same(body_rel + body_len)
        if (body_len < 0).any() or (body_end_rel + 3 > total).any():
            raise ProtocolError("a record's BODY length runs past its TOTALSIZE")
        if v2.all():
            topic_len = rec.ints(body_end_rel, ">u2")
        elif not v2.any():
            topic_len = rec.ints(body_end_rel, "u1")
        else:
            topic_len = np.where(v2, rec.ints(body_end_rel, ">u2"), rec.ints(body_end_rel, "u1"))
        props_rel = _same(body_end_rel + np.where(v2, 2, 1) + topic_len + 2)
        if (props_rel > total).any():
            raise ProtocolError("a record's TOPIC runs past its TOTALSIZE")
        props_len = rec.ints(props_rel - 2, ">u2")
        if (props_rel + props_len != total).any():
            raise ProtocolError("a record's fields do not add up to its TOTALSIZE")
        store_host = starts + store_host_rel
        body_pos = starts + body_rel
        body_end = starts + body_end_rel
        props_pos = starts + props_rel
        # Every record as four pieces [header | body | topic + properties length | properties] of
        # one zero-copy binary array over the pull body; `take` then copies out bodies and properties.
        bounds = np.empty(4 * len(starts) + 1, np.int64)
        bounds[0:-1:4], bounds[1::4], bounds[2::4], bounds[3::4] = starts, body_pos, body_end, props_pos
        bounds[-1] = size
        pieces = pa.Array.from_buffers(
            pa.binary(), 4 * len(starts), [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(raw)]
        )
        n = len(keep)
        need_props = self.tag_filter is not None or not names.isdisjoint(
            ("msgId", "keys", "tags", "properties")
        )
        props = Properties(pieces.take(_numeric(4 * keep + 3))) if need_props else None
        tags = (
            props.lookup("TAGS")
            if props is not None and (self.tag_filter is not None or "tags" in names)
            else None
        )
        starts_kept = starts[keep]

        def topic() -> pa.Array:
            first = int(keep[0])
            field = buf[body_end[first] : props_pos[first] - 2].tobytes()
            return _repeat(field[2 if v2[first] else 1 :].decode(), n)

        def body() -> pa.Array:
            out = pieces.take(_numeric(4 * keep + 1))
            compressed = (sys_flag[keep] & L.COMPRESSED_FLAG) != 0
            if not compressed.any():
                return out
            values = out.to_pylist()
            for i in np.flatnonzero(compressed):
                try:
                    values[i] = zlib.decompress(values[i])
                except zlib.error as exc:
                    raise ProtocolError(f"queue offset {queue_offset[keep[i]]}: bad compressed body: {exc}")
            return pa.array(values, pa.binary())

        def msg_id() -> pa.Array:
            assert props is not None
            ids = props.lookup("UNIQ_KEY")
            if not ids.null_count:
                return ids
            phy = _gather(buf, starts_kept + L.POS_PHYSICAL_OFFSET, 8)
            if store_v6[keep].any():
                offset_ids = pa.array(
                    [
                        (buf[h : h + w].tobytes() + p.tobytes()).hex().upper()
                        for h, w, p in zip(
                            store_host[keep], np.where(store_v6[keep], 20, 8), phy, strict=True
                        )
                    ],
                    pa.string(),
                )
            else:
                offset_ids = _hex_ids(np.hstack([_gather(buf, store_host[keep], 8), phy]))
            return pc.coalesce(ids, offset_ids)

        def timestamp(rel: Rel) -> pa.Array:
            micros = rec.ints(rel, ">i8")[keep] * 1000
            return pa.Array.from_buffers(_TS, len(micros), [None, pa.py_buffer(micros)])

        makers: dict[str, Any] = {
            "topic": topic,
            "brokerName": lambda: _repeat(self.broker_name, n),
            "queueId": lambda: _numeric(rec.ints(L.POS_QUEUE_ID, ">i4")[keep].astype(np.int32)),
            "queueOffset": lambda: _numeric(queue_offset[keep]),
            "msgId": msg_id,
            "keys": lambda: props.lookup("KEYS") if props is not None else None,
            "tags": lambda: tags,
            "body": body,
            "bornTimestamp": lambda: timestamp(L.POS_BORN_TIMESTAMP),
            "storeTimestamp": lambda: timestamp(born_rel + L.AFTER_BORN_STORE_TIMESTAMP),
            "reconsumeTimes": lambda: _numeric(
                rec.ints(after_store_rel + L.AFTER_STORE_RECONSUME_TIMES, ">i4")[keep].astype(np.int32)
            ),
            "properties": lambda: props.to_map() if props is not None else None,
        }
        return self._assemble(makers, tags), n, next_offset

    def flush(self) -> pa.RecordBatch | None:
        """The records decoded since the last flush as one RecordBatch (None if none); resets."""
        pending, self._pending, self._rows = self._pending, [], 0
        if not pending:
            return None
        if len(pending) == 1:
            return pending[0]
        return pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


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
