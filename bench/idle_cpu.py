"""The broker's work at rest: Python calls per second on its event loop with nothing to do.

An in-process name server and broker (:func:`tidemq.testing.run_cluster`, default config: timer
wheel on, POP revive on) are started, left alone ``--warmup`` seconds, then profiled with cProfile on
the loop's thread for ``--seconds`` seconds of idleness. Call counts are deterministic enough to
compare sources (time on a shared machine is not); thread CPU is printed too.

Prints one JSON line::

    {"bench": "idle_cpu", "seconds": ..., "calls_per_s": ..., "cpu_ms_per_s": ...,
     "top": [["file:line(func)", calls_per_s], ...]}

Run: ``python -m bench.idle_cpu [--seconds 10] [--warmup 2] [--top 15]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="idle time profiled (s)")
    parser.add_argument("--warmup", type=float, default=2.0, help="idle time before profiling (s)")
    parser.add_argument("--top", type=int, default=15, help="functions called most, per second")
    args = parser.parse_args()
    print(json.dumps(measure(args.seconds, args.warmup, args.top)))


if __name__ == "__main__":
    main()
