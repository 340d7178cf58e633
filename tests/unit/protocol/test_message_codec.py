"""Stored-record codec: layout, round trips, message ids, batch bodies (protocol.md §5)."""

from __future__ import annotations

import itertools
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.errors import ProtocolError
from tidemq.protocol.message import Message, properties_to_string
from tidemq.protocol.message_codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MessageSysFlag,
    body_crc,
    compress_body,
    create_offset_msg_id,
    create_unique_id,
    create_unique_ids,
    decode_batch_body,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    decompress_body,
    encode_batch_body,
    encode_stored_message,
    patch_stored_message,
    read_record_info,
)

topics = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=40)
prop_text = st.text(
    alphabet=st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=["Cs"]), max_size=20
)
props = st.dictionaries(prop_text.filter(bool), prop_text, max_size=5)
ipv4 = st.tuples(*[st.integers(0, 255)] * 4, st.integers(0, 65535)).map(
    lambda t: f"{t[0]}.{t[1]}.{t[2]}.{t[3]}:{t[4]}"
)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


def test_golden_layout_ipv4() -> None:
    props_text = "TAGS\x01TagA\x02KEYS\x01k1"
    rec = encode_stored_message(
        topic="TopicTest",
        body=b"hello",
        properties=props_text,
        queue_id=3,
        flag=7,
        queue_offset=42,
        commit_log_offset=4096,
        sys_flag=0,
        born_timestamp=1_700_000_000_123,
        born_host="192.168.0.2:50000",
        store_timestamp=1_700_000_000_456,
        store_host="10.0.0.1:10911",
        reconsume_times=2,
        prepared_transaction_offset=9,
    )
    assert len(rec) == 91 + 5 + len("TopicTest") + len(props_text)
    total, magic, crc, qid, flag, qoff, phy, sysflag, born_ts = struct.unpack_from(">iiiiiqqiq", rec)
    assert (total, magic, qid, flag, qoff, phy, sysflag, born_ts) == (
        len(rec),
        MESSAGE_MAGIC_CODE,
        3,
        7,
        42,
        4096,
        0,
        1_700_000_000_123,
    )
    assert magic == struct.unpack(">i", bytes.fromhex("DAA320A7"))[0]
    assert crc == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert rec[48:52] == bytes([192, 168, 0, 2]) and struct.unpack_from(">i", rec, 52)[0] == 50000
    assert struct.unpack_from(">q", rec, 56)[0] == 1_700_000_000_456
    assert rec[64:68] == bytes([10, 0, 0, 1]) and struct.unpack_from(">i", rec, 68)[0] == 10911
    assert struct.unpack_from(">iqi", rec, 72) == (2, 9, 5)
    assert rec[88:93] == b"hello"
    assert rec[93] == 9 and rec[94:103] == b"TopicTest"
    assert struct.unpack_from(">H", rec, 103)[0] == len(props_text) and rec[105:].decode() == props_text


def test_blank_magic_value() -> None:
    assert struct.unpack(">i", bytes.fromhex("CBD43194"))[0] == BLANK_MAGIC_CODE


@given(
    topic=topics,
    body=st.binary(max_size=300),
    properties=props,
    queue_id=i32,
    flag=i32,
    queue_offset=i64,
    phy=st.integers(0, 2**63 - 1),
    born_ts=i64,
    store_ts=i64,
    born_host=ipv4,
    store_host=ipv4,
    reconsume=i32,
    prepared=i64,
)
def test_round_trip(
    topic: str,
    body: bytes,
    properties: dict[str, str],
    queue_id: int,
    flag: int,
    queue_offset: int,
    phy: int,
    born_ts: int,
    store_ts: int,
    born_host: str,
    store_host: str,
    reconsume: int,
    prepared: int,
) -> None:
    rec = encode_stored_message(
        topic=topic,
        body=body,
        properties=properties,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        commit_log_offset=phy,
        born_timestamp=born_ts,
        born_host=born_host,
        store_timestamp=store_ts,
        store_host=store_host,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
    )
    assert len(rec) == 91 + len(body) + len(topic.encode()) + len(properties_to_string(properties).encode())
    msg, end = decode_message(rec)
    assert end == len(rec)
    assert (msg.topic, msg.body, msg.properties, msg.flag) == (topic, body, properties, flag)
    assert (msg.queue_id, msg.queue_offset, msg.commit_log_offset) == (queue_id, queue_offset, phy)
    assert (msg.born_timestamp, msg.store_timestamp, msg.born_host, msg.store_host) == (
        born_ts,
        store_ts,
        born_host,
        store_host,
    )
    assert (msg.reconsume_times, msg.prepared_transaction_offset, msg.store_size) == (
        reconsume,
        prepared,
        len(rec),
    )
    assert msg.body_crc == body_crc(body)
    assert msg.offset_msg_id == create_offset_msg_id(store_host, phy)
    assert decode_offset_msg_id(msg.offset_msg_id) == (store_host, phy)
    info = read_record_info(rec)
    assert (info.topic, info.queue_id, info.total_size, info.store_timestamp) == (
        topic,
        queue_id,
        len(rec),
        store_ts,
    )
    assert rec[info.body_offset : info.body_offset + info.body_length] == body


