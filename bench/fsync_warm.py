"""fdatasync after an append: a sparse segment, a warm one (zero-filled and synced first, what
``warm_maped_file_enable`` does) and an append-only file (Redis's AOF), on the store's file system.

Each round appends ``--record`` bytes and fdatasyncs, ``--count`` times per kind; kinds are
interleaved over ``--reps`` rounds and the medians printed (us). Run: ``python -m bench.fsync_warm
[--dir DIR] [--record 33000] [--count 1000] [--reps 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

KINDS = ("sparse", "warm", "append")


def one(kind: str, directory: str, record: int, count: int) -> list[float]:
    """Latencies (us) of ``count`` append + fdatasync rounds on a new file of ``kind``."""
    path = os.path.join(directory, kind)
    size = record * count + (1 << 20)
    flags = os.O_RDWR | os.O_CREAT | (os.O_APPEND if kind == "append" else 0)
    fd = os.open(path, flags, 0o644)
    try:
        if kind != "append":
            os.ftruncate(fd, size)
        if kind == "warm":
            zeros = bytes(1 << 20)
            for pos in range(0, size, len(zeros)):
                os.pwrite(fd, zeros, pos)
            os.fdatasync(fd)
        data = b"x" * record
        out = []
        for i in range(count):
            if kind == "append":
                os.write(fd, data)
            else:
                os.pwrite(fd, data, i * record)
            start = time.perf_counter()
            os.fdatasync(fd)
            out.append((time.perf_counter() - start) * 1e6)
        return out
    finally:
        os.close(fd)
        os.unlink(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="directory on the file system to test (a temp dir)")
    parser.add_argument("--record", type=int, default=33_000, help="bytes per append (a batch of 32 x 1 KiB)")
    parser.add_argument("--count", type=int, default=1000, help="appends per kind and round")
    parser.add_argument("--reps", type=int, default=2, help="interleaved rounds")
    args = parser.parse_args()
    runs: dict[str, list[float]] = {k: [] for k in KINDS}
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for _ in range(args.reps):
            for kind in KINDS:
                runs[kind] += one(kind, directory, args.record, args.count)
    result = {}
    for kind in KINDS:
        lat = sorted(runs[kind])
        result[kind] = {
            "p50_us": round(statistics.median(lat), 1),
            "mean_us": round(statistics.fmean(lat), 1),
            "p99_us": round(lat[int(len(lat) * 0.99)], 1),
        }
        print(
            f"{kind:7s} p50 {result[kind]['p50_us']:7.1f} us  mean {result[kind]['mean_us']:7.1f} us  "
            f"p99 {result[kind]['p99_us']:7.1f} us"
        )
    print(json.dumps({"bench": "fsync_warm", "record_bytes": args.record, "results": result}))


if __name__ == "__main__":
    main()
