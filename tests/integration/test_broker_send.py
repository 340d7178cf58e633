"""Producing to a real broker over sockets: send v1/v2/batch, auto-create, retry/DLQ, bad input."""

from __future__ import annotations

import asyncio
import struct
import time

import orjson
import pytest

from tidemq.protocol.body import TopicRouteData
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import Message, MessageConst, string_to_properties
from tidemq.protocol.message_codec import decode_messages, decode_offset_msg_id
from tidemq.remoting import RemotingClient
from tidemq.testing import Cluster, run_cluster

from .conftest import Wire


async def pull_all(wire: Wire, topic: str, queue_id: int = 0) -> list:  # type: ignore[type-arg]
    r = await wire.pull(topic, 0, queue_id=queue_id)
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    return decode_messages(r.body)


async def test_send_v2_then_pull_back_byte_exact(wire: Wire) -> None:
    """A message sent with SEND_MESSAGE_V2 comes back with the same body, tags, keys and user props."""
    body = bytes(range(256)) * 10
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABCDEF", "color": "blue", "WAIT": "true"}
    r = await wire.send("TopicV2", body, properties=props, queue_id=1, flag=7)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == "0"
    assert r.ext_fields["MSG_REGION"] == "DefaultRegion" and r.ext_fields["TRACE_ON"] == "true"
    host, phy = decode_offset_msg_id(r.ext_fields["msgId"])
    assert host == wire.addr and phy == 0
    (msg,) = await pull_all(wire, "TopicV2", queue_id=1)
    assert msg.body == body
    assert msg.flag == 7
    assert msg.tags == "TagA" and msg.keys == "k1 k2" and msg.msg_id == "ABCDEF"
    assert msg.properties["color"] == "blue"
    assert msg.properties[MessageConst.PROPERTY_CLUSTER] == "DefaultCluster"
    assert MessageConst.PROPERTY_WAIT_STORE_MSG_OK not in msg.properties
    assert msg.store_host == wire.addr
    assert msg.offset_msg_id == r.ext_fields["msgId"]


