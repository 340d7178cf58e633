"""``tidemq cluster up | status | down`` as a user runs them (each a separate process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tidemq.cluster import Node

pytestmark = pytest.mark.slow


def tidemq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidemq", *args], capture_output=True, text=True, timeout=120, check=False
    )


def alive(pid: int) -> bool:
    """Running and not a zombie (the nodes outlive `cluster up`; whoever adopts them reaps them)."""
    return Node("n", "namesrv", "", pid=pid).alive


def test_cluster_up_status_down(tmp_path: Path) -> None:
    root = tmp_path / "tq"
    up = tidemq("cluster", "up", "--dir", str(root), "--groups", "1", "--replicas", "1", "--namesrv", "2")
    pids = (
        [n["pid"] for n in json.loads((root / "cluster.json").read_text())["nodes"]]
        if up.returncode == 0
        else []
    )
    try:
        assert up.returncode == 0, up.stderr
        assert "namesrvAddr=127.0.0.1:" in up.stdout and up.stdout.count("alive") == 4
        assert "SYNC_MASTER" in up.stdout and "SLAVE" in up.stdout
        again = tidemq("cluster", "up", "--dir", str(root))
        assert again.returncode != 0 and "already running" in again.stderr

        status = tidemq("cluster", "status", "--dir", str(root))
        assert status.returncode == 0, status.stderr
        route = [line for line in status.stdout.splitlines() if line.startswith("route ")]
        assert len(route) == 1 and " 0=127.0.0.1:" in route[0] and " 1=127.0.0.1:" in route[0], status.stdout
    finally:
        down = tidemq("cluster", "down", "--dir", str(root))
        for pid in pids:  # never leave a process behind, even when `down` is what failed
            if alive(pid):
                os.kill(pid, 9)
    assert down.returncode == 0, down.stderr
    assert not any(alive(p) for p in pids)
    assert tidemq("cluster", "status", "--dir", str(root)).stdout.count("dead") == 4
