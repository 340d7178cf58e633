"""POP's pure pieces: receipt handles, the pop response info strings, revive-log records, the batch
ack body (Java ``BitSet.toByteArray`` in base64) and the client's pop-response processing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.pop.extra_info import (
    ExtraInfoError,
    build_extra_info,
    msg_offset_entry,
    parse_extra_info,
    parse_msg_offset_info,
    parse_order_count_info,
    parse_start_offset_info,
    pop_retry_topic,
    real_topic,
    retry_flag,
    start_offset_entry,
)
from tidemq.broker.pop.records import AckRecord, CheckPoint, OrderAck, OrderCheckPoint
from tidemq.broker.pop.result import PopError
from tidemq.broker.pop.service import reconsume_times_of
from tidemq.client.consumer.simple import process_pop_response
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers.pop import BatchAck, BatchAckMessageRequestBody
from tidemq.protocol.message_codec import encode_stored_message


def test_extra_info_round_trip_and_retry_flags() -> None:
    text = build_extra_info(5, 1700, 30000, 3, "%RETRY%g_T", "broker-a", 0, 7)
    assert text == "5 1700 30000 3 1 broker-a 0 7"
    info = parse_extra_info(text)
    assert (info.ck_queue_offset, info.revive_qid, info.retry, info.queue_offset) == (5, 3, "1", 7)
    assert info.visible_at == 31700 and not info.is_order
    assert parse_extra_info("5 1700 30000 999 0 b 1", offset=9).queue_offset == 9  # 7 fields + offset
    assert retry_flag("T") == "0" and retry_flag("%RETRY%g+T") == "2"
    assert pop_retry_topic("T", "g") == "%RETRY%g_T" and real_topic("T", "g", "2") == "%RETRY%g+T"
    for bad in ("", "1 2 3", "a b c d 0 b 1 2", "1 2 3 4 9 b 1 2"):
        with pytest.raises(ExtraInfoError):
            parse_extra_info(bad)


def test_info_strings() -> None:
    starts = ";".join([start_offset_entry("T", 0, 10), start_offset_entry("%RETRY%g_T", 0, 3)])
    assert parse_start_offset_info(starts) == {"0@0": 10, "1@0": 3}
    assert parse_msg_offset_info(msg_offset_entry("T", 2, [4, 6])) == {"0@2": [4, 6]}
    assert parse_order_count_info("0 qo1%5 2") == {"0@qo1%5": 2}


@given(st.sets(st.integers(0, 200), min_size=1, max_size=32), st.integers(0, 10**12))
def test_batch_ack_bitset_round_trip(offsets: set[int], start: int) -> None:
    bits = sum(1 << o for o in offsets)
    ack = BatchAck("g", "T", "0", start, 1, 2, 1700, 30000, bits)
    body = BatchAckMessageRequestBody("b", [ack]).encode()
    [back] = BatchAckMessageRequestBody.decode(body).acks
    assert back.offsets() == sorted(start + o for o in offsets)


def test_batch_ack_java_bitset_bytes() -> None:
    # Java: BitSet bs = new BitSet(); bs.set(0); bs.set(9); bs.toByteArray() = {0x01, 0x02} -> "AQI="
    body = b'{"brokerName":"b","acks":[{"c":"g","t":"T","r":"0","so":100,"q":1,"rq":2,"pt":1,"it":2,"b":"AQI="}]}'
    assert BatchAckMessageRequestBody.decode(body).acks[0].offsets() == [100, 109]
    with pytest.raises(ValueError):
        BatchAckMessageRequestBody.decode(b'{"acks":[{"c":"g"}]}')


def test_batch_ack_bitset_is_bounded_and_read_in_linear_time() -> None:
    """A client's bitSet of 64 KiB took 3 s to walk (a shift of the whole number per bit) on the
    broker's loop, 1 MiB minutes; an entry acks messages of one pop, so past 1024 bits it is refused."""
    import base64
    import time

    def body(raw: bytes) -> bytes:
        entry = f'{{"c":"g","t":"T","r":"0","so":5,"q":1,"rq":2,"pt":1,"it":2,"b":"{base64.b64encode(raw).decode()}"}}'
        return b'{"acks":[' + entry.encode() + b"]}"

    started = time.monotonic()
    with pytest.raises(ValueError, match="at most 1024"):
        BatchAckMessageRequestBody.decode(body(b"\x01" * 65536))
    assert time.monotonic() - started < 0.5
    [ack] = BatchAckMessageRequestBody.decode(body(b"\xff" * 128)).acks  # 1024 bits: the most
    assert ack.offsets() == list(range(5, 5 + 1024))


def test_revive_records_round_trip() -> None:
    ck = CheckPoint(10, 1700, 3000, 2, "T", "g", [0, 3, 5], 4, 16, bitmap=0b010, broker_name="b")
    back = CheckPoint.decode(ck.encode())
    assert back == ck and back.index_of(13) == 1 and back.index_of(11) == -1 and not back.all_acked()
    ack = AckRecord("g", "T", 2, 10, 1700, [13, 15])
    assert AckRecord.decode(ack.encode()) == ack and AckRecord.decode(ack.encode()).key == ck.key
    batch = OrderCheckPoint("g", "T", 0, [4, 5, 6], [1, 0, 0], 7, 1700, 3000, acked=[5])
    assert OrderCheckPoint.decode(batch.encode()) == batch and batch.commit_offset() == 4
    oack = OrderAck("g", "T", 0, 4, 1700, 6)
    assert OrderAck.decode(oack.encode()) == oack


def test_client_builds_receipt_handles_from_the_pop_response() -> None:
    records = b"".join(
        encode_stored_message(
            topic="T", body=f"m{i}".encode(), properties={"TAGS": "A"}, queue_id=1, queue_offset=4 + i
        )
        for i in range(2)
    )
    response = RemotingCommand.create_response(
        0,
        "FOUND",
        {
            "popTime": "1700",
            "invisibleTime": "3000",
            "reviveQid": "999",
            "restNum": "0",
            "startOffsetInfo": "0 1 4",
            "msgOffsetInfo": "0 1 4,5",
            "orderCountInfo": "0 qo1%4 2;0 qo1%5 0",
        },
        records,
    )
    msgs = process_pop_response(response, "T", "broker-a")
    assert [m.get_property("POP_CK") for m in msgs] == [
        "4 1700 3000 999 0 broker-a 1 4",
        "4 1700 3000 999 0 broker-a 1 5",
    ]
    assert [m.reconsume_times for m in msgs] == [2, 0]
    assert msgs[0].get_property("1ST_POP_TIME") == "1700" and msgs[0].broker_name == "broker-a"


@pytest.mark.parametrize(
    ("born", "store"), [("10.0.0.1:9", "10.0.0.2:10911"), ("[::1]:9", "[fe80::1]:10911")]
)
def test_reconsume_times_read_in_place(born: str, store: str) -> None:
    record = encode_stored_message(topic="T", body=b"b", born_host=born, store_host=store, reconsume_times=7)
    assert reconsume_times_of(record) == 7


def test_pop_error_repr_names_known_codes_only() -> None:
    """A known response code shows by name, one this version does not name by number."""
    assert repr(PopError(ResponseCode.NO_MESSAGE, "none")) == "PopError(NO_MESSAGE, 'none')"
    assert repr(PopError(9999, "new")) == "PopError(9999, 'new')"
