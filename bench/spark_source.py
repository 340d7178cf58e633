"""Benchmark of the ``tidemq`` Spark source against Spark reading a local JSON-lines file.

``python -m bench.spark_source [--count 1000000] [--size 100] [--queues 4] [--reps 3]``

Setup: one in-process tidemq name server + broker (store in a temp dir, pulls of up to 8192
messages), ``--count`` messages of ``--size`` random bytes spread over ``--queues`` queues, a local
SparkSession ``local[2]``. Measured, in one run, after one warm-up query each:

* ``batch``: ``spark.read.format("tidemq")`` then ``groupBy(queueId).agg(count(*), sum(length(body)))``
  (all 12 columns are decoded by the source); median of ``--reps`` runs;
* ``available_now``: one ``readStream`` with ``Trigger.AvailableNow`` into the ``noop`` sink, from query
  start to termination (``stream_rows_per_s``) and summing the micro-batches' ``triggerExecution``;
* ``json_lines``: the same records (same columns, body base64) written to 2 local JSON-lines files and
  read with an explicit schema, same groupBy; median of ``--reps`` runs.

Prints one JSON line of figures (rows/s) plus the setup.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BROKER_OVERRIDES = {
    "max_transfer_count_on_message_in_memory": 8192,
    "max_transfer_bytes_on_message_in_memory": 8 * 1024 * 1024,
    "max_transfer_count_on_message_in_disk": 8192,
    "max_transfer_bytes_on_message_in_disk": 8 * 1024 * 1024,
}


def produce(namesrv: str, topic: str, count: int, size: int, queues: int) -> float:
    """Send ``count`` messages in batches of 1000 per queue; returns messages/s."""
    from tidemq.admin import AdminClient
    from tidemq.client.producer.producer import Producer
    from tidemq.protocol.message import Message

    with AdminClient(namesrv) as admin:
        admin.create_topic(topic, queues)
        admin.wait_for_route(topic)
    producer = Producer(namesrv_addr=namesrv, producer_group="bench-spark")
    producer.start()
    payload = os.urandom(size)
    start = time.perf_counter()
    try:
        mqs = sorted(producer.fetch_publish_message_queues(topic))
        sent, i = 0, 0
        while sent < count:
            n = min(1000, count - sent)
            producer.send_batch([Message(topic, payload) for _ in range(n)], queue=mqs[i % len(mqs)])
            sent += n
            i += 1
    finally:
        producer.shutdown()
    return count / (time.perf_counter() - start)


def write_json_lines(path: Path, count: int, size: int, queues: int) -> None:
    """The same shape of records as the source's rows, 2 files, body base64."""
    payload = base64.b64encode(os.urandom(size)).decode()
    path.mkdir(parents=True)
    half = count // 2
    for part, (lo, hi) in enumerate([(0, half), (half, count)]):
        with open(path / f"part-{part}.json", "w") as f:
            for i in range(lo, hi):
                f.write(
                    json.dumps(
                        {
                            "topic": "BenchSpark",
                            "brokerName": "broker-a",
                            "queueId": i % queues,
                            "queueOffset": i // queues,
                            "msgId": f"{i:032X}",
                            "tags": None,
                            "keys": None,
                            "body": payload,
                            "bornTimestamp": "2026-11-21T00:00:00.000Z",
                            "storeTimestamp": "2026-11-21T00:00:00.001Z",
                            "reconsumeTimes": 0,
                            "properties": {"UNIQ_KEY": f"{i:032X}"},
                        }
                    )
                    + "\n"
                )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=1_000_000, help="messages (default 1,000,000)")
    parser.add_argument("--size", type=int, default=100, help="body bytes (default 100)")
    parser.add_argument("--queues", type=int, default=4, help="queues of the topic (default 4)")
    parser.add_argument("--reps", type=int, default=3, help="timed runs per batch query (default 3)")
    args = parser.parse_args(argv)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import tidemq.spark
    from tidemq.spark.arrow import SOURCE_SCHEMA_DDL
    from tidemq.testing import ClusterThread

    topic = "BenchSpark"
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-bench-spark-") as tmp,
        ClusterThread(tmp, **BROKER_OVERRIDES) as c,
    ):
        produce_rate = produce(c.namesrv_addr, topic, args.count, args.size, args.queues)
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("tidemq-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        tidemq.spark.register(spark)

        def group_by(df: Any) -> int:
            rows = df.groupBy("queueId").agg(F.count("*").alias("n"), F.sum(F.length("body"))).collect()
            return int(sum(r["n"] for r in rows))

        def source() -> Any:
            return spark.read.format("tidemq").option("namesrv", c.namesrv_addr).option("topic", topic).load()

        def timed(fn: Any) -> tuple[float, int]:
            t = time.perf_counter()
            n = fn()
            return time.perf_counter() - t, n

        group_by(source())  # warm-up: Python workers, connections
        batch_times = []
        for _ in range(args.reps):
            seconds, n = timed(lambda: group_by(source()))
            assert n == args.count, f"batch read {n} rows, expected {args.count}"
            batch_times.append(seconds)

        checkpoint = Path(tmp) / "checkpoint"
        t0 = time.perf_counter()
        query = (
            spark.readStream.format("tidemq")
            .option("namesrv", c.namesrv_addr)
            .option("topic", topic)
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        stream_wall = time.perf_counter() - t0
        progress = query.recentProgress
        stream_rows = sum(p["numInputRows"] for p in progress)
        trigger_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in progress if p["numInputRows"])
        assert stream_rows == args.count, f"stream read {stream_rows} rows, expected {args.count}"

        json_path = Path(tmp) / "jsonl"
        write_json_lines(json_path, args.count, args.size, args.queues)
        json_schema = SOURCE_SCHEMA_DDL.replace("body binary", "body string")

        def json_df() -> Any:
            return spark.read.schema(json_schema).json(str(json_path))

        group_by(json_df())  # warm-up
        json_times = []
        for _ in range(args.reps):
            seconds, n = timed(lambda: group_by(json_df()))
            assert n == args.count
            json_times.append(seconds)
        spark.stop()

    batch_s = statistics.median(batch_times)
    json_s = statistics.median(json_times)
    print(
        json.dumps(
            {
                "bench": "spark_source",
                "messages": args.count,
                "body_bytes": args.size,
                "queues": args.queues,
                "spark": "local[2]",
                "produce_msgs_per_s": round(produce_rate),
                "batch_rows_per_s": round(args.count / batch_s),
                "batch_seconds_median": round(batch_s, 3),
                "available_now_rows_per_s": round(args.count / stream_wall),
                "available_now_wall_s": round(stream_wall, 3),
                "available_now_trigger_rows_per_s": round(args.count / (trigger_ms / 1000))
                if trigger_ms
                else None,
                "available_now_batches": sum(1 for p in progress if p["numInputRows"]),
                "json_lines_rows_per_s": round(args.count / json_s),
                "json_lines_seconds_median": round(json_s, 3),
                "tidemq_vs_json_lines": round(json_s / batch_s, 2),
                "query": "groupBy(queueId).agg(count(*), sum(length(body))); stream: noop sink",
                "load_avg_1m": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
