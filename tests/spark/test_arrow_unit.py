"""The stored-record -> Arrow decoder matches the schema Spark expects and the message codec."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.protocol.message_codec import (
    MessageSysFlag,
    compress_body,
    create_offset_msg_id,
    decode_messages,
    encode_stored_message,
)
from tidemq.spark.arrow import ARROW_SCHEMA, RecordBatchBuilder, tag_predicate


def _record(offset: int, body: bytes, props: dict[str, str] | str, *, compressed: bool = False) -> bytes:
    return encode_stored_message(
        topic="T",
        body=compress_body(body) if compressed else body,
        properties=props,
        queue_id=3,
        queue_offset=offset,
        commit_log_offset=1000 + offset,
        sys_flag=MessageSysFlag.COMPRESSED_FLAG if compressed else 0,
        born_timestamp=1_700_000_000_123,
        born_host="10.0.0.1:5555",
        store_timestamp=1_700_000_000_456,
        store_host="127.0.0.1:10911",
        reconsume_times=2,
    )


def test_decode_columns_and_trim_at_end() -> None:
    buf = b"".join(
        [
            _record(0, b"a", {"TAGS": "x", "KEYS": "k1 k2", "UNIQ_KEY": "U0", "p": "1"}),
            _record(1, b"b" * 5000, {"TAGS": "y"}, compressed=True),
            _record(2, b"c", {}),
        ]
    )
    builder = RecordBatchBuilder("broker-a")
    kept, nxt = builder.add_body(buf, end_offset=2)
    assert (kept, nxt) == (2, 3)  # the record at offset 2 is at/after the end
    batch = builder.flush()
    assert batch is not None and batch.schema == ARROW_SCHEMA
    rows = batch.to_pylist()
    assert rows[0]["topic"] == "T" and rows[0]["brokerName"] == "broker-a" and rows[0]["queueId"] == 3
    assert rows[0]["msgId"] == "U0" and rows[0]["keys"] == "k1 k2" and rows[0]["tags"] == "x"
    assert rows[0]["body"] == b"a" and dict(rows[0]["properties"])["p"] == "1"
    assert rows[0]["bornTimestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
    assert rows[0]["reconsumeTimes"] == 2
    assert rows[1]["body"] == b"b" * 5000
    assert rows[1]["msgId"] == create_offset_msg_id("127.0.0.1:10911", 1001)
    assert rows[1]["keys"] is None
    assert builder.flush() is None


def test_tag_filter() -> None:
    buf = b"".join(_record(i, b"m", {"TAGS": t}) for i, t in enumerate(["a", "b", "c"]))
    builder = RecordBatchBuilder("b", tag_predicate("a || c"))
    builder.add_body(buf, 100)
    batch = builder.flush()
    assert batch is not None and batch.column("tags").to_pylist() == ["a", "c"]
    assert tag_predicate("*") is None and tag_predicate(None) is None


def test_properties_with_empty_segments_and_no_properties() -> None:
    buf = _record(0, b"a", "x\x011\x02") + _record(1, b"b", "")  # C++ trailing separator; none at all
    builder = RecordBatchBuilder("b")
    builder.add_body(buf, 10)
    batch = builder.flush()
    assert batch is not None
    assert [dict(p) for p in batch.column("properties").to_pylist()] == [{"x": "1"}, {}]
    assert batch.column("msgId").to_pylist()[1] == create_offset_msg_id("127.0.0.1:10911", 1001)


def test_ipv6_hosts() -> None:
    rec = encode_stored_message(
        topic="T", body=b"v6", properties={"TAGS": "t"}, queue_offset=7, commit_log_offset=9,
        born_host="[::1]:5", store_host="[2001:db8::1]:10911", store_timestamp=5, born_timestamp=4,
    )  # fmt: skip
    builder = RecordBatchBuilder("b")
    builder.add_body(rec, 10)
    batch = builder.flush()
    assert batch is not None
    row = batch.to_pylist()[0]
    assert row["body"] == b"v6" and row["queueOffset"] == 7 and row["tags"] == "t"
    assert row["msgId"] == create_offset_msg_id("[2001:db8::1]:10911", 9)


def test_projection_decodes_only_the_asked_columns_in_their_order() -> None:
    buf = b"".join(
        [
            _record(0, b"a", {"TAGS": "x", "UNIQ_KEY": "U0"}),
            _record(1, b"b" * 5000, {"TAGS": "y"}, compressed=True),
            _record(2, b"c", {"TAGS": "x"}),
        ]
    )
    full = RecordBatchBuilder("broker-a")
    full.add_body(buf, 10)
    whole = full.flush()
    assert whole is not None
    builder = RecordBatchBuilder("broker-a", columns=["body", "queueId", "msgId"])
    assert builder.add_body(buf, 10) == (3, 3)
    batch = builder.flush()
    assert batch is not None and batch.schema.names == ["body", "queueId", "msgId"]
    assert batch.schema == pa.schema([ARROW_SCHEMA.field(c) for c in ["body", "queueId", "msgId"]])
    assert batch.to_pylist() == whole.select(["body", "queueId", "msgId"]).to_pylist()
    # a tag filter still applies when the tags column is not asked for
    filtered = RecordBatchBuilder("broker-a", tag_predicate("x"), columns=["queueOffset"])
    assert filtered.add_body(buf, 10) == (3, 3)
    out = filtered.flush()
    assert out is not None and out.to_pylist() == [{"queueOffset": 0}, {"queueOffset": 2}]


def test_projection_refuses_unknown_columns() -> None:
    import pytest

    with pytest.raises(ValueError, match=r"no column\(s\) \['value'\]"):
        RecordBatchBuilder("b", columns=["body", "value"])
    with pytest.raises(ValueError, match="properties"):
        RecordBatchBuilder("b", include_properties=False, columns=["properties"])


_HOSTS = ["10.0.0.1:5555", "[2001:db8::1]:10911"]


@st.composite
def _records(draw: st.DrawFn) -> list[bytes]:
    """Pull bodies as a broker sends them: records of one size (the strided path) or of mixed sizes,
    IPv4 and IPv6 hosts, compressed bodies, with and without UNIQ_KEY / TAGS / KEYS."""
    count = draw(st.integers(1, 12))
    same_size = draw(st.booleans())
    fixed_body = draw(st.binary(min_size=0, max_size=40))
    out = []
    for i in range(count):
        body = fixed_body if same_size else draw(st.binary(min_size=0, max_size=40))
        props = (
            {}
            if same_size
            else draw(
                st.dictionaries(
                    st.sampled_from(["UNIQ_KEY", "TAGS", "KEYS", "a"]),
                    st.text("xyz09", min_size=1, max_size=5),
                )
            )
        )
        compressed = not same_size and draw(st.booleans())
        born, store = (
            (_HOSTS[0], _HOSTS[0])
            if same_size
            else (draw(st.sampled_from(_HOSTS)), draw(st.sampled_from(_HOSTS)))
        )
        flag = MessageSysFlag.COMPRESSED_FLAG if compressed else 0
        out.append(
            encode_stored_message(
                topic="Topic", body=compress_body(body) if compressed else body, properties=props,
                queue_id=2, queue_offset=100 + i, commit_log_offset=5000 + 97 * i, sys_flag=flag,
                born_timestamp=1_700_000_000_000 + i, born_host=born, store_timestamp=1_700_000_001_000 + i,
                store_host=store, reconsume_times=i % 3,
            )
        )  # fmt: skip
    return out


@settings(max_examples=60, deadline=None)
@given(_records(), st.integers(100, 115))
def test_decoded_rows_equal_the_message_codec(records: list[bytes], end: int) -> None:
    builder = RecordBatchBuilder("broker-a")
    builder.add_body(b"".join(records), end)
    batch = builder.flush()
    expected = [m for r in records for m in decode_messages(r) if m.queue_offset < end]
    rows = batch.to_pylist() if batch is not None else []
    assert [
        (r["queueOffset"], r["body"], r["msgId"], r["tags"], r["keys"], dict(r["properties"]),
         int(r["storeTimestamp"].timestamp() * 1000), r["reconsumeTimes"], r["queueId"], r["topic"])
        for r in rows
    ] == [
        (m.queue_offset, m.body, m.msg_id, m.properties.get("TAGS"), m.properties.get("KEYS"), m.properties,
         m.store_timestamp, m.reconsume_times, m.queue_id, m.topic)
        for m in expected
    ]  # fmt: skip


def _split_like_rocketmq(text: str | None) -> list[tuple[str, str]]:
    """``string2messageProperties``: split at ``\\x02``, each piece at its first ``\\x01``; pieces
    without one are skipped."""
    out = []
    for piece in (text or "").split("\x02"):
        key, sep, value = piece.partition("\x01")
        if sep:
            out.append((key, value))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet="ab\x01\x02é", max_size=12)), max_size=10))
def test_properties_split_as_rocketmq_does(strings: list[str | None]) -> None:
    """Any property strings, not only the usual key/value pairs: empty pieces, trailing separators,
    ``\\x01`` inside values, pieces without a key, nulls; and lookup gives a key's first value."""
    from tidemq.spark.arrow import Properties

    props = Properties(pa.array(strings, pa.string()))
    expected = [_split_like_rocketmq(s) for s in strings]
    assert props.to_map().to_pylist() == expected
    assert props.lookup("a").to_pylist() == [next((v for k, v in e if k == "a"), None) for e in expected]


