"""Decoding a PULL_MESSAGE body (decode_messages): the IPv4 fast path gives exactly what the
general path gives, IPv6 hosts still decode, and bad records are refused."""

from __future__ import annotations

import pytest

from tidemq.errors import ProtocolError
from tidemq.protocol.message import Message, MessageExt
from tidemq.protocol.message_codec import (
    MessageSysFlag,
    compress_body,
    create_offset_msg_id,
    decode_message,
    decode_messages,
    encode_stored_message,
)

PROPS = "TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x017F000001000018B4AAC2000000000001\x02"


def record(i: int, *, born: str = "10.1.2.3:50000", store: str = "10.1.2.4:10911", **kw: object) -> bytes:
    sys_flag = int(kw.pop("sys_flag", 0))  # type: ignore[call-overload]
    if born.startswith("["):
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if store.startswith("["):
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    return encode_stored_message(
        topic="T",
        body=kw.pop("body", f"body-{i}".encode()),  # type: ignore[arg-type]
        properties=PROPS,
        queue_id=3,
        flag=7,
        queue_offset=i,
        commit_log_offset=1000 + 200 * i,
        sys_flag=sys_flag,
        born_timestamp=1_700_000_000_000 + i,
        born_host=born,
        store_timestamp=1_700_000_000_500 + i,
        store_host=store,
        reconsume_times=2,
        prepared_transaction_offset=0,
    )


def fields(m: MessageExt) -> dict[str, object]:
    """The public fields (the private slots hold the properties text until it is parsed)."""
    names = {n for cls in type(m).__mro__ for n in getattr(cls, "__slots__", ()) if not n.startswith("_")}
    return {n: getattr(m, n) for n in sorted(names)}


def test_ipv4_fast_path_matches_every_field() -> None:
    msgs = decode_messages(b"".join(record(i) for i in range(3)))
    assert [m.queue_offset for m in msgs] == [0, 1, 2]
    m = msgs[1]
    assert len(fields(m)) == 18  # every slot is set (an unset slot raises AttributeError)
    assert (m.topic, m.body, m.flag, m.queue_id, m.reconsume_times) == ("T", b"body-1", 7, 3, 2)
    assert (m.born_host, m.store_host) == ("10.1.2.3:50000", "10.1.2.4:10911")
    assert (m.born_timestamp, m.store_timestamp, m.commit_log_offset) == (
        1_700_000_000_001,
        1_700_000_000_501,
        1200,
    )
    assert m.offset_msg_id == create_offset_msg_id("10.1.2.4:10911", 1200)
    assert m.properties == {"TAGS": "TagA", "KEYS": "k1", "UNIQ_KEY": "7F000001000018B4AAC2000000000001"}
    assert m.msg_id == "7F000001000018B4AAC2000000000001"
    assert isinstance(m, Message)


def test_ipv6_hosts_take_the_general_path() -> None:
    raw = record(5, born="[::1]:4000", store="[fe80::2]:10911")
    (m,) = decode_messages(raw)
    assert (m.born_host, m.store_host) == ("[::1]:4000", "[fe80::2]:10911")
    assert m.offset_msg_id == create_offset_msg_id("[fe80::2]:10911", 2000)
    v4 = decode_messages(record(5))[0]
    differing = {k for k, v in fields(m).items() if fields(v4)[k] != v}
    assert differing == {"born_host", "store_host", "offset_msg_id", "sys_flag", "store_size"}


def test_compressed_body_is_inflated() -> None:
    raw = record(0, body=compress_body(b"z" * 5000), sys_flag=MessageSysFlag.COMPRESSED_FLAG)
    assert decode_messages(raw)[0].body == b"z" * 5000
    assert decode_message(raw, decompress=False)[0].body != b"z" * 5000


@pytest.mark.parametrize("cut", [10, 60, 100])
def test_truncated_record_is_refused(cut: int) -> None:
    raw = record(0)
    with pytest.raises(ProtocolError):
        decode_messages(raw[:-cut])


def test_decode_messages_is_decode_message_record_by_record() -> None:
    """A body mixing IPv4 and IPv6 records, V1 topics and a compressed body decodes (from bytes,
    bytearray or memoryview) into exactly what decode_message gives record by record."""
    raws = [
        record(0),
        record(1, born="[::1]:4000"),
        record(2, body=compress_body(b"z" * 300), sys_flag=MessageSysFlag.COMPRESSED_FLAG),
        record(3, store="10.9.9.9:1"),
        record(4),
    ]
    body = b"".join(raws)
    expected, pos = [], 0
    while pos < len(body):
        m, pos = decode_message(body, pos)
        expected.append(fields(m))
    for buf in (body, bytearray(body), memoryview(body)):
        assert [fields(m) for m in decode_messages(buf)] == expected
    assert [m.store_host for m in decode_messages(body)][2:4] == ["10.1.2.4:10911", "10.9.9.9:1"]


def test_pulled_message_properties_read_like_a_dict() -> None:
    """What a consumer reads from a pulled message: the properties dict (with the pull's offsets
    after the stored ones), tags / keys / ids, equality and pickling, changes kept."""
    import pickle

    body = b"".join(record(i) for i in range(2))
    offsets = "MIN_OFFSET\x010\x02MAX_OFFSET\x0142"
    msgs = decode_messages(body, broker_name="broker-a", extra_properties=offsets)
    general = [decode_message(body, 0)[0], decode_message(body, decode_message(body, 0)[1])[0]]
    for m, g in zip(msgs, general, strict=True):
        g.broker_name = "broker-a"
        g.properties.update({"MIN_OFFSET": "0", "MAX_OFFSET": "42"})
        assert fields(m) == fields(g)
    m = msgs[0]
    assert (m.tags, m.keys, m.unique_key) == ("TagA", "k1", "7F000001000018B4AAC2000000000001")
    assert m.broker_name == "broker-a"
    assert list(m.properties) == ["TAGS", "KEYS", "UNIQ_KEY", "MIN_OFFSET", "MAX_OFFSET"]
    assert pickle.loads(pickle.dumps(msgs[1])) == msgs[1]
    assert pickle.loads(pickle.dumps(msgs[1])).properties["MAX_OFFSET"] == "42"
    m.properties["RECONSUME_TIME"] = "3"
    m.tags = "TagB"
    assert m.properties["RECONSUME_TIME"] == "3" and m.tags == "TagB"
    m.properties = {"X": "1"}
    assert m.tags is None and m.properties == {"X": "1"}
    assert m != msgs[1]


def test_pulled_message_without_stored_properties() -> None:
    raw = encode_stored_message(
        topic="T",
        body=b"b",
        properties="",
        queue_id=0,
        flag=0,
        queue_offset=0,
        commit_log_offset=0,
        sys_flag=0,
        born_timestamp=0,
        born_host="1.2.3.4:5",
        store_timestamp=0,
        store_host="1.2.3.4:6",
        reconsume_times=0,
        prepared_transaction_offset=0,
    )
    assert decode_messages(raw)[0].properties == {}
    assert decode_messages(raw, extra_properties="MAX_OFFSET\x011")[0].properties == {"MAX_OFFSET": "1"}
    assert decode_messages(raw)[0].tags is None
