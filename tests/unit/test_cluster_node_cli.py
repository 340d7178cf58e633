"""``tidemq cluster stop|kill|start NODE`` on a recorded cluster (stand-in processes: no broker needed)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tidemq.cluster import LocalCluster, Node, cluster_group


def test_stop_kill_start_one_node(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    try:
        cluster = LocalCluster(tmp_path)
        for name, proc in zip(("broker-a-0", "broker-a-1"), procs, strict=True):
            cluster.nodes[name] = Node(name, "broker", str(tmp_path / name), pid=proc.pid, addr="127.0.0.1:1")
        cluster.save()
        run = CliRunner().invoke
        started = run(cluster_group, ["start", "--dir", str(tmp_path), "broker-a-0"])
        assert started.exit_code == 0 and "already running" in started.output
        stopped = run(cluster_group, ["stop", "--dir", str(tmp_path), "--timeout", "10", "broker-a-0"])
        assert stopped.exit_code == 0 and "broker-a-0 stopped" in stopped.output, stopped.output
        assert procs[0].wait(10) == -15  # SIGTERM: a clean shutdown
        killed = run(cluster_group, ["kill", "--dir", str(tmp_path), "broker-a-1"])
        assert killed.exit_code == 0 and "broker-a-1 killed" in killed.output, killed.output
        assert procs[1].wait(10) == -9
        again = run(cluster_group, ["kill", "--dir", str(tmp_path), "broker-a-1"])
        assert again.exit_code == 0 and "was not running" in again.output
        unknown = run(cluster_group, ["stop", "--dir", str(tmp_path), "broker-z-0"])
        assert unknown.exit_code != 0 and "no node 'broker-z-0'" in unknown.output
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


_BUSY_LISTENER = """
import socket, threading, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(60)
"""


def test_kill_returns_once_every_thread_is_gone(tmp_path: Path) -> None:
    """A SIGKILLed multi-threaded node shows its main thread as a zombie while its other threads
    still exit, holding its sockets open: `cluster kill` waits for them, so the port is closed
    (and the name server has seen the connection drop) when it says "killed"."""
    for trial in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _BUSY_LISTENER], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            cluster = LocalCluster(tmp_path / str(trial))
            cluster.nodes["broker-a-0"] = Node("broker-a-0", "broker", str(tmp_path), pid=proc.pid)
            cluster.save()
            killed = CliRunner().invoke(cluster_group, ["kill", "--dir", str(cluster.dir), "broker-a-0"])
            assert killed.exit_code == 0 and "broker-a-0 killed" in killed.output, killed.output
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
        finally:
            proc.kill()
            proc.wait()