@st.composite
def _alike_records(draw: st.DrawFn) -> tuple[list[bytes], list[str]]:
    """Pull bodies of records of one size and one layout (the decoder's fixed-layout path): the same
    property keys, pieces and value lengths in every record, values drawn per record (a separator or a
    non-ASCII byte in a value makes the decoder fall back to the general split)."""
    count = draw(st.integers(1, 10))
    body = draw(st.binary(min_size=0, max_size=30))
    template = draw(
        st.lists(
            st.one_of(
                st.tuples(st.sampled_from(["UNIQ_KEY", "TAGS", "KEYS", "a", "é", ""]), st.integers(0, 6)),
                st.sampled_from(["", "junk"]),  # pieces without \x01: dropped
            ),
            max_size=5,
        )
    )
    value = st.text(alphabet=draw(st.sampled_from(["xyz09", "xy\x01\x02\x00"])), min_size=0, max_size=6)
    host = draw(st.sampled_from(_HOSTS))
    records, texts = [], []
    for i in range(count):
        pieces = []
        for piece in template:
            if isinstance(piece, tuple):
                key, width = piece
                pieces.append(f"{key}\x01{draw(value.filter(lambda v, w=width: len(v) == w))}")
            else:
                pieces.append(piece)
        text = "\x02".join(pieces)
        texts.append(text)
        records.append(
            encode_stored_message(
                topic="Topic", body=body, properties=text, queue_id=1, queue_offset=50 + i,
                commit_log_offset=700 + 97 * i, born_timestamp=1_700_000_000_000 + i, born_host=host,
                store_timestamp=1_700_000_001_000 - i, store_host=host, reconsume_times=i % 2,
            )
        )  # fmt: skip
    return records, texts


