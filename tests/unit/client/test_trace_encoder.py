"""Message trace records: the Java client's TraceDataEncoder text format, both ways.

The Java vectors are built field by field as ``TraceDataEncoder.encoderFromContextBean`` writes
them (RocketMQ 4.9.8 ``client/.../trace/TraceDataEncoder.java``; the Pub vector is the one of its
``TraceDataEncoderTest``), including the older and newer record lengths its decoder accepts.
"""

from __future__ import annotations

import pytest

from tidemq.client.trace.encoder import (
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
    decode_trace_data,
    encode_trace_context,
)
from tidemq.client.trace.view import build_message_trace
from tidemq.protocol.message import MessageExt

C, F = "\x01", "\x02"
MSG_ID = "AC1415116D1418B4AAC217FE1B4E0000"
JAVA_PUB = C.join(
    ["Pub", "1700000000000", "DefaultRegion", "PID-test", "topic-test", MSG_ID, "Tags", "Keys",
     "127.0.0.1:10911", "26", "245", "0", "0A9A002600002A9F0000000000002329", "true"]
) + F  # fmt: skip
JAVA_SUB_BEFORE = C.join(
    ["SubBefore", "1700000000300", "DefaultRegion", "CID-test", "REQ1", MSG_ID, "2", "Keys"]
) + F  # fmt: skip
JAVA_SUB_AFTER = (
    C.join(["SubAfter", "REQ1", MSG_ID, "12", "false", "Keys", "4", "1700000000312", "CID-test"]) + F
)


def test_java_records_decode() -> None:
    pub, before, after = decode_trace_data(JAVA_PUB + JAVA_SUB_BEFORE + JAVA_SUB_AFTER)
    assert pub.trace_type is TraceType.Pub
    assert (pub.time_stamp, pub.region_id, pub.group_name, pub.cost_time, pub.is_success) == (
        1700000000000, "DefaultRegion", "PID-test", 245, True,
    )  # fmt: skip
    b = pub.trace_beans[0]
    assert (b.topic, b.msg_id, b.tags, b.keys, b.store_host, b.body_length, b.msg_type, b.offset_msg_id) == (
        "topic-test", MSG_ID, "Tags", "Keys", "127.0.0.1:10911", 26, MessageType.Normal_Msg,
        "0A9A002600002A9F0000000000002329",
    )  # fmt: skip
    assert before.trace_type is TraceType.SubBefore
    assert (before.request_id, before.group_name, before.trace_beans[0].retry_times) == (
        "REQ1",
        "CID-test",
        2,
    )
    assert after.trace_type is TraceType.SubAfter
    assert (after.request_id, after.cost_time, after.is_success, after.context_code) == ("REQ1", 12, False, 4)
    assert (after.time_stamp, after.group_name) == (1700000000312, "CID-test")


def test_older_and_newer_record_lengths_decode() -> None:
    old_pub = JAVA_PUB.replace(C + "0A9A002600002A9F0000000000002329", "")  # 13 fields, no offsetMsgId
    (p,) = decode_trace_data(old_pub)
    assert p.is_success and p.trace_beans[0].offset_msg_id == ""
    new_pub = JAVA_PUB[:-1] + C + "10.0.0.9" + F  # 5.x may add the client host
    (p,) = decode_trace_data(new_pub)
    assert p.trace_beans[0].client_host == "10.0.0.9"
    old_after = C.join(["SubAfter", "REQ1", MSG_ID, "12", "true", "Keys"]) + F
    (a,) = decode_trace_data(old_after)
    assert a.is_success and a.context_code == 0 and a.group_name == ""
    cloud_after = C.join(["SubAfter", "REQ1", MSG_ID, "12", "true", "Keys", "0"]) + C + F
    (a,) = decode_trace_data(cloud_after)
    assert a.context_code == 0
    end_tx = C.join(
        ["EndTransaction", "1", "DefaultRegion", "PID", "T", MSG_ID, "null", "null", "127.0.0.1:10911", "1",
         "TX1", "COMMIT_MESSAGE", "false"]
    ) + F  # fmt: skip
    e, r = decode_trace_data(end_tx + C.join(["Recall", "1", "r", "g", "T", MSG_ID, "true"]) + F)
    assert e.trace_beans[0].transaction_state == "COMMIT_MESSAGE" and r.trace_type is TraceType.Recall
    with pytest.raises(ValueError, match="truncated"):
        decode_trace_data("Pub" + C + "1" + F)