async def test_send_v1_long_names_with_cpp_trailing_separator(wire: Wire) -> None:
    """SEND_MESSAGE (10) with long field names and a C++-style trailing \\x02 in properties."""
    r = await wire.send(
        "TopicV1", b"v1-body", code=RequestCode.SEND_MESSAGE, properties="TAGS\x01x\x02a\x01b\x02"
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    (msg,) = await pull_all(wire, "TopicV1")
    assert msg.body == b"v1-body" and msg.tags == "x" and msg.properties["a"] == "b"


async def test_random_queue_when_queue_id_negative(wire: Wire) -> None:
    """queueId < 0 lets the broker pick a queue within the topic's write queues."""
    seen = set()
    for i in range(20):
        r = await wire.send("TopicRand", b"%d" % i, queue_id=-1)
        assert r.code == ResponseCode.SUCCESS
        seen.add(int(r.ext_fields["queueId"]))
    assert seen <= {0, 1, 2, 3} and len(seen) > 1


@pytest.mark.parametrize(
    "code",
    [RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE],
    ids=["batch-320", "v2-batch-flag", "cpp-v1-batch-1"],
)
async def test_batch_send_pulls_back_every_message(wire: Wire, code: int) -> None:
    """A batch (code 320, or the batch flag on 310/10) stores each message with contiguous offsets."""
    msgs = [
        Message("TopicB", b"m%d" % i, tags=f"T{i % 2}", properties={"UNIQ_KEY": f"U{i}"}) for i in range(5)
    ]
    header = wire.send_header("TopicB", batch=True)
    if code == RequestCode.SEND_MESSAGE:
        ext = header.to_ext_fields()
        ext["batch"] = "1"  # the C++ client's boolean
    else:
        ext = header.to_v2_ext_fields()
    from tidemq.protocol.message_codec import encode_batch_body

    r = await wire.invoke(code, ext, encode_batch_body(msgs))
    assert r.code == ResponseCode.SUCCESS, r.remark
    ids = r.ext_fields["msgId"].split(",")
    assert len(ids) == 5
    got = await pull_all(wire, "TopicB")
    assert [m.body for m in got] == [m.body for m in msgs]
    assert [m.queue_offset for m in got] == list(range(5))
    assert [m.msg_id for m in got] == [f"U{i}" for i in range(5)]
    assert [m.offset_msg_id for m in got] == ids
    assert all(m.properties[MessageConst.PROPERTY_CLUSTER] == "DefaultCluster" for m in got)


async def test_batch_with_a_delayed_item_is_refused_and_stores_nothing(wire: Wire) -> None:
    """A batch item carrying DELAY is refused as a whole (RocketMQ refuses delayed batches; the
    client never sends one), and none of its messages is stored."""
    from tidemq.protocol.message_codec import encode_batch_body

    msgs = [Message("TopicBD", b"now"), Message("TopicBD", b"later", properties={"DELAY": "2"})]
    ext = wire.send_header("TopicBD", batch=True).to_v2_ext_fields()
    r = await wire.invoke(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch_body(msgs))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "cannot be delayed" in (r.remark or "")
    ok = await wire.invoke(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch_body(msgs[:1]))
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    assert [m.body for m in await pull_all(wire, "TopicBD")] == [b"now"]


async def test_batch_item_checks_name_the_problem(wire: Wire) -> None:
    """A property whose name only ends in DELAY does not delay (the batch is stored); an item whose
    properties pass 32767 bytes once the broker adds CLUSTER refuses the batch with that reason."""
    from tidemq.protocol.message_codec import encode_batch_body

    ext = wire.send_header("TopicBC", batch=True).to_v2_ext_fields()
    ok = [Message("TopicBC", b"a", properties={"NODELAY": "5"}), Message("TopicBC", b"b")]
    r = await wire.invoke(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch_body(ok))
    assert r.code == ResponseCode.SUCCESS, r.remark
    big = [Message("TopicBC", b"c"), Message("TopicBC", b"d", properties={"P": "x" * 32_758})]
    r = await wire.invoke(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch_body(big))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "exceed 32767" in (r.remark or "")
    assert [m.body for m in await pull_all(wire, "TopicBC")] == [b"a", b"b"]


async def test_auto_create_from_tbw102_registers_route(wire: Wire, cluster: Cluster) -> None:
    """Sending to an unknown topic creates it from TBW102 with min(4, 8) queues and a name-server route."""
    r = await wire.send("BrandNewTopic", b"x", default_topic_queue_nums=4)
    assert r.code == ResponseCode.SUCCESS
    tc = cluster.broker.topic_config_manager.select_topic_config("BrandNewTopic")
    assert tc is not None and tc.write_queue_nums == 4 and tc.perm == 6
    client = RemotingClient()
    try:
        deadline = asyncio.get_running_loop().time() + 5
        while True:
            req = RemotingCommand.create_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "BrandNewTopic"}
            )
            resp = await client.invoke(cluster.namesrv_addr, req, 3.0)
            if resp.code == ResponseCode.SUCCESS:
                break
            assert asyncio.get_running_loop().time() < deadline, "route never appeared"
            await asyncio.sleep(0.02)
        route = TopicRouteData.decode(resp.body)
        assert route.queue_datas[0].write_queue_nums == 4
        assert route.broker_datas[0].broker_addrs[0] == cluster.broker_addr
    finally:
        await client.close()


