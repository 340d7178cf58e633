"""The flights pipeline's closing summary (plain text tables, pure)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidemq.pipelines.flights import PipelineResult

__all__ = ["format_summary", "format_table"]


def _cell(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


def format_table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]]) -> str:
    """Render ``rows`` as an aligned text table.

    Args:
        rows: one dict per row.
        columns: ``(key, header, format spec)``; a spec starting with ``<`` left-aligns.
    """
    cells = [[_cell(r.get(key), spec.lstrip("<")) for key, _, spec in columns] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (_, h, _) in enumerate(columns)]
    left = [spec.startswith("<") for _, _, spec in columns]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.ljust(w) if lft else v.rjust(w) for v, w, lft in zip(values, widths, left, strict=True)
        )

    out = [line([h for _, h, _ in columns]), line(["-" * w for w in widths])]
    out.extend(line(c) for c in cells)
    return "\n".join(out)


def format_summary(result: PipelineResult) -> str:
    """The summary printed at the end of ``tidemq pipeline flights``."""
    a = result.analytics
    carriers = a.carriers.to_dict("records")
    for row in carriers:
        row["share_pct"] = None if row["share_late_15"] is None else 100.0 * row["share_late_15"]
    table = format_table(
        carriers,
        [
            ("carrier", "carrier", "<s"),
            ("name", "airline", "<s"),
            ("flights", "flights", ",d"),
            ("cancelled", "cancelled", ",d"),
            ("mean_dep_delay", "mean delay (min)", ".1f"),
            ("p90_dep_delay", "p90 delay (min)", ".1f"),
            ("share_pct", "> 15 min late (%)", ".1f"),
        ],
    )
    hours = a.origin_hour
    worst = hours[hours["departed"] >= 5].sort_values(
        ["mean_dep_delay", "time_hour"], ascending=[False, True]
    )
    worst_table = format_table(
        worst.head(5).to_dict("records"),
        [
            ("origin", "origin", "<s"),
            ("time_hour", "hour (UTC)", "<s"),
            ("departed", "departures", ",d"),
            ("mean_dep_delay", "mean delay (min)", ".1f"),
            ("visib", "visibility (mi)", ".1f"),
            ("wind_speed", "wind (mph)", ".1f"),
            ("precip", "precip (in)", ".2f"),
        ],
    )
    lag = sum(p.lag for p in result.analytics_progress)
    total = int(sum(r["flights"] for r in carriers))
    return "\n".join(
        [
            "",
            f"flights per carrier ({total:,} flights, {a.rows:,} messages read in {a.batches} micro-batches):",
            table,
            "",
            "worst origin hours (at least 5 departures) with that hour's weather:",
            worst_table,
            "",
            f"alerts: {result.alerts_in_topic:,} flights more than 3 h late in topic flights-alerts "
            f"({result.alerts_sent:,} sent by this run)",
            f"consumer group flights-analytics: total lag {lag:,} over {len(result.analytics_progress)} queues "
            "(tidemq admin consumer-progress --group flights-analytics)",
            f"results: {a.out_dir}/carriers, {a.out_dir}/origin_hour (Parquet)",
            f"done in {result.seconds:.1f} s",
        ]
    )
