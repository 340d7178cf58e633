"""System calls per single SEND: ``strace -c -f`` attached to a ``tidemq serve`` (every thread).

Setup: the SEND_MESSAGE_V2 frame tidemq's ``Producer`` writes for one 1 KiB message (as
:mod:`bench.send_cpu` captures it) is replayed over one loopback connection, one request at a time,
against a fresh ``tidemq serve --flush FLUSH``; after a 500-request warm-up, strace counts two
windows of ``--requests`` and ``2 x --requests`` requests, and the per-call difference divided by
the requests between them is printed, so the per-second background (timers, the flush service,
the idle poller's ticks) mostly cancels out. Needs ``strace`` (and ptrace permission).

Prints one JSON line::

    {"bench": "send_syscalls", "flush": "async", "syscalls_per_request": 4.16,
     "by_call": {"epoll_pwait": 1.05, "read": 1.0, "write": 1.0, ...}}

Run: ``python -m bench.send_syscalls [--flush async sync] [--requests N]`` (``--source DIR`` runs
``tidemq serve`` from another checkout for an A/B).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.send_cpu import Replayer, capture_frames


def _window(pid: int, replayer: Replayer, n: int, out: Path) -> dict[str, int]:
    """Calls per syscall name made by process ``pid`` while ``n`` requests are replayed."""
    strace = subprocess.Popen(
        ["strace", "-c", "-f", "-o", str(out), "-p", str(pid)], stderr=subprocess.DEVNULL
    )
    time.sleep(1.0)  # attached to every thread (no ready signal from strace -p)
    replayer.run(n)
    strace.send_signal(signal.SIGINT)
    strace.wait(30)
    counts: dict[str, int] = {}
    for line in out.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            counts[parts[-1]] = int(parts[3])
    return counts


def measure(frame: bytes, flush: str, n: int, source: str | None) -> dict[str, Any]:
    """Syscalls per single send of a ``tidemq serve --flush FLUSH`` (see the module doc)."""
    from tidemq.testing import ServeProcess

    saved, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        if source:  # ``python -m tidemq`` imports from its working directory first
            os.environ["PYTHONPATH"] = source
            os.chdir(source)
        try:
            proc = ServeProcess(Path(tmp) / "store", flush=flush).start()
        finally:
            os.chdir(cwd)
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved
        try:
            replayer = Replayer(proc.broker_addr, frame)
            replayer.run(500)
            a = _window(proc.pid, replayer, n, Path(tmp) / "a.txt")
            b = _window(proc.pid, replayer, 2 * n, Path(tmp) / "b.txt")
            replayer.close()
        finally:
            proc.stop()
    per = {k: round((b.get(k, 0) - a.get(k, 0)) / n, 3) for k in set(a) | set(b)}
    per = {k: v for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if abs(v) >= 0.005}
    return {"syscalls_per_request": round(sum(per.values()), 2), "by_call": per}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--flush", nargs="+", choices=("async", "sync"), default=["async", "sync"])
    parser.add_argument("--requests", type=int, default=2000, help="requests in the first window")
    parser.add_argument("--source", default=None, help="a checkout to run tidemq serve from")
    args = parser.parse_args()
    if shutil.which("strace") is None:
        print(json.dumps({"bench": "send_syscalls", "skipped": "strace is not installed"}))
        return
    with tempfile.TemporaryDirectory() as tmp:
        frame = capture_frames(Path(tmp))["single"]
    for flush in args.flush:
        figures = measure(frame, flush, args.requests, args.source)
        print(json.dumps({"bench": "send_syscalls", "source": args.source or ".", "flush": flush, **figures}))


if __name__ == "__main__":
    main()
