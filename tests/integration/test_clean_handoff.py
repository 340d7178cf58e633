"""Clean hand-off on planned membership changes (issue 29): members join and leave a group under a
steady stream with listener work in flight, and every message is consumed exactly once.

The scenario is ``bench.rebalance``'s, scaled down, on an in-process broker; the bench prints the
pause and latency figures, with RocketMQ's behaviour (``clean_handoff=False``) alongside.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.rebalance import Scenario, run_scenario
from tidemq.testing import run_cluster


@pytest.mark.parametrize("kind", ["push", "litepull"])
async def test_planned_joins_and_leaves_deliver_each_message_once(tmp_path: Path, kind: str) -> None:
    """A, +B, +C, -A, -B under 200 msg/s on 8 queues, a 10 ms listener: 0 duplicates, 0 lost."""
    sc = Scenario(kind=kind, rate=200.0, listener_ms=10.0, threads=8, dwell=0.0, min_after=60)
    async with run_cluster(tmp_path) as cluster:
        result = await run_scenario(cluster.namesrv_addr, f"Handoff{kind}", f"cg-handoff-{kind}", sc)
    print(result)
    assert result["lost"] == 0
    assert result["duplicates"] == 0
