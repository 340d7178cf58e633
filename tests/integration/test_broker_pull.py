"""PULL_MESSAGE against a real broker: the status table of protocol.md §3.4, subscriptions, long polling."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.filter import parse_tags, tags_hash
from tidemq.protocol.message_codec import decode_messages
from tidemq.remoting import RemotingClient
from tidemq.testing import Cluster, run_cluster

from .conftest import Wire

HEADER_FIELDS = {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}


def heartbeat_body(client_id: str, group: str, topic: str, sub: str = "*", sub_version: int = 1000) -> bytes:
    """A Java-style HeartbeatData subscribing ``group`` to ``topic``."""
    return orjson.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "consumeType": "CONSUME_PASSIVELY",
                    "groupName": group,
                    "messageModel": "CLUSTERING",
                    "subscriptionDataSet": [
                        {
                            "classFilterMode": False,
                            "codeSet": [tags_hash(t) for t in parse_tags(sub)],
                            "expressionType": "TAG",
                            "subString": sub,
                            "subVersion": sub_version,
                            "tagsSet": parse_tags(sub),
                            "topic": topic,
                        }
                    ],
                    "unitMode": False,
                }
            ],
            "producerDataSet": [],
        }
    )


def offsets(r) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    """(nextBeginOffset, minOffset, maxOffset) of a pull response; every field must be present."""
    assert set(r.ext_fields) >= HEADER_FIELDS, r.ext_fields
    assert r.ext_fields["suggestWhichBrokerId"] == "0"
    return (
        int(r.ext_fields["nextBeginOffset"]),
        int(r.ext_fields["minOffset"]),
        int(r.ext_fields["maxOffset"]),
    )


async def fill(wire: Wire, topic: str, n: int, *, tags: str | None = None, size: int = 10) -> None:
    for i in range(n):
        props = {"TAGS": tags} if tags else None
        r = await wire.send(topic, (b"%06d" % i).ljust(size, b"."), properties=props)
        assert r.code == ResponseCode.SUCCESS, r.remark


async def held_pull(wire: Wire, cluster: Cluster, topic: str, offset: int, **kw: Any) -> asyncio.Future[Any]:
    """Start a long-polling pull (suspend 20 s) and wait until the broker holds it."""
    pull = asyncio.ensure_future(wire.pull(topic, offset, suspend_ms=20_000, rpc_timeout=30, **kw))
    hold = cluster.broker.pull_request_hold_service
    deadline = time.monotonic() + 5
    while hold.held_count == 0:
        assert time.monotonic() < deadline, "pull was never held"
        await asyncio.sleep(0.01)
    assert not pull.done()
    return pull


async def send_batch_on_another_connection(cluster: Cluster, topic: str, msgs: list[Any]) -> None:
    """SEND_BATCH_MESSAGE of ``msgs`` from a second client, as a producer next to the consumer."""
    other = RemotingClient()
    try:
        assert (await Wire(other, cluster).send_batch(topic, msgs)).code == ResponseCode.SUCCESS
    finally:
        await other.close()


def answers_from_put(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Spy on ``MessageStore.get_message_from_put``: the list gets, per call, whether it answered."""
    from tidemq.store.message_store import MessageStore

    answered: list[bool] = []
    real = MessageStore.get_message_from_put

    def spy(self: MessageStore, *args: Any) -> Any:
        result = real(self, *args)
        answered.append(result is not None)
        return result

    monkeypatch.setattr(MessageStore, "get_message_from_put", spy)
    return answered


async def test_found_returns_messages_and_next_offset(wire: Wire) -> None:
    """FOUND: SUCCESS, remark FOUND, body = the records, nextBeginOffset = offset + count."""
    await fill(wire, "PT", 5)
    r = await wire.pull("PT", 1, max_msg_nums=3)
    assert r.code == ResponseCode.SUCCESS and r.remark == "FOUND"
    assert offsets(r) == (4, 0, 5)
    assert [m.queue_offset for m in decode_messages(r.body)] == [1, 2, 3]


