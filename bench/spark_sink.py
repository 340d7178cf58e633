"""The transactional Spark sink's throughput against the plain sink, in the same run.

``python -m bench.spark_sink [--rows 200000] [--body 100] [--partitions 2] [--reps 3]``

An in-process tidemq cluster (large pulls), a local[2] SparkSession, and a cached DataFrame of
``--rows`` rows (``body``: ``--body`` bytes) in ``--partitions`` partitions. Each rep writes it
with ``df.write.format("tidemq")`` to a fresh 4-queue topic, once with ``transactional=false`` and
once with ``transactional=true`` (alternating which goes first), after one untimed warm-up of each.
Prints one JSON line: seconds of every run, median rows/s of each, and ``tx_vs_plain`` (the goal is
>= 0.7).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

from bench import interpreter, spark_session


def _session() -> Any:
    return spark_session("bench-spark-sink")


def _write(df: Any, namesrv: str, topic: str, tx: bool) -> float:
    from tests.spark.helpers import create_topic

    create_topic(namesrv, topic, 4)
    start = time.perf_counter()
    (
        df.write.format("tidemq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("transactional", str(tx).lower())
        .mode("append")
        .save()
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--body", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)

    from tidemq.testing import ClusterThread

    with (
        tempfile.TemporaryDirectory() as tmp,
        ClusterThread(
            tmp,
            max_transfer_count_on_message_in_memory=8192,
            max_transfer_bytes_on_message_in_memory=8 * 1024 * 1024,
        ) as cluster,
    ):
        spark = _session()
        pad = max(0, args.body - 12)
        df = (
            spark.range(0, args.rows, numPartitions=args.partitions)
            .selectExpr(
                f"cast(concat(lpad(cast(id as string), 12, '0'), repeat('x', {pad})) as binary) as body"
            )
            .cache()
        )
        df.count()
        namesrv = cluster.namesrv_addr
        _write(df, namesrv, "BenchSinkWarmPlain", False)
        _write(df, namesrv, "BenchSinkWarmTx", True)
        runs: dict[str, list[float]] = {"plain": [], "tx": []}
        for rep in range(args.reps):
            order = [False, True] if rep % 2 == 0 else [True, False]
            for tx in order:
                name = "tx" if tx else "plain"
                runs[name].append(_write(df, namesrv, f"BenchSink{name}{rep}", tx))
        spark.stop()
    plain = args.rows / statistics.median(runs["plain"])
    tx_rate = args.rows / statistics.median(runs["tx"])
    print(
        json.dumps(
            {
                "rows": args.rows,
                "body_bytes": args.body,
                "partitions": args.partitions,
                "seconds": {k: [round(s, 3) for s in v] for k, v in runs.items()},
                "plain_rows_per_s": round(plain),
                "tx_rows_per_s": round(tx_rate),
                "tx_vs_plain": round(tx_rate / plain, 3),
                "load": os.getloadavg()[0],
                "interpreter": interpreter()["python"],
            }
        )
    )


if __name__ == "__main__":
    main()
