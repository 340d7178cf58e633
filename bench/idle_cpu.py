"""The broker's work at rest: Python calls per second on its event loop with nothing to do.

An in-process name server and broker (:func:`tidemq.testing.run_cluster`, default config: timer
wheel on, POP revive on) are started, left alone ``--warmup`` seconds, then profiled with cProfile on
the loop's thread for ``--seconds`` seconds of idleness. Call counts are deterministic enough to
compare sources (time on a shared machine is not); thread CPU is printed too.

With ``--serve``, a ``tidemq serve`` subprocess (name server and broker, async flush) per
``--source`` checkout (``PYTHONPATH=DIR``; default: this one) instead: the scheduler's run time of
all its threads (``/proc/<pid>/task/*/schedstat``) and its context switches (wakeups) over
``--seconds`` of idleness.

Prints one JSON line (per source with ``--serve``)::

    {"bench": "idle_cpu", "seconds": ..., "calls_per_s": ..., "cpu_ms_per_s": ...,
     "top": [["file:line(func)", calls_per_s], ...]}
    {"bench": "idle_cpu", "mode": "serve", "source": ..., "seconds": ..., "cpu_ms_per_s": ...,
     "wakeups_per_s": ...}

Run: ``python -m bench.idle_cpu [--seconds 10] [--warmup 2] [--top 15] [--serve [--source DIR ...]]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any


def measure(seconds: float, warmup: float, top: int) -> dict[str, Any]:
    """Profile an idle in-process broker's loop thread for ``seconds`` (after ``warmup``)."""
    from tidemq.remoting.loop import new_event_loop
    from tidemq.testing import run_cluster

    out: dict[str, Any] = {"bench": "idle_cpu", "seconds": seconds}

    async def main(tmp: str) -> None:
        async with run_cluster(tmp):
            await asyncio.sleep(warmup)
            prof = cProfile.Profile()
            t0 = time.thread_time()
            prof.enable()
            await asyncio.sleep(seconds)
            prof.disable()
            cpu = time.thread_time() - t0
            stats = pstats.Stats(prof)
            out["calls_per_s"] = round(stats.total_calls / seconds, 1)  # type: ignore[attr-defined]
            out["cpu_ms_per_s"] = round(cpu / seconds * 1000, 2)
            rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][1])[:top]  # type: ignore[attr-defined]
            out["top"] = [(f"{Path(k[0]).name}:{k[1]}({k[2]})", round(v[1] / seconds, 1)) for k, v in rows]

    loop = new_event_loop()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            loop.run_until_complete(main(tmp))
        finally:
            loop.close()
    return out


def _switches(pid: int) -> int:
    """Context switches (voluntary and not) of every thread of ``pid`` so far."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/task/{task}/status").read_text().splitlines():
                if "ctxt_switches:" in line:
                    total += int(line.split()[1])
    return total


def measure_serve(seconds: float, warmup: float, source: str | None) -> dict[str, Any]:
    """CPU (all threads' run time) and wakeups per second of an idle ``tidemq serve``."""
    from bench.send_cpu import _proc_cpu, _serve

    with tempfile.TemporaryDirectory() as tmp, _serve(Path(tmp) / "store", "async", source) as proc:
        time.sleep(warmup)  # a bench measuring idleness: nothing to wait for but time
        _, _, run0 = _proc_cpu(proc.pid)
        sw0 = _switches(proc.pid)
        time.sleep(seconds)
        _, _, run1 = _proc_cpu(proc.pid)
        sw1 = _switches(proc.pid)
    return {
        "bench": "idle_cpu",
        "mode": "serve",
        "source": source or ".",
        "seconds": seconds,
        "cpu_ms_per_s": round((run1 - run0) / seconds * 1000, 3),
        "wakeups_per_s": round((sw1 - sw0) / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="idle time profiled (s)")
    parser.add_argument("--warmup", type=float, default=2.0, help="idle time before profiling (s)")
    parser.add_argument("--top", type=int, default=15, help="functions called most, per second")
    parser.add_argument("--serve", action="store_true", help="a tidemq serve subprocess instead")
    parser.add_argument("--source", nargs="*", default=[None], help="checkouts to compare (--serve)")
    args = parser.parse_args()
    if args.serve:
        for source in args.source:
            print(json.dumps(measure_serve(args.seconds, args.warmup, source)), flush=True)
        return
    print(json.dumps(measure(args.seconds, args.warmup, args.top)))


if __name__ == "__main__":
    main()