@given(st.lists(st.tuples(st.binary(max_size=50), props), min_size=1, max_size=5))
def test_decode_messages_back_to_back(items: list[tuple[bytes, dict[str, str]]]) -> None:
    buf = b"".join(
        encode_stored_message(topic="T", body=b, properties=p, queue_offset=i, store_host="1.2.3.4:5")
        for i, (b, p) in enumerate(items)
    )
    msgs = decode_messages(buf)
    assert [(m.body, m.properties, m.queue_offset) for m in msgs] == [
        (b, p, i) for i, (b, p) in enumerate(items)
    ]


@given(props, st.lists(st.tuples(prop_text.filter(bool), prop_text), max_size=4), st.booleans())
def test_put_property_on_a_pulled_message_is_setting_the_dict(
    stored: dict[str, str], puts: list[tuple[str, str]], extra: bool
) -> None:
    """``put_property`` / ``get_property`` on a decoded message, whose properties are still text,
    give what setting and reading the parsed dict gives; the text stays unparsed meanwhile."""
    rec = encode_stored_message(topic="T", body=b"b", properties=stored, store_host="1.2.3.4:5")
    extra_text = "MIN_OFFSET\x010\x02MAX_OFFSET\x017" if extra else ""
    (lazy,) = decode_messages(rec, extra_properties=extra_text)
    (eager,) = decode_messages(rec, extra_properties=extra_text)
    expected = eager.properties  # parsed first, then set: the reference
    for key, value in puts:
        lazy.put_property(key, value)
        eager.put_property(key, value)
        expected[key] = value
        assert lazy.get_property(key) == value
    assert lazy._props is None  # the point: nobody read the dict, so it was never built
    assert lazy.properties == expected == eager.properties
    for key in list(stored) + [k for k, _ in puts]:
        assert lazy.get_property(key) == expected.get(key)


def test_compressed_body_inflated_on_decode() -> None:
    raw = b"abc" * 2000
    rec = encode_stored_message(topic="T", body=compress_body(raw), sys_flag=MessageSysFlag.COMPRESSED_FLAG)
    assert decode_message(rec)[0].body == raw
    assert decode_message(rec, decompress=False)[0].body == compress_body(raw)
    assert decompress_body(compress_body(raw)) == raw


def test_bad_compressed_body_is_protocol_error() -> None:
    rec = encode_stored_message(topic="T", body=b"not zlib", sys_flag=MessageSysFlag.COMPRESSED_FLAG)
    with pytest.raises(ProtocolError, match="zlib"):
        decode_message(rec)


def test_patch_sets_offsets_and_store_time() -> None:
    buf = bytearray(encode_stored_message(topic="T", body=b"x", born_host="1.1.1.1:1"))
    patch_stored_message(buf, 0, queue_offset=5, commit_log_offset=777, store_timestamp=123456)
    msg = decode_message(buf)[0]
    assert (msg.queue_offset, msg.commit_log_offset, msg.store_timestamp) == (5, 777, 123456)


