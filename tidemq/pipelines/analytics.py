"""The flights pipeline's Spark Structured Streaming job (consumer group ``flights-analytics``).

Reads the ``flights`` topic with the ``tidemq`` source and computes, exactly once across
interruptions:

* per carrier: flights, cancelled flights (``dep_time`` null), mean and 90th-percentile departure
  delay, share of departures more than 15 minutes late, with the airline's name;
* per origin airport and scheduled hour (``time_hour``): flights, mean departure delay, joined
  with that hour's weather (``visib``, ``wind_speed``, ``precip``).

**Exactly-once design.** ``foreachBatch`` turns each micro-batch into small *partial aggregates*
and writes them as ``_batches/<table>/batch-<id>.parquet`` (temporary file + rename):

* ``carrier_hist``: ``carrier, dep_delay, cancelled, n`` -- an exact histogram (delays are whole
  minutes), so counts, sums *and* the exact p90 (Spark's ``percentile`` with frequencies) merge;
* ``origin_hour``: ``origin, time_hour, year, month, day, hour, flights, departed, sum_dep_delay``;
* ``batches``: ``batch_id, rows, id_sum, id_min, id_max`` (bookkeeping, lets a test prove that no
  flight was counted twice).

Spark logs a batch's offsets before running it and replays the same offsets under the same
batch id after a crash, so a replayed batch rewrites identical files; a committed batch is never
replayed. The final tables are computed from all batch files, which therefore hold each flight
exactly once however often the job was interrupted. Partials belong to their checkpoint: when
the checkpoint is missing they are cleared.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "ANALYTICS_GROUP",
    "FLIGHT_DDL",
    "FlightsAnalytics",
    "build_spark_session",
    "describe_executors",
]

log = logging.getLogger(__name__)

ANALYTICS_GROUP = "flights-analytics"

FLIGHT_DDL = (
    "id bigint, year int, month int, day int, dep_time int, sched_dep_time int, dep_delay int, "
    "arr_time int, sched_arr_time int, arr_delay int, carrier string, flight int, tailnum string, "
    "origin string, dest string, air_time int, distance int, hour int, minute int, time_hour string"
)
"""Schema of a flight message's JSON body (``from_json``)."""

PARTIAL_TABLES = ("carrier_hist", "origin_hour", "batches")

BatchHook = Callable[[int], None]
"""``hook(batch_id)``: called after a batch's partials are written (tests inject faults here)."""


