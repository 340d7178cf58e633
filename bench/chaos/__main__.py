"""``python -m bench.chaos [--only crash,churn,files,fuzz,load] [counts...]``: run the fault-injection
scenarios, print one table and one JSON line; exit status 1 if any scenario failed its checks.

Defaults are issue 10's counts: crash 20 SIGKILLs with SYNC_FLUSH (5 of them with the C++
producer) + 5 with ASYNC_FLUSH; churn 50,000 messages and 20 kills; fuzz 1,000,000 frames; load
1,000 connections and 100 consumer groups for 600 s (``--load-seconds`` shortens it). Everything
runs on 127.0.0.1 with ephemeral ports under a temporary directory (``--workdir`` keeps it).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import tempfile
import time
from pathlib import Path

from bench.chaos import churn, crash, files, fuzz, load
from bench.chaos.common import ScenarioResult, print_table

SCENARIOS = ("crash", "churn", "files", "fuzz", "load")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma list of scenarios")
    parser.add_argument("--kills", type=int, default=20, help="crash: SYNC_FLUSH broker kills")
    parser.add_argument("--cpp-kills", type=int, default=5, help="crash: of which with the C++ producer")
    parser.add_argument("--async-kills", type=int, default=5, help="crash: ASYNC_FLUSH broker kills")
    parser.add_argument("--churn-messages", type=int, default=50_000)
    parser.add_argument("--churn-kills", type=int, default=20)
    parser.add_argument("--fuzz-frames", type=int, default=1_000_000)
    parser.add_argument("--fuzz-workers", type=int, default=32)
    parser.add_argument("--load-seconds", type=float, default=600)
    parser.add_argument("--load-connections", type=int, default=1000)
    parser.add_argument("--load-groups", type=int, default=100)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--workdir", type=Path, default=None, help="keep stores and logs here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(chosen) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    tmp = None if args.workdir else tempfile.TemporaryDirectory(prefix="tidemq-chaos-")
    work = args.workdir or Path(tmp.name if tmp else ".")
    results: list[ScenarioResult] = []
    started = time.monotonic()
    try:
        for name in chosen:
            where = work / name
            if name == "crash":
                r = crash.run(
                    where,
                    kills=args.kills,
                    cpp_kills=args.cpp_kills,
                    async_kills=args.async_kills,
                    seed=args.seed,
                )
            elif name == "churn":
                r = churn.run(where, messages=args.churn_messages, kills=args.churn_kills, seed=args.seed)
            elif name == "files":
                r = files.run(where, seed=args.seed)
            elif name == "fuzz":
                r = fuzz.run(where, frames=args.fuzz_frames, workers=args.fuzz_workers, seed=args.seed)
            else:
                r = load.run(
                    where,
                    seconds=args.load_seconds,
                    connections=args.load_connections,
                    groups=args.load_groups,
                )
            results.append(r)
    finally:
        if tmp is not None:
            tmp.cleanup()
    print_table(results)
    print(
        json.dumps(
            {
                "bench": "chaos",
                "setup": {
                    "python": platform.python_version(),
                    "cpus": __import__("os").cpu_count(),
                    "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                    "seconds": round(time.monotonic() - started, 1),
                },
                **{r.name: r.to_json() for r in results},
            }
        )
    )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
