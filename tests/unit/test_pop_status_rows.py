"""``popGroupStats`` of GET_BROKER_RUNTIME_INFO as the admin client reads it (tidemq.admin.pop_status)."""

from __future__ import annotations

import orjson

from tidemq.admin.pop_status import RUNTIME_KEY, PopGroupRow, pop_rows_of
from tidemq.broker.pop import runtime as broker_side


def test_rows_round_trip_and_bad_values() -> None:
    assert RUNTIME_KEY == broker_side.RUNTIME_KEY
    row = dict(zip(broker_side.FIELDS, ("g", "T", 1, 3, 1, 1, 0), strict=True))
    text = orjson.dumps([row, {"group": "h", "topic": "U", "popped": "x"}, "junk"]).decode()
    rows = pop_rows_of("b:1", {RUNTIME_KEY: text})
    assert rows == [PopGroupRow("b:1", "g", "T", 1, 3, 1, 1, 0), PopGroupRow("b:1", "h", "U")]
    assert rows[0].to_json() == {"broker": "b:1", **row}
    for runtime in ({}, {RUNTIME_KEY: "not json"}, {RUNTIME_KEY: "{}"}):  # a RocketMQ broker: none
        assert pop_rows_of("b:1", runtime) == []
