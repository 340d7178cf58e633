"""`python -m bench.send_cpu` runs end to end with tiny counts and prints its figures as one JSON line
(figures are not checked: speed goals live in the bench's output, not in tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_send_cpu_prints_every_figure_for_every_shape() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.send_cpu", "--requests", "80", "--flush", "async", "sync"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["bench"] == "send_cpu"
    for flush in ("async", "sync"):
        for shape in ("single", "batch32"):
            entry = figures[flush][shape]
            assert {"cpu_us", "user_us", "sys_us", "round_trip_us", "calls", "replay_us"} <= set(entry)