async def test_status_table_without_data(wire: Wire) -> None:
    """Empty/missing queues and offsets at or past max give the codes of the §3.4 table."""
    await wire.create_topic("Empty", 4)
    r = await wire.pull("Empty", 0)  # no queue yet, offset 0
    assert r.code == ResponseCode.PULL_NOT_FOUND and offsets(r)[0] == 0
    r = await wire.pull("Empty", 5)  # no queue, offset != 0
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and offsets(r)[0] == 0
    await fill(wire, "Empty", 3)
    r = await wire.pull("Empty", 3)  # offset == max
    assert r.code == ResponseCode.PULL_NOT_FOUND and r.remark == "OFFSET_OVERFLOW_ONE"
    assert offsets(r) == (3, 0, 3)
    r = await wire.pull("Empty", 10)  # offset > max: RocketMQ corrects to min when min == 0, else max
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.remark == "OFFSET_OVERFLOW_BADLY"
    assert offsets(r)[0] == 0


async def test_tag_filter_no_match_retries_immediately(wire: Wire) -> None:
    """Entries scanned but none matching the tag: PULL_RETRY_IMMEDIATELY with nextBeginOffset moved on."""
    await fill(wire, "Tagged", 4, tags="TagC")
    r = await wire.pull("Tagged", 0, subscription="TagA || TagB")
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.remark == "NO_MATCHED_MESSAGE"
    assert offsets(r)[0] == 4
    await fill(wire, "Tagged", 2, tags="TagB")
    r = await wire.pull("Tagged", 4, subscription="TagA || TagB")
    assert r.code == ResponseCode.SUCCESS
    assert {m.tags for m in decode_messages(r.body)} == {"TagB"}


async def test_offset_too_small_after_retention(tmp_path: Path) -> None:
    """After old commit-log segments are deleted, pulling below the min offset is PULL_OFFSET_MOVED to min."""
    async with run_cluster(tmp_path, mapped_file_size_commit_log=4096, file_reserved_time=0) as cluster:
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            await fill(wire, "Old", 20, size=1000)
            r = await wire.invoke(RequestCode.DELETE_EXPIRED_COMMITLOG)
            assert r.code == ResponseCode.SUCCESS
            r = await wire.invoke(RequestCode.GET_MIN_OFFSET, {"topic": "Old", "queueId": "0"})
            min_offset = int(r.ext_fields["offset"])
            assert min_offset > 0
            r = await wire.pull("Old", 0)
            assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.remark == "OFFSET_TOO_SMALL"
            assert offsets(r)[0] == min_offset
            r = await wire.pull("Old", 100)  # past max with min > 0: corrected to max
            assert r.code == ResponseCode.PULL_OFFSET_MOVED and offsets(r)[0] == 20
            r = await wire.invoke(
                RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "NewG", "topic": "Old", "queueId": "0"}
            )
            assert r.code == ResponseCode.QUERY_NOT_FOUND
        finally:
            await client.close()


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"queue_id": 9}, ResponseCode.SYSTEM_ERROR),
        ({"subscription": None}, ResponseCode.SUBSCRIPTION_NOT_EXIST),
    ],
)
async def test_request_errors(wire: Wire, kwargs: dict, code: int) -> None:  # type: ignore[type-arg]
    """Bad queue id -> SYSTEM_ERROR; no subscription and no heartbeat -> SUBSCRIPTION_NOT_EXIST."""
    await wire.create_topic("Err", 4)
    r = await wire.pull("Err", 0, **kwargs)
    assert r.code == code
    assert r.remark
    offsets(r)


async def test_unknown_topic_and_missing_group(tmp_path: Path) -> None:
    """Unknown topic -> TOPIC_NOT_EXIST; unknown group with auto-create off -> SUBSCRIPTION_GROUP_NOT_EXIST."""
    async with run_cluster(tmp_path, auto_create_subscription_group=False) as cluster:
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            r = await wire.pull("Nope", 0, group="TOOLS_CONSUMER")
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            r = await wire.pull("Nope", 0, group="NoSuchGroup")
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        finally:
            await client.close()


