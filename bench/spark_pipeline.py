"""The flights pipeline's Spark phase on a standalone cluster: tidemq topic versus JSON-lines files.

``python -m bench.spark_pipeline [--limit N] [--per-trigger 50000] [--workers 2] [--reps 2]``

Setup (one run, this machine):

* an embedded ``tidemq serve`` (the pipeline's broker.conf: pulls of up to 8,192 messages) with the
  topic ``flights`` (8 queues) holding every flight (336,776 by default) as the pipeline publishes
  them (JSON body, one queue per carrier hash);
* the same message bodies written as JSON-lines files of ``--per-trigger`` lines each;
* a Spark standalone cluster on 127.0.0.1 started with PySpark's ``bin/spark-class``: a master and
  ``--workers`` workers of ``--cores`` core(s) and 1 GiB each, the driver in this process
  (:func:`tidemq.pipelines.analytics.build_spark_session`: 512 MiB, 1 core per executor).

Measured after one untimed warm-up run of each, ``--reps`` times, alternating which goes first: the pipeline's Spark phase
(:meth:`FlightsAnalytics.run_stream` with Trigger.AvailableNow then :meth:`~FlightsAnalytics.finalize`,
fresh checkpoint and output each time) reading

* ``tidemq``: the topic with the ``tidemq`` source, ``maxOffsetsPerTrigger=--per-trigger``,
  ``from_json`` on the body;
* ``json_lines``: the files with Spark's JSON file source (schema given), ``maxFilesPerTrigger=1``,
  so both run the same number of micro-batches of the same flights.

Both runs' carrier tables must be equal. Prints one JSON line: seconds of every run, medians,
flights/s and ``tidemq_vs_json_lines`` (JSON time / tidemq time; > 1 means tidemq is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _publish(namesrv: str, flights: Any) -> float:
    """Publish every flight as the pipeline does; returns seconds."""
    from tidemq.admin.client import AdminClient
    from tidemq.client.producer.producer import AsyncProducer
    from tidemq.pipelines.flights import FLIGHTS_QUEUES, FLIGHTS_TOPIC, ensure_topic
    from tidemq.pipelines.publisher import FlightsPublisher

    with AdminClient(namesrv) as admin:
        ensure_topic(admin, FLIGHTS_TOPIC, FLIGHTS_QUEUES)

        async def run() -> None:
            producer = AsyncProducer(namesrv_addr=namesrv, producer_group="bench-flights")
            await producer.start()
            try:
                await FlightsPublisher(producer, admin.core, FLIGHTS_TOPIC).publish(flights, lambda n: None)
            finally:
                await producer.shutdown()

        t = time.perf_counter()
        admin.loop_thread.run(run(), 900.0)
        return time.perf_counter() - t


def _write_json_lines(directory: Path, flights: Any, per_file: int) -> int:
    """The message bodies, ``per_file`` lines per file; returns the number of files."""
    from tidemq.pipelines.flights_data import flight_messages

    directory.mkdir(parents=True)
    files = 0
    out = None
    for i, msg in enumerate(flight_messages(flights)):
        if i % per_file == 0:
            if out is not None:
                out.close()
            out = open(directory / f"part-{files:05d}.json", "wb")  # noqa: SIM115
            files += 1
        assert out is not None
        out.write(msg.body + b"\n")
    if out is not None:
        out.close()
    return files


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, default=None, help="first N flights (default all 336,776)")
    parser.add_argument("--per-trigger", type=int, default=50_000, help="flights per micro-batch (50,000)")
    parser.add_argument("--workers", type=int, default=2, help="standalone workers (2)")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker (1)")
    parser.add_argument("--reps", type=int, default=3, help="timed runs of each (3)")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from tidemq.pipelines.analytics import (
        FLIGHT_DDL,
        FlightsAnalytics,
        build_spark_session,
        describe_executors,
    )
    from tidemq.pipelines.embedded import EmbeddedBroker
    from tidemq.pipelines.flights_data import load_flights_data
    from tidemq.spark.standalone import StandaloneCluster

    data = load_flights_data(args.limit)
    n = data.flights.num_rows
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-pipeline-") as tmp_name:
        tmp = Path(tmp_name)
        broker = EmbeddedBroker(tmp / "store", log_path=tmp / "serve.log").start()
        cluster = StandaloneCluster(tmp / "spark", workers=args.workers, cores=args.cores, memory="1g")
        spark = None
        try:
            publish_s = _publish(broker.namesrv_addr, data.flights)
            json_dir = tmp / "jsonl"
            files = _write_json_lines(json_dir, data.flights, args.per_trigger)
            cluster.start()
            spark = build_spark_session(cluster.master_url, app_name="bench-spark-pipeline")
            executors, pythons = describe_executors(spark)  # also starts the executors' Python workers

            def run(kind: str, rep: int) -> tuple[float, int, Any]:
                analytics = FlightsAnalytics(
                    spark,
                    broker.namesrv_addr,
                    tmp / f"out-{kind}-{rep}",
                    tmp / f"chk-{kind}-{rep}",
                    max_offsets_per_trigger=args.per_trigger,
                )
                source = None
                if kind == "json_lines":
                    source = (
                        spark.readStream.schema(FLIGHT_DDL)
                        .option("maxFilesPerTrigger", 1)
                        .json(str(json_dir))
                    )
                t = time.perf_counter()
                batches = analytics.run_stream(source=source)
                result = analytics.finalize(data.airlines, data.weather)
                seconds = time.perf_counter() - t
                assert result.rows == n, f"{kind}: {result.rows} flights, expected {n}"
                return seconds, batches, result.carriers

            times: dict[str, list[float]] = {"tidemq": [], "json_lines": []}
            batches: dict[str, int] = {}
            carriers: dict[str, Any] = {}
            for kind in ("tidemq", "json_lines"):  # warm-up: JIT, Python workers, connections
                run(kind, -1)
            for rep in range(args.reps):
                order = ["tidemq", "json_lines"] if rep % 2 == 0 else ["json_lines", "tidemq"]
                for kind in order:
                    seconds, batches[kind], carriers[kind] = run(kind, rep)
                    times[kind].append(seconds)
                    print(
                        f"rep {rep} {kind}: {seconds:.2f} s, {batches[kind]} batches",
                        file=sys.stderr,
                        flush=True,
                    )
            a = carriers["tidemq"].sort_values("carrier").reset_index(drop=True)
            b = carriers["json_lines"].sort_values("carrier").reset_index(drop=True)
            assert a[["carrier", "flights", "cancelled", "departed"]].equals(
                b[["carrier", "flights", "cancelled", "departed"]]
            ), "the two runs' carrier tables differ"
        finally:
            if spark is not None:
                spark.stop()
            cluster.stop()
            broker.stop()

    tidemq_s = statistics.median(times["tidemq"])
    json_s = statistics.median(times["json_lines"])
    print(
        json.dumps(
            {
                "bench": "spark_pipeline",
                "flights": n,
                "spark": f"standalone: master + {args.workers} workers x {args.cores} core, 1g; "
                f"{executors} executors (512m, 1 core), driver in the bench process",
                "executor_python": pythons,
                "per_trigger": args.per_trigger,
                "json_files": files,
                "publish_seconds": round(publish_s, 2),
                "tidemq_seconds": [round(t, 2) for t in times["tidemq"]],
                "json_lines_seconds": [round(t, 2) for t in times["json_lines"]],
                "tidemq_seconds_median": round(tidemq_s, 2),
                "json_lines_seconds_median": round(json_s, 2),
                "tidemq_flights_per_s": round(n / tidemq_s),
                "json_lines_flights_per_s": round(n / json_s),
                "tidemq_vs_json_lines": round(json_s / tidemq_s, 2),
                "batches": batches,
                "phase": "FlightsAnalytics.run_stream (AvailableNow, foreachBatch partials) + finalize",
                "load_avg_1m": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
