"""``python -m bench.chaos`` with reduced counts (the full counts are the bench's): each scenario's
own checks must pass. Real processes on 127.0.0.1, every one stopped by pid."""

from __future__ import annotations

from pathlib import Path

from bench.chaos import churn, crash, fuzz, load
from bench.chaos.common import ScenarioResult


def check(result: ScenarioResult) -> None:
    assert result.ok, f"{result.name}: {result.problems} {result.figures}"


def test_crash_every_acknowledged_message_survives_sigkill(tmp_path: Path) -> None:
    result = crash.run(tmp_path, kills=3, cpp_kills=1, async_kills=1, seed=3)
    check(result)
    assert result.figures["sync_acked"] > 0 and result.figures["sync_lost"] == 0


def test_consumer_churn_loses_nothing_and_commits_to_the_end(tmp_path: Path) -> None:
    result = churn.run(tmp_path, messages=2000, kills=3, seed=3, timeout=120)
    check(result)
    assert result.figures["lost"] == 0
    assert result.figures["committed_offsets"] == result.figures["max_offsets"]


def test_fuzzed_frames_cost_no_reply_descriptor_or_round_trip(tmp_path: Path) -> None:
    result = fuzz.run(tmp_path, frames=10_000, workers=16, seed=3)
    check(result)
    assert result.figures["tracebacks"] == 0 and result.figures["unanswered"] == 0


def test_load_keeps_descriptors_and_memory_flat(tmp_path: Path) -> None:
    result = load.run(tmp_path, seconds=30, connections=200, groups=20, send_every=1.0)
    check(result)
    assert result.figures["errors"] == 0