async def test_subscription_from_heartbeat(wire: Wire) -> None:
    """Without FLAG_SUBSCRIPTION the heartbeat's subscription filters; a newer subVersion is NOT_LATEST."""
    await fill(wire, "HB", 2, tags="TagA")
    await fill(wire, "HB", 2, tags="TagB")
    r = await wire.invoke(RequestCode.HEART_BEAT, body=heartbeat_body("c1", "HBG", "HB", "TagB", 1000))
    assert r.code == ResponseCode.SUCCESS, r.remark
    r = await wire.pull("HB", 0, group="HBG", subscription=None, sub_version=1000)
    assert r.code == ResponseCode.SUCCESS
    assert [m.tags for m in decode_messages(r.body)] == ["TagB", "TagB"]
    r = await wire.pull("HB", 0, group="HBG", subscription=None, sub_version=2000)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    r = await wire.pull("Other", 0, group="HBG", subscription=None)
    assert r.code in (ResponseCode.SUBSCRIPTION_NOT_EXIST, ResponseCode.TOPIC_NOT_EXIST)


async def test_commit_offset_piggy_backed(wire: Wire) -> None:
    """FLAG_COMMIT_OFFSET stores commitOffset for the group, even when the pull finds nothing."""
    await fill(wire, "CO", 3)
    r = await wire.pull("CO", 3, group="COG", commit_offset=2)
    assert r.code == ResponseCode.PULL_NOT_FOUND
    r = await wire.invoke(
        RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "COG", "topic": "CO", "queueId": "0"}
    )
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "2"


async def test_long_poll_answers_when_message_arrives(wire: Wire, cluster: Cluster) -> None:
    """A held pull (suspend 20 s) is answered with the new message as soon as it is sent."""
    await wire.create_topic("LP", 4)
    start = time.monotonic()
    pull = asyncio.ensure_future(wire.pull("LP", 0, suspend_ms=20_000, rpc_timeout=30))
    deadline = time.monotonic() + 5
    while cluster.broker.pull_request_hold_service.held_count == 0:
        assert time.monotonic() < deadline, "pull was never held"
        await asyncio.sleep(0.01)
    assert not pull.done()
    other = RemotingClient()
    try:
        sender = Wire(other, cluster)
        r = await sender.send("LP", b"wake up")
        assert r.code == ResponseCode.SUCCESS
    finally:
        await other.close()
    r = await asyncio.wait_for(pull, 10)
    elapsed = time.monotonic() - start
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(r.body)] == [b"wake up"]
    assert elapsed < 10, f"held pull answered after {elapsed:.1f}s, suspend was 20 s"


async def test_long_poll_times_out_with_not_found(wire: Wire) -> None:
    """A held pull with nothing arriving answers PULL_NOT_FOUND after its suspend time, offset unchanged."""
    await fill(wire, "LPT", 1)
    start = time.monotonic()
    r = await wire.pull("LPT", 1, suspend_ms=300, rpc_timeout=10)
    elapsed = time.monotonic() - start
    assert r.code == ResponseCode.PULL_NOT_FOUND
    assert offsets(r)[0] == 1
    assert 0.25 <= elapsed < 5


async def test_long_poll_ignores_non_matching_tag(wire: Wire, cluster: Cluster) -> None:
    """A held pull filtered on TagA is not woken by a TagB message; a TagA message wakes it."""
    await wire.create_topic("LPF", 1)
    pull = asyncio.ensure_future(wire.pull("LPF", 0, suspend_ms=20_000, subscription="TagA", rpc_timeout=30))
    hold = cluster.broker.pull_request_hold_service
    deadline = time.monotonic() + 5
    while hold.held_count == 0:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    other = RemotingClient()
    try:
        sender = Wire(other, cluster)
        assert (await sender.send("LPF", b"b", properties={"TAGS": "TagB"})).code == ResponseCode.SUCCESS
        assert hold.held_count == 1 and not pull.done()
        assert (await sender.send("LPF", b"a", properties={"TAGS": "TagA"})).code == ResponseCode.SUCCESS
    finally:
        await other.close()
    r = await asyncio.wait_for(pull, 10)
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(r.body)] == [b"a"]


