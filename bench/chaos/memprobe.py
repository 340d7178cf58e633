"""``python -m bench.chaos.memprobe [--frames N]``: where a broker's memory goes under fuzzing.

Runs a name server + broker in this process (``tidemq.testing.ClusterThread``, idle timeout 10 s),
fuzzes it from a subprocess with :mod:`bench.chaos.fuzz` (so the fuzzer's own memory is not
counted), waits for every fuzz connection to be closed and a write-back interval to pass, then
prints what grew between the baseline (after a warm-up) and the end:

* ``VmRSS`` / ``RssAnon`` (heap) / ``RssFile`` (mapped files) of this process, MiB;
* resident KiB per mapping (``/proc/self/smaps``): store files by directory, shared libraries,
  anonymous memory (pymalloc arenas, glibc heaps);
* pymalloc's arenas and bytes in used / free blocks (``sys._debugmallocstats``);
* live Python objects by type (``gc.get_objects``), the 15 that grew most;
* with ``--tracemalloc``, the 15 source lines whose allocations grew most (slow: about 10x).

This is how the fuzz scenario's RSS that never came back was found: 18.6 of 25 MB were the key
index's hash-slot pages (random keys touch every page of its 20 MB slot table), fixed by dropping
them from RSS after each write-back; the rest is the state the fuzzer legitimately created
(topics, subscription groups) plus allocator fragmentation. Linux only. Prints one JSON line last.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from tidemq.remoting.idle import release_free_memory
from tidemq.testing import ClusterThread

IDLE_S = 10
WRITE_BACK_S = 12
"""Longer than the key index's write-back interval (10 s), after which its pages leave RSS."""

_FUZZ = """
import asyncio, sys, types
from bench.chaos.fuzz import Counters, _fuzz
c = Counters()
serve = types.SimpleNamespace(broker_addr=sys.argv[1], namesrv_addr=sys.argv[2])
ok, failed = asyncio.run(_fuzz(serve, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), c))
print(c.frames, c.requests, c.answered, c.closed_unanswered, c.unanswered, ok, failed)
"""


def rss() -> dict[str, float]:
    """``VmRSS``, ``RssAnon``, ``RssFile`` of this process in MiB."""
    out: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = round(int(line.split()[1]) / 1024, 1)
    return out


def rss_by_mapping(store: str) -> dict[str, int]:
    """Resident KiB per mapping kind: store files by directory, ``[libs]``, ``[anon]``, ``[heap]``..."""
    agg: collections.Counter[str] = collections.Counter()
    current = "[anon]"
    for line in Path("/proc/self/smaps").read_text().splitlines():
        parts = line.split()
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            path = parts[5] if len(parts) > 5 else "[anon]"
            if path.startswith(store):
                rel = os.path.relpath(path, store).split(os.sep)
                path = "store/" + "/".join(rel[:2] if rel[0] == "consumequeue" else rel[:1])
            elif ".so" in path or path.endswith(".pyd"):
                path = "[libs]"
            current = path
        elif parts and parts[0] == "Rss:":
            agg[current] += int(parts[1])
    return dict(agg)


def pymalloc_stats() -> dict[str, int]:
    """pymalloc's arenas and bytes in allocated / available blocks (from ``sys._debugmallocstats``)."""
    read, write = os.pipe()
    saved = os.dup(2)
    os.dup2(write, 2)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    out: dict[str, int] = {}
    for key, label in (
        ("arenas", "# arenas allocated current"),
        ("allocated_blocks_bytes", "# bytes in allocated blocks"),
        ("available_blocks_bytes", "# bytes in available blocks"),
    ):
        m = re.search(re.escape(label) + r"\s*=\s*([\d,]+)", text)
        if m:
            out[key] = int(m.group(1).replace(",", ""))
    return out


def objects_by_type() -> collections.Counter[str]:
    """Live objects tracked by the garbage collector, by type name."""
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


def fuzz(cluster: ClusterThread, frames: int, workers: int, seed: int) -> list[int]:
    """Run the fuzzer in a subprocess; its counters (frames, requests, answered, closed, unanswered,
    round trips ok, failed)."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _FUZZ,
            cluster.broker_addr,
            cluster.namesrv_addr,
            str(frames),
            str(workers),
            str(seed),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [int(x) for x in out.split()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chaos.memprobe", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--tracemalloc", action="store_true", help="also diff allocations by source line")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # the broker's per-request lines are not the point here
    tmp = tempfile.TemporaryDirectory(prefix="tidemq-memprobe-")
    store = str(Path(tmp.name) / "store")
    if args.tracemalloc:
        tracemalloc.start(1)
    cluster = ClusterThread(tmp.name, server_channel_max_idle_time_seconds=IDLE_S).start()
    pid = os.getpid()

    def settle() -> None:
        server = cluster.broker.remoting_server
        deadline = time.monotonic() + IDLE_S + 30
        while server.channels and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(WRITE_BACK_S)
        gc.collect()

    try:
        fuzz(cluster, 300, 4, args.seed + 1)  # warm up: routes, topics, caches
        settle()
        rss0, maps0, py0, ty0 = rss(), rss_by_mapping(store), pymalloc_stats(), objects_by_type()
        snap0 = tracemalloc.take_snapshot() if args.tracemalloc else None
        t0 = time.monotonic()
        counters = fuzz(cluster, args.frames, args.workers, args.seed)
        fuzz_s = time.monotonic() - t0
        rss_peak = rss()
        settle()
        rss1, maps1, py1, ty1 = rss(), rss_by_mapping(store), pymalloc_stats(), objects_by_type()
        release_free_memory()
        rss_trimmed = rss()
        print(f"fuzz: {counters[0]:,} frames in {fuzz_s:.0f} s; pid {pid}")
        print(f"RSS MiB: baseline {rss0}  peak {rss_peak}  after {rss1}  after malloc_trim {rss_trimmed}")
        print("resident KiB by mapping (baseline -> after):")
        for key in sorted(set(maps0) | set(maps1), key=lambda k: -abs(maps1.get(k, 0) - maps0.get(k, 0)))[
            :10
        ]:
            print(f"  {key:<40} {maps0.get(key, 0):>8} -> {maps1.get(key, 0):>8}")
        print(f"pymalloc: {py0} -> {py1}")
        grown = ty1.copy()
        grown.subtract(ty0)
        print("objects grown:", ", ".join(f"{k} +{v}" for k, v in grown.most_common(15) if v > 0))
        if snap0 is not None:
            print("allocations grown by line:")
            for stat in tracemalloc.take_snapshot().compare_to(snap0, "lineno")[:15]:
                print(f"  {stat}")
        topics = len(cluster.broker.topic_config_manager.topics())
        print(
            json.dumps(
                {
                    "bench": "chaos.memprobe",
                    "frames": counters[0],
                    "rss_mb": {"baseline": rss0, "peak": rss_peak, "after": rss1, "trimmed": rss_trimmed},
                    "topics": topics,
                    "objects_grown": dict(grown.most_common(5)),
                }
            )
        )
    finally:
        cluster.stop()
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