@settings(max_examples=150, deadline=None)
@given(
    _alike_records(),
    st.integers(50, 61),
    st.sampled_from([None, ["body", "msgId"], ["tags", "queueOffset", "properties"]]),
    st.sampled_from([None, "xyz || y"]),
)
def test_fixed_layout_path_equals_the_general_decoder(
    alike: tuple[list[bytes], list[str]], end: int, columns: list[str] | None, tags: str | None
) -> None:
    """Records of one layout decode through the fixed-layout path to exactly what the general decoder
    gives (same Arrow arrays, same schema), with any projection, end offset and tag filter."""
    records, _ = alike
    buf = b"".join(records)
    fast = RecordBatchBuilder("broker-a", tag_predicate(tags), columns=columns)
    general = RecordBatchBuilder("broker-a", tag_predicate(tags), columns=columns)
    general._decode_fixed = lambda *args: None  # type: ignore[method-assign]
    assert fast.add_body(buf, end) == general.add_body(buf, end)
    a, b = fast.flush(), general.flush()
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert a.schema == b.schema and a.equals(b)


def test_fixed_layout_path_is_taken_for_one_producers_records() -> None:
    records = [
        _record(i, b"x" * 20, {"UNIQ_KEY": f"{i:032X}", "CLUSTER": "DefaultCluster"}) for i in range(5)
    ]
    builder = RecordBatchBuilder("broker-a")
    out = builder._decode_fixed(b"".join(records), len(records[0]), 3)
    assert out is not None
    batch, kept, nxt = out
    assert (kept, nxt) == (3, 5) and batch is not None
    assert batch.column("msgId").to_pylist() == [f"{i:032X}" for i in range(3)]
    assert batch.column("properties").to_pylist()[2] == [
        ("UNIQ_KEY", f"{2:032X}"),
        ("CLUSTER", "DefaultCluster"),
    ]
    # a value with a separator in it, or compressed bodies: the general decoder's job
    odd = [*records[:2], _record(2, b"x" * 20, {"UNIQ_KEY": "\x01" * 32, "CLUSTER": "DefaultCluster"})]
    assert builder._decode_fixed(b"".join(odd), len(records[0]), 3) is None
    packed = [_record(i, b"y" * 20, {}, compressed=True) for i in range(2)]
    assert builder._decode_fixed(b"".join(packed), len(packed[0]), 3) is None


def test_malformed_records_of_one_size_are_a_protocol_error() -> None:
    """Records of one size that are too short for their fields, or whose topic is not UTF-8, fail as
    malformed (ProtocolError), whichever path decodes them."""
    import struct

    import pytest

    from tidemq.errors import ProtocolError
    from tidemq.protocol import record_layout as L

    tiny = struct.pack(">ii", 20, L.MESSAGE_MAGIC_CODE) + bytes(12)
    v6 = struct.pack(">ii", 120, L.MESSAGE_MAGIC_CODE) + bytes(28) + struct.pack(">i", 0x30) + bytes(80)
    record = _record(0, b"body", {"UNIQ_KEY": "U"})
    at = record.index(b"\x01T") + 1  # the topic "T" after its 1-byte length
    bad_topic = record[:at] + b"\xff" + record[at + 1 :]
    for buf in (tiny * 3, v6 * 2, bad_topic * 2):
        with pytest.raises(ProtocolError):
            RecordBatchBuilder("b").add_body(buf, 100)


def test_decoding_records_laid_out_alike_does_not_import_pandas() -> None:
    """pyarrow imports pandas when it converts a Python or numpy object (``pa.array``, ``pa.scalar``):
    0.2 s in every Python worker, and objects PySpark's worker walks in its ``gc.collect()`` after
    every task. The usual decode builds its arrays from buffers and never does."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tests.spark.test_arrow_unit import _record\n"
        "from tidemq.spark.arrow import RecordBatchBuilder\n"
        "records = [_record(i, b'x' * 30, {'UNIQ_KEY': f'{i:032X}', 'CLUSTER': 'c'}) for i in range(4)]\n"
        "builder = RecordBatchBuilder('b')\n"
        "builder.add_body(b''.join(records), 10)\n"
        "assert builder.flush().num_rows == 4\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
