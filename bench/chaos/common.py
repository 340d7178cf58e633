"""Shared pieces of the chaos scenarios: the result record, process stats, the table."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ScenarioResult:
    """Outcome of one scenario: ``ok`` plus the figures printed in the table and the JSON line."""

    name: str
    ok: bool = True
    figures: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def fail(self, problem: str) -> None:
        """Record a failed check (the scenario goes on; ``ok`` becomes False)."""
        self.ok = False
        if len(self.problems) < 20:
            self.problems.append(problem)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "seconds": round(self.seconds, 1), **self.figures, "problems": self.problems}


def fd_count(pid: int) -> int:
    """Open descriptors of process ``pid`` (Linux ``/proc``; -1 when unreadable)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (``VmRSS``; -1 when unreadable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return -1.0


def kill_pid(proc: subprocess.Popen[Any] | None, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to ``proc`` (by its pid) if it still runs, and reap it."""
    if proc is None:
        return
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(30)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def poll(cond: Any, timeout: float, interval: float = 0.05) -> bool:
    """Check ``cond()`` until it holds or ``timeout`` s pass; whether it held."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            return bool(cond())
        time.sleep(interval)
    return True


def print_table(results: list[ScenarioResult]) -> None:
    """One row per scenario: name, verdict, seconds, the figures as ``key=value``."""
    print(f"{'scenario':<14} {'result':<6} {'s':>6}  figures")
    for r in results:
        figures = " ".join(f"{k}={v}" for k, v in r.figures.items() if not isinstance(v, (dict, list)))
        print(f"{r.name:<14} {'ok' if r.ok else 'FAIL':<6} {r.seconds:>6.1f}  {figures}")
        for sub, value in r.figures.items():
            if isinstance(value, dict):
                for k, v in value.items():
                    print(f"{'':<14} {'':<6} {'':>6}    {sub}.{k}: {v}")
        for p in r.problems:
            print(f"{'':<14} {'':<6} {'':>6}    problem: {p}")
