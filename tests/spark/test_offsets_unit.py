"""Pure parts of the Spark connector: offset JSON, rate limiting, partition splitting and grouping."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.protocol.message import MessageQueue
from tidemq.spark.offsets import (
    OffsetError,
    QueueRange,
    dumps_offsets,
    from_offset_json,
    group_ranges,
    rate_limit,
    split_ranges,
    to_offset_json,
)

MQ = [MessageQueue("T", "broker-a", i) for i in range(12)]


def test_offset_json_is_sorted_and_round_trips() -> None:
    offsets = {MQ[10]: 5, MQ[2]: 7, MessageQueue("A", "b", 0): 1}
    obj = to_offset_json(offsets)
    assert list(obj) == ["A", "T"]
    assert list(obj["T"]) == sorted(obj["T"])
    assert from_offset_json(json.loads(json.dumps(obj))) == offsets
    # the same mapping in any insertion order gives the same string (Spark compares strings)
    assert dumps_offsets(dict(reversed(list(offsets.items())))) == dumps_offsets(offsets)


def test_offset_json_accepts_nested_and_placeholders() -> None:
    parsed = from_offset_json('{"T": {"broker-a": {"0": -2, "1": 7}}, "U": {"b:3": -1}}')
    assert parsed == {MQ[0]: -2, MQ[1]: 7, MessageQueue("U", "b", 3): -1}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[1]", "JSON object"),
        ('{"T": 5}', "topic 'T'"),
        ('{"T": {"nocolon": 1}}', "brokerName:queueId"),
        ('{"T": {"b:0": "x"}}', "not an integer"),
        ('{"T": {"b:0": -7}}', "-2 = earliest"),
        ("{bad", "not valid JSON"),
    ],
)
def test_bad_offsets_say_what_is_wrong(text: str, needle: str) -> None:
    with pytest.raises(OffsetError, match=needle):
        from_offset_json(text, what="startingOffsets")


def test_rate_limit_is_proportional_and_never_starves() -> None:
    start = {MQ[0]: 0, MQ[1]: 0, MQ[2]: 10}
    latest = {MQ[0]: 1000, MQ[1]: 100, MQ[2]: 11}
    end = rate_limit(start, latest, 110)
    assert end[MQ[0]] == 99  # floor(110 * 1000/1101)
    assert end[MQ[1]] == 9
    assert end[MQ[2]] == 11  # share < 1 rounds up to 1
    assert rate_limit(start, latest, 10_000) == latest


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=8),
    st.integers(1, 3000),
)
def test_rate_limit_properties(pairs: list[tuple[int, int]], limit: int) -> None:
    start = {MQ[i]: s for i, (s, _) in enumerate(pairs)}
    latest = {MQ[i]: s + n for i, (s, n) in enumerate(pairs)}
    end = rate_limit(start, latest, limit)
    for mq in latest:
        assert start[mq] <= end[mq] <= latest[mq]
    admitted = sum(end[mq] - start[mq] for mq in latest)
    backlog = sum(latest[mq] - start[mq] for mq in latest)
    assert admitted <= max(limit, 0) + len(pairs)
    assert admitted == backlog or admitted >= min(backlog, limit) - len(pairs)


def test_split_ranges_one_per_queue_by_default() -> None:
    ranges = [QueueRange(MQ[1], 0, 10), QueueRange(MQ[0], 5, 5), QueueRange(MQ[2], 3, 9)]
    assert split_ranges(ranges, None) == [ranges[0], ranges[2]]


@given(st.lists(st.integers(0, 500), min_size=1, max_size=6), st.integers(1, 40))
def test_split_ranges_cover_exactly(sizes: list[int], min_partitions: int) -> None:
    ranges = [QueueRange(MQ[i], 100, 100 + n) for i, n in enumerate(sizes)]
    parts = split_ranges(ranges, min_partitions)
    for r in ranges:
        mine = [p for p in parts if p.mq == r.mq]
        covered = [o for p in mine for o in range(p.start, p.end)]
        assert covered == list(range(r.start, r.end))
        assert all(p.size > 0 for p in mine)
    nonempty = sum(1 for n in sizes if n)
    if nonempty and min_partitions > nonempty:
        assert len(parts) >= min(min_partitions, sum(sizes)) // 2


def test_small_ranges_share_partitions_large_ones_stay_alone() -> None:
    small = [QueueRange(MQ[i], 0, 6_250) for i in range(8)]  # a 50,000-message trigger over 8 queues
    assert [len(g) for g in group_ranges(small)] == [4, 4]
    big = [QueueRange(MQ[i], 0, 250_000) for i in range(4)]
    assert group_ranges(big) == [[r] for r in big]
    mixed = [QueueRange(MQ[0], 0, 10), QueueRange(MQ[1], 0, 30_000), QueueRange(MQ[2], 0, 20)]
    assert group_ranges(mixed) == [[mixed[1]], [mixed[0], mixed[2]]]


@given(st.lists(st.integers(1, 60_000), max_size=12), st.integers(1, 50_000))
def test_grouped_ranges_keep_every_range_exactly_once(sizes: list[int], min_rows: int) -> None:
    ranges = [QueueRange(MQ[i], 0, n) for i, n in enumerate(sizes)]
    groups = group_ranges(ranges, min_rows)
    assert sorted((r for g in groups for r in g), key=lambda r: r.mq) == ranges
    assert all(sum(r.size for r in g) >= min_rows for g in groups[:-1] if len(g) > 1)
