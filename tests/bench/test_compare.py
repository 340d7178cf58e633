"""`python -m bench.compare` runs end to end with tiny counts: every row and a parseable JSON line
(figures are not checked: speed goals live in the bench's output, not in tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.client_throughput import SHAPES, redis_available

ROOT = Path(__file__).resolve().parents[2]


def test_compare_prints_every_shape_and_a_json_line() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.compare",
            "--messages",
            "640",
            "--single",
            "64",
            "--latency-messages",
            "100",
            "--reps",
            "1",
            "--flush",
            "async",
            "--serve-arg=--idle-poll-us",  # an A/B's other side: tidemq serve without idle polling
            "--serve-arg=0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    figures = json.loads(lines[-1])
    assert figures["interpreter"]["executable"] == sys.executable
    assert (
        figures["loopback_rtt_us"]["before"]["p50_us"] > 0
        and figures["loopback_rtt_us"]["after"]["p99_us"] > 0
    )
    assert figures["serve_args"] == ["--idle-poll-us", "0"] and figures["serve_idle_poll_us"] == 0
    ours = figures["results"]["async"]["tidemq"]
    for shape in SHAPES:
        assert shape in ours, shape
        assert any(line.startswith("latency." if shape == "latency" else shape) for line in lines)
    assert ours["latency"]["p99_ms"] > 0 and ours["send_batch32"] > 0
    assert ours["latency"]["p99_ms_per_rep"] == [ours["latency"]["p99_ms"]]  # one rep: its own p99
    assert any(line.startswith("latency.p99_ms, each rep") for line in lines)
    theirs = figures["results"]["async"]["redis"]
    if redis_available() is None:
        assert set(theirs) == set(ours)
    else:
        assert theirs is None and "Redis rows skipped" in proc.stdout


def test_fsync_warm_prints_each_kind_and_a_json_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.fsync_warm", "--dir", str(tmp_path), "--count", "5", "--reps", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(figures["results"]) == {"sparse", "warm", "append"}
    assert all(r["p50_us"] > 0 for r in figures["results"].values())
    assert list(tmp_path.iterdir()) == []  # its files are gone


def test_idle_poll_of_serve_args() -> None:
    from bench.compare import idle_poll_of
    from tidemq.remoting.busy_poll import SERVE_IDLE_POLL_US

    assert idle_poll_of([]) == SERVE_IDLE_POLL_US
    assert idle_poll_of(["--flush", "sync", "--idle-poll-us", "250"]) == 250
    assert idle_poll_of(["--idle-poll-us=0"]) == 0
