"""Offsets and admin queries against a real broker (protocol.md §3.5, §3.6, §3.8)."""

from __future__ import annotations

import time

from tidemq.protocol.body import ConsumeStats, TopicStatsTable
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.headers import (
    GetConsumeStatsRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.message_codec import decode_messages, decode_offset_msg_id

from .conftest import Wire


async def query_offset(wire: Wire, group: str, topic: str, queue_id: int = 0) -> tuple[int, int | None]:
    h = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id)
    r = await wire.invoke(RequestCode.QUERY_CONSUMER_OFFSET, h.to_ext_fields())
    return r.code, int(r.ext_fields["offset"]) if "offset" in r.ext_fields else None


async def update_offset(wire: Wire, group: str, topic: str, queue_id: int, offset: int) -> None:
    h = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
    )
    r = await wire.invoke(RequestCode.UPDATE_CONSUMER_OFFSET, h.to_ext_fields())
    assert r.code == ResponseCode.SUCCESS


async def test_query_consumer_offset_rules(wire: Wire) -> None:
    """No stored offset on a fresh queue -> 0 (the "young topic" rule); a committed one is returned."""
    assert await query_offset(wire, "G", "Fresh") == (ResponseCode.SUCCESS, 0)  # queue does not exist
    for i in range(3):
        assert (await wire.send("Fresh", b"%d" % i)).code == ResponseCode.SUCCESS
    assert await query_offset(wire, "G", "Fresh") == (ResponseCode.SUCCESS, 0)
    await update_offset(wire, "G", "Fresh", 0, 2)
    assert await query_offset(wire, "G", "Fresh") == (ResponseCode.SUCCESS, 2)
    await update_offset(wire, "G", "Fresh", 0, 1)  # smaller: still overwrites (RocketMQ logs it)
    assert await query_offset(wire, "G", "Fresh") == (ResponseCode.SUCCESS, 1)
    assert await query_offset(wire, "OtherGroup", "Fresh") == (ResponseCode.SUCCESS, 0)


async def test_max_min_offset_search_and_store_time(wire: Wire) -> None:
    """GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP and GET_EARLIEST_MSG_STORETIME."""
    ext = {"topic": "Q", "queueId": "0"}
    r = await wire.invoke(RequestCode.GET_MAX_OFFSET, ext)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"
    before = int(time.time() * 1000)
    for i in range(4):
        assert (await wire.send("Q", b"%d" % i)).code == ResponseCode.SUCCESS
    after = int(time.time() * 1000)
    r = await wire.invoke(RequestCode.GET_MAX_OFFSET, ext)
    assert r.ext_fields["offset"] == "4"
    r = await wire.invoke(RequestCode.GET_MIN_OFFSET, ext)
    assert r.ext_fields["offset"] == "0"
    r = await wire.invoke(RequestCode.GET_EARLIEST_MSG_STORETIME, ext)
    assert r.code == ResponseCode.SUCCESS and before <= int(r.ext_fields["timestamp"]) <= after
    r = await wire.invoke(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**ext, "timestamp": str(before - 60_000)})
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"
    r = await wire.invoke(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**ext, "timestamp": str(after + 60_000)})
    assert int(r.ext_fields["offset"]) in (3, 4)


async def test_view_message_by_id(wire: Wire) -> None:
    """VIEW_MESSAGE_BY_ID with the physical offset from the offset msg id returns that message."""
    await wire.send("V", b"first")
    r = await wire.send("V", b"second", properties={"TAGS": "t"})
    _, phy = decode_offset_msg_id(r.ext_fields["msgId"])
    v = await wire.invoke(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phy)})
    assert v.code == ResponseCode.SUCCESS
    (msg,) = decode_messages(v.body)
    assert msg.body == b"second" and msg.tags == "t" and msg.commit_log_offset == phy
    v = await wire.invoke(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(10**12)})
    assert v.code == ResponseCode.SYSTEM_ERROR and "can not find message" in (v.remark or "")


async def test_get_consume_stats(wire: Wire) -> None:
    """GET_CONSUME_STATS: broker max offset and committed offset for each read queue."""
    await wire.create_topic("CS", 2)
    for i in range(5):
        assert (await wire.send("CS", b"%d" % i, queue_id=i % 2)).code == ResponseCode.SUCCESS
    await update_offset(wire, "CSG", "CS", 0, 2)
    for topic in ("CS", None):  # explicit topic, and blank = every topic with offsets
        h = GetConsumeStatsRequestHeader(consumer_group="CSG", topic=topic)
        r = await wire.invoke(RequestCode.GET_CONSUME_STATS, h.to_ext_fields())
        assert r.code == ResponseCode.SUCCESS, r.remark
        stats = ConsumeStats.decode(r.body)
        q0 = stats.offset_table[MessageQueue("CS", "broker-a", 0)]
        q1 = stats.offset_table[MessageQueue("CS", "broker-a", 1)]
        assert (q0.broker_offset, q0.consumer_offset) == (3, 2)
        assert (q1.broker_offset, q1.consumer_offset) == (2, 0)
        assert q0.last_timestamp > 0
    h = GetConsumeStatsRequestHeader(consumer_group="CSG", topic="NoSuchTopic")
    r = await wire.invoke(RequestCode.GET_CONSUME_STATS, h.to_ext_fields())
    assert r.code == ResponseCode.TOPIC_NOT_EXIST


async def test_get_topic_stats_info(wire: Wire) -> None:
    """GET_TOPIC_STATS_INFO: min/max offsets per write queue; unknown topic -> TOPIC_NOT_EXIST."""
    await wire.create_topic("TS", 2)
    for _ in range(3):
        await wire.send("TS", b"x", queue_id=1)
    r = await wire.invoke(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "TS"})
    assert r.code == ResponseCode.SUCCESS
    table = TopicStatsTable.decode(r.body)
    assert table.offset_table[MessageQueue("TS", "broker-a", 1)].max_offset == 3
    assert table.offset_table[MessageQueue("TS", "broker-a", 0)].max_offset == 0
    r = await wire.invoke(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Missing"})
    assert r.code == ResponseCode.TOPIC_NOT_EXIST


async def test_offset_requests_with_bad_header(wire: Wire) -> None:
    """A missing header field answers SYSTEM_ERROR naming it."""
    r = await wire.invoke(RequestCode.GET_MAX_OFFSET, {"topic": "Q"})
    assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in (r.remark or "")
