"""compute_pull_from_where decisions (protocol.md 7.5) and consume-timestamp parsing."""

from __future__ import annotations

import pytest

from tidemq.client.consumer.listener import PullFromWhere, decide_pull_from_where, parse_consume_timestamp
from tidemq.errors import ClientError

LAST, FIRST, TS = "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"


@pytest.mark.parametrize(
    ("cfw", "last", "retry", "expected"),
    [
        (LAST, 42, False, PullFromWhere("offset", 42)),
        (LAST, -1, False, PullFromWhere("max_offset")),
        (LAST, -1, True, PullFromWhere("offset", 0)),
        (LAST, -2, False, PullFromWhere("skip")),
        ("CONSUME_FROM_MAX_OFFSET", -1, False, PullFromWhere("max_offset")),
        (FIRST, 7, False, PullFromWhere("offset", 7)),
        (FIRST, -1, False, PullFromWhere("offset", 0)),
        (FIRST, -1, True, PullFromWhere("offset", 0)),
        (FIRST, -2, False, PullFromWhere("skip")),
        (TS, 3, False, PullFromWhere("offset", 3)),
        (TS, -1, False, PullFromWhere("timestamp")),
        (TS, -1, True, PullFromWhere("max_offset")),
        (TS, -2, True, PullFromWhere("skip")),
    ],
)
def test_decide_pull_from_where_table(cfw: str, last: int, retry: bool, expected: PullFromWhere) -> None:
    """Each row of RebalancePushImpl.computePullFromWhere."""
    assert decide_pull_from_where(cfw, last, is_retry_topic=retry) == expected


def test_bad_inputs_are_clear_errors() -> None:
    """Unknown ConsumeFromWhere / malformed timestamps raise ClientError naming the value."""
    with pytest.raises(ClientError, match="NOPE"):
        decide_pull_from_where("NOPE", 0, is_retry_topic=False)
    with pytest.raises(ClientError, match="yyyyMMddHHmmss"):
        parse_consume_timestamp("2024-01-01")
    assert parse_consume_timestamp("20240101000000") > 0