async def test_no_auto_create_when_disabled(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With auto_create_topic_enable=False an unknown topic gets TOPIC_NOT_EXIST."""
    async with run_cluster(tmp_path, auto_create_topic_enable=False) as cluster:
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            r = await wire.send("Unknown", b"x")
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            assert "Unknown" in (r.remark or "")
            assert r.ext_fields.get("MSG_REGION") == "DefaultRegion"
        finally:
            await client.close()


async def test_retry_topic_past_max_goes_to_dlq(wire: Wire) -> None:
    """A %RETRY% message with reconsumeTimes >= maxReconsumeTimes is stored in %DLQ%<group>."""
    r = await wire.send("%RETRY%G1", b"dead", reconsume_times=16, max_reconsume_times=16)
    assert r.code == ResponseCode.SUCCESS, r.remark
    (msg,) = await pull_all(wire, "%DLQ%G1")
    assert msg.body == b"dead"
    r = await wire.send("%RETRY%G1", b"alive", reconsume_times=1, max_reconsume_times=16)
    assert r.code == ResponseCode.SUCCESS
    (msg,) = await pull_all(wire, "%RETRY%G1")
    assert msg.body == b"alive"


async def test_delay_message_parked_in_schedule_topic(wire: Wire) -> None:
    """DELAY=3 goes to SCHEDULE_TOPIC_XXXX queue 2 with REAL_TOPIC/REAL_QID."""
    r = await wire.send("TopicD", b"later", properties={"DELAY": "3"}, queue_id=1)
    assert r.code == ResponseCode.SUCCESS
    (msg,) = await pull_all(wire, "SCHEDULE_TOPIC_XXXX", queue_id=2)
    assert msg.properties["REAL_TOPIC"] == "TopicD" and msg.properties["REAL_QID"] == "1"


@pytest.mark.parametrize(
    ("topic", "code", "fragment"),
    [
        ("bad topic!", ResponseCode.SYSTEM_ERROR, "illegal characters"),
        ("x" * 200, ResponseCode.SYSTEM_ERROR, "longer than"),
        ("SCHEDULE_TOPIC_XXXX", ResponseCode.NO_PERMISSION, "forbidden"),
    ],
)
async def test_bad_topic_gets_clear_error(wire: Wire, topic: str, code: int, fragment: str) -> None:
    """Invalid or forbidden topic names are refused with a code and a remark saying why."""
    r = await wire.send(topic, b"x")
    assert r.code == code
    assert fragment in (r.remark or "")


async def test_queue_id_out_of_range(wire: Wire) -> None:
    """queueId beyond the topic's queues is a SYSTEM_ERROR naming the queue."""
    await wire.create_topic("TopicQ", queues=2)
    r = await wire.send("TopicQ", b"x", queue_id=5)
    assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[5]" in (r.remark or "")


async def test_oversized_body_rejected_broker_keeps_serving(wire: Wire) -> None:
    """A body above max_message_size (4 MiB) gets MESSAGE_ILLEGAL; the next send works."""
    r = await wire.send("TopicBig", b"x" * (4 * 1024 * 1024 + 1), rpc_timeout=10)
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    assert "larger than the limit" in (r.remark or "")
    r = await wire.send("TopicBig", b"small")
    assert r.code == ResponseCode.SUCCESS


async def test_missing_header_field_named(wire: Wire) -> None:
    """A send without a required field names the field in the remark."""
    ext = wire.send_header("TopicH").to_v2_ext_fields()
    del ext["e"]
    r = await wire.invoke(RequestCode.SEND_MESSAGE_V2, ext, b"x")
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert "queueId" in (r.remark or "")


async def test_unknown_code_and_garbage_frame(wire: Wire, cluster: Cluster) -> None:
    """Unknown code -> REQUEST_CODE_NOT_SUPPORTED; a garbage frame closes only its own connection."""
    r = await wire.invoke(4242, {})
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    host, port = cluster.broker_addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(struct.pack(">ii", 12, 8) + b"{not json")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the broker
    writer.close()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(struct.pack(">i", 0x7FFFFFFF))  # oversized frame length
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    r = await wire.send("StillAlive", b"ok")
    assert r.code == ResponseCode.SUCCESS


async def test_transaction_half_message_stays_invisible(wire: Wire) -> None:
    """TRAN_MSG=true is stored as a half message: accepted, not on its topic (test_transactions_wire.py)."""
    r = await wire.send("TopicTx", b"x", properties={"TRAN_MSG": "true"})
    assert r.code == ResponseCode.SUCCESS
    assert (await wire.pull("TopicTx", 0)).code != ResponseCode.SUCCESS


async def test_update_and_create_topic_then_get_all(wire: Wire) -> None:
    """UPDATE_AND_CREATE_TOPIC persists a topic that GET_ALL_TOPIC_CONFIG lists."""
    await wire.create_topic("AdminTopic", queues=3)
    r = await wire.invoke(RequestCode.GET_ALL_TOPIC_CONFIG)
    assert r.code == ResponseCode.SUCCESS
    table = orjson.loads(r.body)["topicConfigTable"]
    assert table["AdminTopic"]["readQueueNums"] == 3
    assert table["TBW102"]["perm"] == 7
    assert table["SCHEDULE_TOPIC_XXXX"]["readQueueNums"] == 18


def test_props_roundtrip_helper() -> None:
    """string_to_properties tolerates the C++ trailing separator (sanity check for the tests above)."""
    assert string_to_properties("a\x01b\x02") == {"a": "b"}


async def test_topics_created_back_to_back_are_both_routable(wire: Wire) -> None:
    """Two topics created in quick succession both get a name-server route without the 30 s timer."""
    from tidemq.protocol.headers import GetRouteInfoRequestHeader

    # The second create lands while the registration triggered by the first is still in flight.
    await wire.create_topic("BackToBackA")
    await wire.create_topic("BackToBackB")
    for topic in ("BackToBackA", "BackToBackB"):
        deadline = time.monotonic() + 5.0
        while True:
            request = RemotingCommand.create_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext_fields()
            )
            response = await wire.client.invoke(wire.cluster.namesrv_addr, request, 3.0)
            if response.code == ResponseCode.SUCCESS:
                break
            assert time.monotonic() < deadline, f"no route for {topic}: {response.remark}"
            await asyncio.sleep(0.05)
