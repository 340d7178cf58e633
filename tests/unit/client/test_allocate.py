"""Allocation strategies: golden results from the Java algorithms and group-wide properties."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.client.consumer.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    md5_hash,
)
from tidemq.errors import ClientError
from tidemq.protocol.message import MessageQueue


def queues(n: int, topic: str = "T", broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def ids(share: list[MessageQueue]) -> list[int]:
    return [mq.queue_id for mq in share]


def shares(
    strategy: AllocateMessageQueueStrategy, mqs: list[MessageQueue], cids: list[str]
) -> list[list[int]]:
    return [ids(strategy.allocate("G", cid, mqs, cids)) for cid in sorted(cids)]


@pytest.mark.parametrize(
    ("n", "c", "expected"),
    [
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (8, 4, [[0, 1], [2, 3], [4, 5], [6, 7]]),
        (4, 4, [[0], [1], [2], [3]]),
        (3, 5, [[0], [1], [2], [], []]),
        (10, 3, [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]),
        (5, 2, [[0, 1, 2], [3, 4]]),
        (1, 1, [[0]]),
    ],
)
def test_averagely_matches_java(n: int, c: int, expected: list[list[int]]) -> None:
    """AllocateMessageQueueAveragely gives contiguous ranges, extra queues to the first clients."""
    cids = [f"c{i}" for i in range(c)]
    assert shares(AllocateMessageQueueAveragely(), queues(n), cids) == expected


@pytest.mark.parametrize(
    ("n", "c", "expected"),
    [
        (8, 3, [[0, 3, 6], [1, 4, 7], [2, 5]]),
        (3, 5, [[0], [1], [2], [], []]),
        (4, 2, [[0, 2], [1, 3]]),
    ],
)
def test_averagely_by_circle_matches_java(n: int, c: int, expected: list[list[int]]) -> None:
    """AveragelyByCircle deals queues round-robin."""
    cids = [f"c{i}" for i in range(c)]
    assert shares(AllocateMessageQueueAveragelyByCircle(), queues(n), cids) == expected


def test_by_config_returns_the_configured_list() -> None:
    """ByConfig ignores the group and returns what it was given."""
    fixed = [MessageQueue("X", "b", 5)]
    assert AllocateMessageQueueByConfig(fixed).allocate("G", "c0", queues(8), ["c0", "c1"]) == fixed


def test_by_machine_room_matches_java() -> None:
    """ByMachineRoom keeps only room@broker queues in the configured rooms, blocks plus remainder."""
    mqs = queues(4, broker="room1@broker-a") + queues(3, broker="room2@broker-b") + queues(2, broker="plain")
    strategy = AllocateMessageQueueByMachineRoom({"room1"})
    # premq = room1@broker-a 0..3 (4 queues), 3 clients: mod=1, rem=1
    got = [strategy.allocate("G", cid, mqs, ["a", "b", "c"]) for cid in ["a", "b", "c"]]
    assert [[(mq.broker_name, mq.queue_id) for mq in s] for s in got] == [
        [("room1@broker-a", 0), ("room1@broker-a", 3)],
        [("room1@broker-a", 1)],
        [("room1@broker-a", 2)],
    ]


def test_machine_room_nearby_gives_orphan_rooms_to_everyone() -> None:
    """Nearby: own room's queues to own room's consumers; rooms without consumers shared by all."""
    mqs = queues(2, broker="r1@a") + queues(2, broker="r2@b")
    strategy = AllocateMachineRoomNearby(
        AllocateMessageQueueAveragely(),
        room_of_queue=lambda mq: mq.broker_name.split("@")[0],
        room_of_client=lambda cid: cid.split("-")[0],
    )
    cids = ["r1-x", "r1-y"]
    got = {
        cid: sorted((mq.broker_name, mq.queue_id) for mq in strategy.allocate("G", cid, mqs, cids))
        for cid in cids
    }
    assert got == {"r1-x": [("r1@a", 0), ("r2@b", 0)], "r1-y": [("r1@a", 1), ("r2@b", 1)]}


def test_md5_hash_is_first_four_bytes_big_endian() -> None:
    """ConsistentHash's ring hash equals Java's MD5Hash (first 4 digest bytes, unsigned)."""
    assert md5_hash("") == 0xD41D8CD9
    assert md5_hash("c1-0") == int(hashlib.md5(b"c1-0").hexdigest()[:8], 16)


def test_consistent_hash_routes_each_queue_to_its_ring_successor() -> None:
    """A queue goes to the first virtual node at or after its hash, wrapping around."""
    mqs = queues(8)
    cids = ["10.0.0.1@1#a", "10.0.0.2@2#b", "10.0.0.3@3#c"]
    ring = sorted((md5_hash(f"{cid}-{k}"), cid) for cid in cids for k in range(10))
    expected: dict[str, list[int]] = {cid: [] for cid in cids}
    for mq in mqs:
        h = md5_hash(f"MessageQueue [topic=T, brokerName=broker-a, queueId={mq.queue_id}]")
        owner = next((cid for node, cid in ring if node >= h), ring[0][1])
        expected[owner].append(mq.queue_id)
    strategy = AllocateMessageQueueConsistentHash()
    assert {cid: ids(strategy.allocate("G", cid, mqs, cids)) for cid in cids} == expected


def test_client_not_in_group_gets_nothing_and_bad_input_is_an_error() -> None:
    """Unknown client id -> empty share; empty inputs raise ClientError."""
    strategy = AllocateMessageQueueAveragely()
    assert strategy.allocate("G", "zz", queues(4), ["a", "b"]) == []
    with pytest.raises(ClientError):
        strategy.allocate("G", "", queues(4), ["a"])
    with pytest.raises(ClientError):
        strategy.allocate("G", "a", [], ["a"])
    with pytest.raises(ClientError):
        strategy.allocate("G", "a", queues(4), [])


STRATEGIES = [
    AllocateMessageQueueAveragely(),
    AllocateMessageQueueAveragelyByCircle(),
    AllocateMessageQueueConsistentHash(),
    AllocateMessageQueueConsistentHash(virtual_node_cnt=3),
]

mq_lists = st.lists(
    st.builds(
        MessageQueue, st.sampled_from(["T", "U"]), st.sampled_from(["a", "b", "c"]), st.integers(0, 15)
    ),
    min_size=1,
    max_size=40,
    unique=True,
)
cid_lists = st.lists(st.text("abc123@#.", min_size=1, max_size=8), min_size=1, max_size=8, unique=True)


@pytest.mark.parametrize(
    "strategy", STRATEGIES, ids=lambda s: s.name + repr(getattr(s, "virtual_node_cnt", ""))
)
@given(mqs=mq_lists, cids=cid_lists, data=st.data())
def test_every_queue_to_exactly_one_client_whatever_the_order(
    strategy: AllocateMessageQueueStrategy, mqs: list[MessageQueue], cids: list[str], data: st.DataObject
) -> None:
    """Across all members each queue is owned exactly once; input order never changes the answer."""
    owners: dict[MessageQueue, list[str]] = {mq: [] for mq in mqs}
    for cid in cids:
        share = strategy.allocate("G", cid, mqs, cids)
        shuffled = strategy.allocate(
            "G", cid, data.draw(st.permutations(mqs)), data.draw(st.permutations(cids))
        )
        assert share == shuffled
        for mq in share:
            owners[mq].append(cid)
    assert all(len(o) == 1 for o in owners.values()), owners


@given(mqs=mq_lists, cids=cid_lists)
def test_averagely_shares_differ_by_at_most_one(mqs: list[MessageQueue], cids: list[str]) -> None:
    """Averagely balances: share sizes differ by at most one."""
    sizes = [len(AllocateMessageQueueAveragely().allocate("G", c, mqs, cids)) for c in cids]
    assert max(sizes) - min(sizes) <= 1


@given(
    mqs=st.lists(
        st.builds(MessageQueue, st.just("T"), st.sampled_from(["r1@a", "r2@b", "x"]), st.integers(0, 7)),
        min_size=1,
        max_size=24,
        unique=True,
    ),
    cids=cid_lists,
)
def test_machine_room_owns_each_room_queue_once(mqs: list[MessageQueue], cids: list[str]) -> None:
    """ByMachineRoom: every queue of a configured room is owned exactly once, others never."""
    strategy = AllocateMessageQueueByMachineRoom({"r1"})
    owned = [mq for cid in cids for mq in strategy.allocate("G", cid, mqs, cids)]
    assert sorted(owned) == sorted(mq for mq in mqs if mq.broker_name == "r1@a")