def test_encoder_writes_what_java_writes() -> None:
    ctx = TraceContext(TraceType.Pub, 1700000000000, "DefaultRegion", "PID-test", cost_time=245)
    ctx.trace_beans.append(
        TraceBean(
            topic="topic-test", msg_id=MSG_ID, tags="Tags", keys="Keys", store_host="127.0.0.1:10911",
            body_length=26, offset_msg_id="0A9A002600002A9F0000000000002329",
        )
    )  # fmt: skip
    bean = encode_trace_context(ctx)
    assert bean.trans_data == JAVA_PUB
    assert bean.trans_key == [MSG_ID, "Keys"]
    before = TraceContext(TraceType.SubBefore, 1700000000300, "DefaultRegion", "CID-test", request_id="REQ1")
    before.trace_beans.append(TraceBean(msg_id=MSG_ID, retry_times=2, keys="Keys"))
    assert encode_trace_context(before).trans_data == JAVA_SUB_BEFORE
    after = TraceContext(
        TraceType.SubAfter, 1700000000312, "DefaultRegion", "CID-test", 12, False, "REQ1",
        int(ConsumeReturnType.FAILED), before.trace_beans,
    )  # fmt: skip
    assert encode_trace_context(after).trans_data == JAVA_SUB_AFTER


def test_absent_strings_are_written_as_java_null_and_keys_split() -> None:
    ctx = TraceContext(TraceType.Pub, 5, "DefaultRegion", "g")
    ctx.trace_beans.append(TraceBean(topic="T", msg_id="M1", tags=None, keys="k1 k2", store_host="h:1"))
    bean = encode_trace_context(ctx)
    assert bean.trans_data.split(C)[6] == "null"
    assert bean.trans_key == ["M1", "k1", "k2"]
    (back,) = decode_trace_data(bean.trans_data)
    assert back.trace_beans[0].keys == "k1 k2"


def test_round_trip_of_every_type() -> None:
    beans = [TraceBean(topic="T", msg_id=f"M{i}", tags="t", keys=f"k{i}", store_host="h:1") for i in range(3)]
    ctxs = [
        TraceContext(TraceType.Pub, 10, "R", "pg", 3, True, trace_beans=[beans[0]]),
        TraceContext(TraceType.SubBefore, 20, "R", "cg", request_id="Q", trace_beans=beans),
        TraceContext(TraceType.SubAfter, 30, "R", "cg", 4, True, "Q", 0, beans),
    ]
    text = "".join(encode_trace_context(c).trans_data for c in ctxs)
    decoded = decode_trace_data(text)
    assert [c.trace_type for c in decoded] == [TraceType.Pub] + [TraceType.SubBefore] * 3 + [
        TraceType.SubAfter
    ] * 3
    assert [c.trace_beans[0].msg_id for c in decoded[1:4]] == ["M0", "M1", "M2"]
    assert all(c.cost_time == 4 and c.request_id == "Q" for c in decoded[4:])


def test_message_trace_joins_consume_attempts_by_request_id() -> None:
    carrier = MessageExt("RMQ_SYS_TRACE_TOPIC", (JAVA_PUB + JAVA_SUB_BEFORE + JAVA_SUB_AFTER).encode())
    carrier.born_host = "10.0.0.5:40000"
    retry_before = JAVA_SUB_BEFORE.replace("REQ1", "REQ2").replace("1700000000300", "1700000009000")
    other = MessageExt(
        "RMQ_SYS_TRACE_TOPIC", (retry_before + JAVA_SUB_BEFORE.replace(MSG_ID, "OTHER")).encode()
    )
    trace = build_message_trace(MSG_ID, [carrier, other])
    assert [p.group_name for p in trace.pubs] == ["PID-test"]
    assert trace.pubs[0].client_host == "10.0.0.5:40000"
    assert trace.store_time == 1700000000000 + 245 // 2
    steps = trace.consumes["CID-test"]
    assert [(s.begin, s.status, s.cost_time, s.return_type) for s in steps] == [
        (1700000000300, "failed", 12, "FAILED"),
        (1700000009000, "consuming", None, ""),
    ]
    assert trace.to_json()["sub"]["CID-test"][0]["retryTimes"] == 2