def build_spark_session(master: str = "local[*]", app_name: str = "tidemq-flights") -> Any:
    """A SparkSession for the pipeline, with the ``tidemq`` format registered.

    ``master`` is ``local[*]``-style or a standalone cluster ``spark://host:port`` (on loopback the
    driver binds to 127.0.0.1 too; executors get 512 MiB, env ``TIDEMQ_EXECUTOR_MEMORY``). Sets ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` to this interpreter unless already set
    (the Python workers need pyarrow and tidemq; for a ``local`` master ``PYSPARK_PYTHON`` is
    :func:`tidemq.spark.python_launcher` of it, so Spark's Python processes import the installed
    PySpark instead of ``pyspark.zip``, and checkpoints are written by
    :func:`tidemq.spark.use_filesystem_checkpoints`), few shuffle partitions (the aggregates are
    small), no UI, UTC session time zone and Arrow for pandas conversions.
    """
    if "PYSPARK_PYTHON" not in os.environ:
        from tidemq.spark.launcher import python_launcher

        # local: Spark's Python processes import the installed PySpark, not pyspark.zip (the
        # launcher's path exists on this machine only, so a cluster's executors get the interpreter)
        os.environ["PYSPARK_PYTHON"] = (
            python_launcher(sys.executable) if master.startswith("local") else sys.executable
        )
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    from pyspark.sql import SparkSession

    import tidemq.spark

    builder = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local") or _loopback_master(master):
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
            "spark.driver.host", "127.0.0.1"
        )
    if master.startswith("spark://"):
        # A standalone cluster: executors run this interpreter (same machine or same venv path) and
        # fit in a small worker (tidemq.spark.standalone offers 1 core and 1 GiB per worker).
        builder = (
            builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
            .config("spark.executor.memory", os.environ.get("TIDEMQ_EXECUTOR_MEMORY", "512m"))
            .config("spark.executor.cores", "1")
        )
    spark = (
        builder.config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    tidemq.spark.register(spark)
    if master.startswith("local"):
        tidemq.spark.use_filesystem_checkpoints(spark)  # checkpoints on local disk: no forks per file
    return spark


def describe_executors(spark: Any) -> tuple[int, list[str]]:
    """The cluster's executors: how many are registered, and the Python their tasks run (sorted).

    Runs one small job (two tasks per executor) that reports ``sys.executable``; meant for cluster
    masters, where a wrong ``PYSPARK_PYTHON`` is the usual mistake. ``local[*]`` has 0 executors
    besides the driver and answers the driver's worker Python.
    """
    sc = spark.sparkContext
    executors = max(0, int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1)
    tasks = max(2, 2 * executors)
    pythons = sc.parallelize(range(tasks), tasks).map(lambda _: sys.executable).distinct().collect()
    return executors, sorted(str(p) for p in pythons)


def _loopback_master(master: str) -> bool:
    """Whether ``spark://host:port[,host:port]`` names only this machine (then the driver binds to loopback)."""
    hosts = [h.rsplit(":", 1)[0] for h in master.removeprefix("spark://").split(",")]
    return bool(hosts) and all(h in ("127.0.0.1", "localhost") for h in hosts)


def _atomic_write(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


@dataclass(slots=True)
class AnalyticsResult:
    """The final tables (pandas DataFrames) and where they were written."""

    carriers: Any
    origin_hour: Any
    rows: int
    batches: int
    out_dir: Path


class FlightsAnalytics:
    """The streaming job and the final merge.

    Args:
        spark: a SparkSession from :func:`build_spark_session`.
        namesrv: the cluster's name server.
        out_dir: results directory (``./out/flights``); partials go to ``out_dir/_batches``.
        checkpoint: the query's checkpoint directory.
        topic: the flights topic.
        group: consumer group whose offsets follow the query (``flights-analytics``).
        max_offsets_per_trigger: messages per micro-batch (None = all available at once).
        batch_hook: see :data:`BatchHook`.
    """

    def __init__(
        self,
        spark: Any,
        namesrv: str,
        out_dir: Path,
        checkpoint: Path,
        *,
        topic: str = "flights",
        group: str = ANALYTICS_GROUP,
        max_offsets_per_trigger: int | None = 50_000,
        batch_hook: BatchHook | None = None,
    ) -> None:
        self.spark = spark
        self.namesrv = namesrv
        self.out_dir = Path(out_dir)
        self.partials = self.out_dir / "_batches"
        self.checkpoint = Path(checkpoint)
        self.topic = topic
        self.group = group
        self.max_offsets_per_trigger = max_offsets_per_trigger
        self.batch_hook = batch_hook
        self.batches_run = 0

    # -- streaming -------------------------------------------------------------------------

    def _checkpoint_exists(self) -> bool:
        return (self.checkpoint / "offsets").is_dir() and any((self.checkpoint / "offsets").iterdir())

    def run_stream(self, timeout: float | None = None, *, source: Any | None = None) -> int:
        """Run the query with ``Trigger.AvailableNow`` until everything stored now is processed.

        Resumes from the checkpoint when there is one. Returns the number of micro-batches this
        call ran.

        Args:
            timeout: seconds to wait for the query (None: until it ends by itself).
            source: a streaming DataFrame of flights (:data:`FLIGHT_DDL` columns) to read instead
                of the topic, e.g. ``spark.readStream.schema(FLIGHT_DDL).json(dir)`` (the benches
                compare the two); no group offsets are committed then.

        Raises:
            StreamingQueryException: a batch failed.
        """
        import tidemq.spark

        if not self._checkpoint_exists() and self.partials.exists():
            log.info("no checkpoint at %s: clearing stale partials %s", self.checkpoint, self.partials)
            shutil.rmtree(self.partials)
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        committer = None
        if source is None:
            committer = tidemq.spark.attach_offset_committer(
                self.spark, namesrv=self.namesrv, group=self.group, topics=[self.topic]
            )
        try:
            flights = self.topic_flights() if source is None else source
            query = (
                flights.writeStream.queryName("flights-analytics")
                .foreachBatch(self.process_batch)
                .option("checkpointLocation", str(self.checkpoint))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination(timeout)
            if query.isActive:
                query.stop()
            exc = query.exception()
            if exc is not None:
                raise exc
            for p in query.recentProgress:
                if p["numInputRows"]:
                    log.info(
                        "flights-analytics: batch %s: %d rows, durationMs %s",
                        p["batchId"],
                        p["numInputRows"],
                        json.dumps(p["durationMs"], sort_keys=True),
                    )
            if committer is not None:
                self._wait_committed(query, committer)
        finally:
            if committer is not None:
                self.spark.streams.removeListener(committer)
                committer.close()
        return self.batches_run

    def topic_flights(self) -> Any:
        """The flights of the topic as a streaming DataFrame with the :data:`FLIGHT_DDL` columns."""
        from pyspark.sql import functions as F

        reader = (
            self.spark.readStream.format("tidemq")
            .schema("body binary")  # the job needs only the body: the source decodes nothing else
            .option("namesrv", self.namesrv)
            .option("topic", self.topic)
            .option("group", self.group)
            .option("startingOffsets", "earliest")
        )
        if self.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_offsets_per_trigger))
        return (
            reader.load()
            .select(F.from_json(F.col("body").cast("string"), FLIGHT_DDL).alias("f"))
            .select("f.*")
        )

    def _wait_committed(self, query: Any, committer: Any) -> None:
        """Wait until the listener wrote the last batch's end offsets to the group (it runs async)."""
        from tidemq.spark.offsets import OffsetError, from_offset_json

        progress = query.lastProgress
        if not progress or self.batches_run == 0:
            return
        end: dict[Any, int] = {}
        for source in progress.get("sources", []):
            try:
                end.update(from_offset_json(source.get("endOffset")))
            except OffsetError:
                continue
        if end and not committer.wait_for(end, 30.0):
            log.warning("group %s: the last batch's offsets were not committed within 30 s", self.group)

    def process_batch(self, df: Any, batch_id: int) -> None:
        """``foreachBatch``: write this batch's partial aggregates (idempotent by ``batch_id``)."""
        from pyspark.sql import functions as F

        # One task per queue is more tasks than cores for a 50,000-flight batch; every aggregation
        # below runs as many tasks as the cached DataFrame has partitions, so merge them first.
        df = df.coalesce(max(1, int(self.spark.sparkContext.defaultParallelism))).persist()
        try:
            hist = df.groupBy("carrier", "dep_delay", F.col("dep_time").isNull().alias("cancelled")).agg(
                F.count(F.lit(1)).alias("n")
            )
            hours = df.groupBy("origin", "time_hour", "year", "month", "day", "hour").agg(
                F.count(F.lit(1)).alias("flights"),
                F.count("dep_delay").alias("departed"),
                F.sum("dep_delay").alias("sum_dep_delay"),
            )
            meta = df.agg(
                F.count(F.lit(1)).alias("rows"),
                F.sum("id").alias("id_sum"),
                F.min("id").alias("id_min"),
                F.max("id").alias("id_max"),
            ).withColumn("batch_id", F.lit(batch_id).cast("bigint"))
            name = f"batch-{batch_id:08d}.parquet"
            _atomic_write(hist.toArrow(), self.partials / "carrier_hist" / name)
            _atomic_write(hours.toArrow(), self.partials / "origin_hour" / name)
            _atomic_write(meta.toArrow(), self.partials / "batches" / name)
        finally:
            df.unpersist()
        self.batches_run += 1
        log.info("flights-analytics: batch %d written", batch_id)
        if self.batch_hook is not None:
            self.batch_hook(batch_id)

    # -- final merge -----------------------------------------------------------------------

    def finalize(self, airlines: pa.Table, weather: pa.Table) -> AnalyticsResult:
        """Merge every batch's partials into the final tables; write them as Parquet.

        Writes ``out_dir/carriers`` and ``out_dir/origin_hour`` (one Parquet file each, replaced
        on every run) and returns them as pandas DataFrames.

        Raises:
            FileNotFoundError: no batch has been processed yet.
        """
        from pyspark.sql import functions as F

        if not (self.partials / "batches").is_dir():
            raise FileNotFoundError(f"no batch output under {self.partials}: run the stream first")
        spark = self.spark
        hist = spark.read.parquet(str(self.partials / "carrier_hist"))
        hours = spark.read.parquet(str(self.partials / "origin_hour"))
        meta = spark.read.parquet(str(self.partials / "batches")).agg(
            F.sum("rows").alias("rows"), F.count(F.lit(1)).alias("batches")
        )
        carriers = _carriers_frame(spark, hist, airlines)
        origin_hour = _origin_hour_frame(spark, hours, weather)
        carriers_tbl = carriers.toArrow()
        hours_tbl = origin_hour.toArrow()
        _write_result(carriers_tbl, self.out_dir / "carriers")
        _write_result(hours_tbl, self.out_dir / "origin_hour")
        m = meta.collect()[0]
        return AnalyticsResult(
            carriers=carriers_tbl.to_pandas(),
            origin_hour=hours_tbl.to_pandas(),
            rows=int(m["rows"] or 0),
            batches=int(m["batches"] or 0),
            out_dir=self.out_dir,
        )


def _carriers_frame(spark: Any, hist: Any, airlines: pa.Table) -> Any:
    """Per carrier, from the merged histograms: flights, cancelled, departed, mean and p90 departure
    delay, share more than 15 minutes late, with the airline's name; most flights first."""
    from pyspark.sql import functions as F

    departed = F.when(F.col("dep_delay").isNotNull(), F.col("n")).otherwise(0)
    return (
        hist.groupBy("carrier")
        .agg(
            F.sum("n").alias("flights"),
            F.sum(F.when(F.col("cancelled"), F.col("n")).otherwise(0)).alias("cancelled"),
            F.sum(departed).alias("departed"),
            (F.sum(F.col("dep_delay") * F.col("n")) / F.sum(departed)).alias("mean_dep_delay"),
            F.percentile(F.col("dep_delay"), F.lit(0.9), F.col("n")).alias("p90_dep_delay"),
            (F.sum(F.when(F.col("dep_delay") > 15, F.col("n")).otherwise(0)) / F.sum(departed)).alias(
                "share_late_15"
            ),
        )
        .join(spark.createDataFrame(airlines), "carrier", "left")
        .select(
            "carrier",
            "name",
            F.col("flights").cast("bigint"),
            F.col("cancelled").cast("bigint"),
            F.col("departed").cast("bigint"),
            "mean_dep_delay",
            "p90_dep_delay",
            "share_late_15",
        )
        .orderBy(F.desc("flights"), "carrier")
    )


def _origin_hour_frame(spark: Any, hours: Any, weather: pa.Table) -> Any:
    """Per origin airport and hour: flights, departed, mean departure delay, with that hour's weather."""
    from pyspark.sql import functions as F

    wx = spark.createDataFrame(weather.select(["origin", "time_hour", "visib", "wind_speed", "precip"]))
    return (
        hours.groupBy("origin", "time_hour", "year", "month", "day", "hour")
        .agg(
            F.sum("flights").alias("flights"),
            F.sum("departed").alias("departed"),
            (F.sum("sum_dep_delay") / F.sum("departed")).alias("mean_dep_delay"),
        )
        .join(wx, ["origin", "time_hour"], "left")
        .orderBy("origin", "time_hour")
    )


def _write_result(table: pa.Table, directory: Path) -> None:
    """Write ``table`` as ``directory/part-0.parquet`` (replaced atomically)."""
    _atomic_write(table, directory / "part-0.parquet")