def test_ipv6_hosts_set_flags_and_round_trip() -> None:
    rec = encode_stored_message(topic="T", body=b"x", born_host="[::1]:9", store_host="[fe80::2]:10911")
    msg = decode_message(rec)[0]
    assert (
        msg.sys_flag & MessageSysFlag.BORNHOST_V6_FLAG
        and msg.sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    )
    assert (msg.born_host, msg.store_host) == ("[::1]:9", "[fe80::2]:10911")
    assert len(msg.offset_msg_id) == 56
    # IPv4-mapped addresses are stored as IPv4 (what C++ clients can decode)
    assert decode_message(encode_stored_message(topic="T", body=b"", born_host="[::ffff:1.2.3.4]:5"))[
        0
    ].born_host == ("1.2.3.4:5")


def test_truncated_and_inconsistent_records_raise() -> None:
    rec = encode_stored_message(topic="T", body=b"hello")
    with pytest.raises(ProtocolError):
        decode_message(rec[:-1])
    bad = bytearray(rec)
    struct.pack_into(">i", bad, 0, len(rec) + 4)
    with pytest.raises(ProtocolError, match="TOTALSIZE"):
        decode_message(bad)


def test_encode_rejects_long_topic_and_bad_host() -> None:
    with pytest.raises(ProtocolError, match="127"):
        encode_stored_message(topic="t" * 128, body=b"")
    with pytest.raises(ProtocolError, match="ip:port"):
        encode_stored_message(topic="T", body=b"", store_host="nohost")


def test_offset_msg_id_golden() -> None:
    assert create_offset_msg_id("10.0.0.1:10911", 77) == "0A00000100002A9F000000000000004D"
    assert decode_offset_msg_id("0a00000100002a9f000000000000004d") == ("10.0.0.1:10911", 77)
    with pytest.raises(ProtocolError):
        decode_offset_msg_id("ABC")
    with pytest.raises(ProtocolError):
        decode_offset_msg_id("ZZ" * 16)


def test_unique_ids_are_32_hex_and_distinct() -> None:
    ids = [create_unique_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 32 and int(i, 16) >= 0 and i == i.upper() for i in ids)
    assert len({i[:20] for i in ids}) == 1  # IP + pid + random part is fixed per process


def test_unique_ids_in_bulk_continue_the_same_sequence() -> None:
    """create_unique_ids(n) gives what n calls of create_unique_id give: same fixed part, counters
    following on (wrapping at 16 bits), the next single id after them."""
    before = create_unique_id()
    bulk = create_unique_ids(70_000)
    after = create_unique_id()
    assert len(bulk) == 70_000 and all(len(i) == 32 and i == i.upper() for i in bulk)
    assert {i[:20] for i in [before, *bulk, after]} == {before[:20]}
    counters = [int(i[-4:], 16) for i in [before, *bulk, after]]
    assert all((b - a) & 0xFFFF == 1 for a, b in itertools.pairwise(counters))
    assert len(set(bulk[:65_536])) == 65_536


@given(st.lists(st.tuples(st.binary(max_size=100), props, i32), max_size=6))
def test_batch_body_round_trip(items: list[tuple[bytes, dict[str, str], int]]) -> None:
    msgs = [Message("T", b, flag=f, properties=p) for b, p, f in items]
    decoded = decode_batch_body(encode_batch_body(msgs))
    assert [(d.flag, d.body, d.properties) for d in decoded] == [(f, b, p) for b, p, f in items]
    assert [d.properties_string for d in decoded] == [properties_to_string(p) for _, p, _ in items]


def test_batch_body_layout_and_errors() -> None:
    body = encode_batch_body([Message("T", b"ab", flag=3, properties={"k": "v"})])
    assert struct.unpack_from(">iiii", body) == (20 + 2 + 2 + 3, 0, 0, 3)
    with pytest.raises(ProtocolError):
        decode_batch_body(body[:-1])
    bad = bytearray(body)
    struct.pack_into(">i", bad, 0, 99)
    with pytest.raises(ProtocolError, match="TOTALSIZE"):
        decode_batch_body(bad)


def test_batch_body_accepts_cpp_trailing_separator() -> None:
    props = b"UNIQ_KEY\x01AB\x02WAIT\x01true\x02"
    item = (
        struct.pack(">iiiii", 20 + 1 + 2 + len(props), 0, 0, 0, 1)
        + b"z"
        + struct.pack(">H", len(props))
        + props
    )
    [decoded] = decode_batch_body(item)
    assert decoded.properties == {"UNIQ_KEY": "AB", "WAIT": "true"}
