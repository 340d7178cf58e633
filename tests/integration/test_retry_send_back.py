"""CONSUMER_SEND_MSG_BACK (36) on the wire: retry copy, delay levels, DLQ rules, bad requests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import ConsumerSendMsgBackRequestHeader
from tidemq.protocol.message import MessageExt
from tidemq.protocol.message_codec import decode_messages, decode_offset_msg_id
from tidemq.remoting import RemotingClient
from tidemq.testing import Cluster, run_cluster

from .conftest import Wire

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def stored(cluster: Cluster, topic: str, queue_id: int) -> list[MessageExt]:
    result = cluster.broker.store.get_message("t", topic, queue_id, 0, 32, None)
    return [m for buf in result.message_buffers for m in decode_messages(buf)]


async def send_one(wire: Wire, topic: str = "SbTopic", **props: str) -> tuple[int, str]:
    """Send one message; returns (commit-log offset, offset msg id)."""
    r = await wire.send(topic, b"payload", properties={"TAGS": "TagA", "UNIQ_KEY": "U1", **props})
    assert r.code == ResponseCode.SUCCESS, r.remark
    msg_id = r.ext_fields["msgId"]
    return decode_offset_msg_id(msg_id)[1], msg_id


async def send_back(
    wire: Wire, offset: int, group: str = "G", delay_level: int = 0, version: int = 409, **kw: object
) -> RemotingCommand:
    header = ConsumerSendMsgBackRequestHeader(offset=offset, group=group, delay_level=delay_level, **kw)  # type: ignore[arg-type]
    request = RemotingCommand.create_request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
    request.version = version
    return await wire.client.invoke(wire.addr, request, 5.0)


async def test_send_back_parks_a_retry_copy_at_level_3_plus_reconsume_times(
    wire: Wire, cluster: Cluster
) -> None:
    offset, msg_id = await send_one(wire)
    r = await send_back(wire, offset, origin_msg_id="U1", origin_topic="SbTopic")
    assert r.code == ResponseCode.SUCCESS, r.remark
    (parked,) = stored(cluster, SCHEDULE, 2)  # level 3 -> queue 2
    assert parked.properties["REAL_TOPIC"] == "%RETRY%G"
    assert parked.properties["RETRY_TOPIC"] == "SbTopic"
    assert parked.properties["ORIGIN_MESSAGE_ID"] == msg_id
    assert parked.properties["DELAY"] == "3"
    assert parked.reconsume_times == 1
    assert parked.body == b"payload" and parked.tags == "TagA" and parked.unique_key == "U1"
    assert cluster.broker.topic_config_manager.select_topic_config("%RETRY%G") is not None

    # the retry copy failing again goes one level further, keeping ORIGIN_MESSAGE_ID and RETRY_TOPIC
    r = await send_back(wire, parked.commit_log_offset)
    assert r.code == ResponseCode.SUCCESS, r.remark
    (again,) = stored(cluster, SCHEDULE, 3)  # 3 + 1 = level 4
    assert again.reconsume_times == 2
    assert again.properties["ORIGIN_MESSAGE_ID"] == msg_id
    assert again.properties["RETRY_TOPIC"] == "SbTopic"


async def test_requested_delay_level_is_used(wire: Wire, cluster: Cluster) -> None:
    offset, _ = await send_one(wire)
    assert (await send_back(wire, offset, delay_level=5)).code == ResponseCode.SUCCESS
    assert [m.properties["DELAY"] for m in stored(cluster, SCHEDULE, 4)] == ["5"]


async def test_negative_delay_level_goes_straight_to_dlq(wire: Wire, cluster: Cluster) -> None:
    offset, msg_id = await send_one(wire)
    assert (await send_back(wire, offset, delay_level=-1)).code == ResponseCode.SUCCESS
    (dead,) = stored(cluster, "%DLQ%G", 0)
    assert "DELAY" not in dead.properties and dead.properties["ORIGIN_MESSAGE_ID"] == msg_id
    assert dead.reconsume_times == 1
    tc = cluster.broker.topic_config_manager.select_topic_config("%DLQ%G")
    assert tc is not None and tc.read_queue_nums == 1 and tc.perm & 4  # readable: a consumer can drain it


async def test_max_reconsume_times_from_header_only_for_new_clients(wire: Wire, cluster: Cluster) -> None:
    offset, _ = await send_one(wire)
    # C++ (version 63): header value ignored, group's 16 applies -> retry
    assert (await send_back(wire, offset, version=63, max_reconsume_times=0)).code == ResponseCode.SUCCESS
    assert len(stored(cluster, SCHEDULE, 2)) == 1
    assert stored(cluster, "%DLQ%G", 0) == []
    # Java >= 3.4.9: honoured -> reconsumeTimes 0 >= 0 -> DLQ
    assert (await send_back(wire, offset, version=409, max_reconsume_times=0)).code == ResponseCode.SUCCESS
    assert len(stored(cluster, "%DLQ%G", 0)) == 1


async def test_reconsume_times_at_group_max_goes_to_dlq(wire: Wire, cluster: Cluster) -> None:
    r = await wire.send("%RETRY%G", b"x", properties={"TAGS": "a"}, reconsume_times=5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    offset = decode_offset_msg_id(r.ext_fields["msgId"])[1]
    sgc = cluster.broker.subscription_group_manager.find_subscription_group_config("G")
    assert sgc is not None
    sgc.retry_max_times = 5
    assert (await send_back(wire, offset)).code == ResponseCode.SUCCESS
    (dead,) = stored(cluster, "%DLQ%G", 0)
    assert dead.reconsume_times == 6


async def test_unknown_offset_and_bad_header_get_clear_errors(wire: Wire) -> None:
    r = await send_back(wire, 987654)
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "look message by offset failed, 987654"
    request = RemotingCommand.create_request(
        RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": "0", "delayLevel": "0"}
    )
    r = await wire.client.invoke(wire.addr, request, 5.0)
    assert r.code == ResponseCode.SYSTEM_ERROR and "group" in (r.remark or "")


@pytest.fixture
async def strict_cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with run_cluster(tmp_path, auto_create_subscription_group=False) as c:
        yield c


async def test_unknown_group_without_auto_create(strict_cluster: Cluster) -> None:
    client = RemotingClient()
    try:
        wire = Wire(client, strict_cluster)
        offset, _ = await send_one(wire)
        r = await send_back(wire, offset, group="NoSuchGroup")
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert "NoSuchGroup" in (r.remark or "")
    finally:
        await client.close()