async def test_dispatcher_batches_records_and_keeps_keys_under_the_properties_cap() -> None:
    """Many short records: every trace message's KEYS stays below 32 KiB and no record is lost."""
    from tidemq.client.config import ClientConfig
    from tidemq.client.trace.dispatcher import AsyncTraceDispatcher

    class FakeProducer:
        def __init__(self) -> None:
            self.sent: list[object] = []

        async def send(self, msg: object) -> None:
            self.sent.append(msg)

    d = AsyncTraceDispatcher(ClientConfig(), "g", "PRODUCER", queue_size=5000)
    fake = FakeProducer()
    d._producer = fake  # type: ignore[assignment]
    for i in range(3000):
        ctx = TraceContext(TraceType.Pub, i, "R", "g")
        ctx.trace_beans.append(TraceBean(topic="T", msg_id=f"{i:032X}", keys=f"order-{i}", store_host="h:1"))
        assert d.append(ctx)
    await d.flush()
    records = [r for m in fake.sent for r in decode_trace_data(m.body.decode())]  # type: ignore[attr-defined]
    assert len(records) == 3000 and len(fake.sent) > 1
    assert all(len(m.keys.encode()) < 32_767 for m in fake.sent)  # type: ignore[attr-defined]
    assert d.stats()["sent_records"] == 3000


def test_cpp_client_sub_after_without_group_joins_its_sub_before() -> None:
    """rocketmq-client-cpp 2.2 (``src/trace/TraceUtil.cpp``) ends SubAfter after the keys (``dKey``
    when there are none): group and time come from the SubBefore with the same request id."""
    before = (
        C.join(["SubBefore", "1700000000300", "DefaultRegion", "cpp-cg", "REQ7", MSG_ID, "0", "dKey"]) + F
    )
    after = C.join(["SubAfter", "REQ7", MSG_ID, "3", "true", "dKey"]) + F
    carrier = MessageExt("rmq_sys_TRACE_DATA_DefaultRegion", (JAVA_PUB + before + after).encode())
    trace = build_message_trace(MSG_ID, [carrier])
    (step,) = trace.consumes["cpp-cg"]
    assert (step.begin, step.cost_time, step.status, step.return_type) == (
        1700000000300,
        3,
        "success",
        "SUCCESS",
    )


def test_recall_record_as_java_writes_it_and_in_the_message_trace() -> None:
    """RocketMQ 5.3's ``Recall`` record (``TraceDataEncoder`` case Recall: timeStamp region group topic
    msgId success), written by the producer's recall (``DefaultRecallMessageTraceHook``)."""
    java = C.join(["Recall", "1700000001000", "DefaultRegion", "PID-test", "topic-test", MSG_ID, "true"]) + F
    ctx = TraceContext(TraceType.Recall, 1700000001000, "DefaultRegion", "PID-test", is_success=True)
    ctx.trace_beans.append(TraceBean(topic="topic-test", msg_id=MSG_ID))
    bean = encode_trace_context(ctx)
    assert bean.trans_data == java and bean.trans_key == [MSG_ID]
    (back,) = decode_trace_data(java)
    assert (back.trace_type, back.group_name, back.is_success) == (TraceType.Recall, "PID-test", True)
    trace = build_message_trace(MSG_ID, [MessageExt("RMQ_SYS_TRACE_TOPIC", (JAVA_PUB + java).encode())])
    assert trace.found and [(r.group_name, r.status) for r in trace.recalls] == [("PID-test", "success")]
    assert trace.to_json()["recall"][0]["time"] == 1700000001000