@pytest.mark.parametrize(
    ("max_msg_nums", "subscription", "max_bytes"),
    [(32, "*", None), (2, "*", None), (32, "TagA || TagB", None), (32, "*", 400)],
)
async def test_held_pull_is_answered_from_the_put_as_a_pull_would_be(
    wire: Wire,
    cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    max_msg_nums: int,
    subscription: str,
    max_bytes: int | None,
) -> None:
    """A pull held at the queue's end is answered from the put's own records, before their
    consume-queue entries are written: the same records, offsets and limits (count, bytes) as a
    pull of that offset made afterwards."""
    from tidemq.protocol.message import Message

    if max_bytes is not None:
        monkeypatch.setattr(cluster.broker.store.config, "max_transfer_bytes_on_message_in_memory", max_bytes)
    answered = answers_from_put(monkeypatch)
    await wire.create_topic("LPP", 1)
    await fill(wire, "LPP", 2, tags="TagA")
    kw: dict[str, Any] = {"subscription": subscription, "max_msg_nums": max_msg_nums}
    pull = await held_pull(wire, cluster, "LPP", 2, **kw)
    batch = [Message("LPP", b"m%d" % i * 50, tags="TagB" if i == 1 else "TagA") for i in range(3)]
    await send_batch_on_another_connection(cluster, "LPP", batch)
    r = await asyncio.wait_for(pull, 10)
    assert answered == [True]
    again = await wire.pull("LPP", 2, **kw)
    assert r.code == again.code == ResponseCode.SUCCESS
    assert offsets(r) == offsets(again)
    assert r.body == again.body
    got = decode_messages(r.body)
    expected = min(3, max_msg_nums) if max_bytes is None else 1
    assert [m.queue_offset for m in got] == list(range(2, 2 + expected))
    assert [m.body for m in got] == [m.body for m in batch[:expected]]


async def test_held_pull_on_a_new_queue_is_answered_from_its_first_put(
    wire: Wire, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull held on a queue nothing was ever written to (no consume queue yet) is answered from the
    first put's records, as a pull of offset 0 made afterwards is: the first message of a new queue
    does not wait for its consume queue's file to be created."""
    from tidemq.protocol.message import Message

    answered = answers_from_put(monkeypatch)
    await wire.create_topic("LPN", 1)
    pull = await held_pull(wire, cluster, "LPN", 0)
    assert cluster.broker.store.find_consume_queue("LPN", 0) is None
    await send_batch_on_another_connection(cluster, "LPN", [Message("LPN", b"first")])
    r = await asyncio.wait_for(pull, 10)
    assert answered == [True]
    again = await wire.pull("LPN", 0)
    assert r.code == again.code == ResponseCode.SUCCESS
    assert offsets(r) == offsets(again)
    assert [(m.body, m.queue_offset) for m in decode_messages(r.body)] == [(b"first", 0)]


async def test_held_pull_waits_for_the_dispatch_when_the_put_has_a_rejected_tag(
    wire: Wire, cluster: Cluster
) -> None:
    """A batch whose records the held pull's tag filter partly rejects is not answered from the put;
    the dispatch then wakes the pull, which skips the rejected record as any pull does."""
    from tidemq.protocol.message import Message

    await wire.create_topic("LPR", 1)
    pull = await held_pull(wire, cluster, "LPR", 0, subscription="TagA")
    batch = [Message("LPR", b"b", tags="TagB"), Message("LPR", b"a", tags="TagA")]
    await send_batch_on_another_connection(cluster, "LPR", batch)
    r = await asyncio.wait_for(pull, 10)
    assert r.code == ResponseCode.SUCCESS
    assert [(m.body, m.queue_offset) for m in decode_messages(r.body)] == [(b"a", 1)]
    assert offsets(r)[0] == 2
