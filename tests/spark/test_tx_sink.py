"""The transactional sink: a stream's driver commit killed at fixed points and restarted from the
checkpoint leaves every source row in the topic once; the plain sink duplicates; a failed batch
write leaves nothing visible; leftover half messages are rolled back by the checks."""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path
from typing import Any

import pytest

import tidemq.spark
from bench.spark_eos import count_bodies
from tests.helpers import wait_for_sync
from tests.spark.helpers import create_topic
from tidemq.clock import now_ms
from tidemq.protocol.message import MessageQueue
from tidemq.spark.options import DEFAULT_TX_PRODUCER_GROUP
from tidemq.spark.tx_state import FAULT_FILE, TxState, state_root

ROWS_PER_FILE = 40
FILES = 3


def _read_keys(namesrv: str, mqs: list[MessageQueue], group: str) -> collections.Counter[str]:
    """Every message body in ``mqs`` (read to each queue's end), counted."""
    return count_bodies(namesrv, mqs, group, idle_polls=2, poll_s=0.3)


def _input(tmp_path: Path) -> tuple[Path, set[str]]:
    src = tmp_path / "in"
    src.mkdir()
    keys: set[str] = set()
    for f in range(FILES):
        rows = [{"k": f"k{f}-{i}"} for i in range(ROWS_PER_FILE)]
        keys.update(r["k"] for r in rows)
        (src / f"part-{f}.json").write_text("\n".join(json.dumps(r) for r in rows))
    return src, keys


def _run(spark: Any, namesrv: str, topic: str, src: Path, cp: Path, tx: bool, fault: str | None) -> bool:
    """One run of the query (AvailableNow, a file per batch); True if it ended normally. With
    ``fault`` the driver's next commit kills its process at that point."""
    if fault is not None:
        root = state_root(str(cp))
        root.mkdir(parents=True, exist_ok=True)
        (root / FAULT_FILE).write_text(fault)
    query = _start(spark, namesrv, topic, src, cp, tx)
    try:
        query.awaitTermination(120)
    except Exception:
        assert fault is not None, "the query failed without a fault"
        return False
    assert fault is None, f"fault {fault} did not happen"
    return True


def _start(spark: Any, namesrv: str, topic: str, src: Path, cp: Path, tx: bool) -> Any:
    return (
        spark.readStream.schema("k string")
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .selectExpr("k as body")
        .writeStream.format("tidemq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("transactional", str(tx).lower())
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )


def _pending(cluster: Any) -> int:
    service = cluster.broker.transaction_service
    return sum(1 for tx in list(service.pending.values()) if tx.producer_group == DEFAULT_TX_PRODUCER_GROUP)


@pytest.fixture
def quick_checks(cluster: Any) -> Any:
    """The broker checks half messages older than 300 ms every 200 ms while the test runs (and
    never gives one up: 15 UNKNOWs would be 3 s, less than a slow commit may take here)."""
    config = cluster.broker.config
    saved = (config.transaction_time_out, config.transaction_check_interval, config.transaction_check_max)
    config.transaction_time_out, config.transaction_check_interval = 300, 200
    config.transaction_check_max = 10_000  # the broker's maximum
    cluster.loop_thread.call_soon(cluster.broker.transaction_service.wakeup)
    try:
        yield cluster
    finally:
        config.transaction_time_out, config.transaction_check_interval, config.transaction_check_max = saved


def _wait_no_pending(cluster: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while _pending(cluster) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _pending(cluster) == 0, f"{_pending(cluster)} half messages still pending"


def _kill_restart(spark: Any, namesrv: str, topic: str, src: Path, cp: Path) -> None:
    # batch 0: the driver dies after the tasks wrote, before the commit recorded anything
    assert not _run(spark, namesrv, topic, src, cp, True, "before-record")
    # batch 0 again: the driver dies in the middle of its COMMITs (the batch is recorded)
    assert not _run(spark, namesrv, topic, src, cp, True, "mid-commit")
    # batch 0 once more: dies right after reading the record, before any COMMIT
    assert not _run(spark, namesrv, topic, src, cp, True, "after-record")
    assert _run(spark, namesrv, topic, src, cp, True, None)


def test_stream_killed_at_commit_points_is_exactly_once(
    spark: Any, quick_checks: Any, tmp_path: Path
) -> None:
    namesrv = quick_checks.namesrv_addr
    topic = "SparkTxOut"
    mqs = create_topic(namesrv, topic, 2)
    src, keys = _input(tmp_path)
    cp = tmp_path / "cp"
    checks = quick_checks.broker.transaction_service.checks_sent
    checker = tidemq.spark.transaction_checker(namesrv, topic)  # the driver's check listener
    try:
        _kill_restart(spark, namesrv, topic, src, cp)
        _wait_no_pending(quick_checks)
    finally:
        checker.shutdown()
    # The first run's halves (its driver's commit killed before the record) were ended either by the
    # abort Spark runs in a new worker (recorded under aborts/) or, when the broker's check came
    # first, by the checker answering from the checkpoint: which one wins is a race (bench.spark_eos
    # kills the whole driver, where only the checks can end them).
    aborted = list((state_root(str(cp)) / "aborts").glob("0.*"))
    assert aborted or quick_checks.broker.transaction_service.checks_sent > checks
    counts = _read_keys(namesrv, mqs, "tx-check-1")
    assert set(counts) == keys
    assert [k for k, n in counts.items() if n != 1] == []


def test_plain_sink_duplicates_where_transactional_does_not(spark: Any, cluster: Any, tmp_path: Path) -> None:
    namesrv = cluster.namesrv_addr
    topic = "SparkPlainOut"
    mqs = create_topic(namesrv, topic, 2)
    src, keys = _input(tmp_path)
    cp = tmp_path / "cp"
    assert not _run(spark, namesrv, topic, src, cp, False, "before-record")
    assert _run(spark, namesrv, topic, src, cp, False, None)
    counts = _read_keys(namesrv, mqs, "plain-check-1")
    assert set(counts) == keys
    assert sum(1 for n in counts.values() if n > 1) == ROWS_PER_FILE  # batch 0, twice


def test_failed_batch_write_leaves_nothing_visible(spark: Any, quick_checks: Any, tmp_path: Path) -> None:
    from pyspark.sql.functions import udf

    namesrv = quick_checks.namesrv_addr
    topic = "SparkTxBatchFail"
    mqs = create_topic(namesrv, topic, 2)

    @udf("string")  # type: ignore[misc]
    def body(n: int) -> str:
        if n >= 200:  # the third partition: it runs once one of the first two has written
            raise ValueError("task fails")
        return f"r{n}"

    df = spark.range(0, 300, numPartitions=3).select(body("id").alias("body"))
    # the failed and the cancelled task's workers die with their producers: the driver answers
    checker = tidemq.spark.transaction_checker(namesrv, topic)
    try:
        with pytest.raises(Exception, match="task fails"):
            df.write.format("tidemq").option("namesrv", namesrv).option("topic", topic).option(
                "transactional", "true"
            ).option("checkpointLocation", str(tmp_path)).mode("append").save()
        _wait_no_pending(quick_checks)
    finally:
        checker.shutdown()
    assert _read_keys(namesrv, mqs, "tx-check-2") == collections.Counter()


def test_batch_write_commits_all(spark: Any, cluster: Any, tmp_path: Path) -> None:
    namesrv = cluster.namesrv_addr
    topic = "SparkTxBatchOk"
    mqs = create_topic(namesrv, topic, 2)
    df = spark.range(0, 300, numPartitions=3).selectExpr("concat('r', id) as body")
    df.write.format("tidemq").option("namesrv", namesrv).option("topic", topic).option(
        "transactional", "true"
    ).option("checkpointLocation", str(tmp_path)).mode("append").save()
    assert len(list((tmp_path / "tidemq-tx").iterdir())) == 1  # the job's state, under the option
    counts = _read_keys(namesrv, mqs, "tx-check-3")
    assert counts == collections.Counter({f"r{i}": 1 for i in range(300)})


def test_stream_stops_while_the_broker_refuses_a_batch_commit(
    spark: Any, cluster: Any, tmp_path: Path
) -> None:
    """Batch 0's halves are discarded between the driver's record and its COMMITs: the query stops
    naming the batch, a restart stops the same way (no row skipped silently), and once the user
    accepts the loss the query goes on with the other batches, each row once."""
    namesrv = cluster.namesrv_addr
    topic = "SparkTxRefused"
    mqs = create_topic(namesrv, topic, 2)
    src, keys = _input(tmp_path)
    cp = tmp_path / "cp"
    root = state_root(str(cp))
    root.mkdir(parents=True)
    (root / FAULT_FILE).write_text("pause-after-record")
    query = _start(spark, namesrv, topic, src, cp, True)
    wait_for_sync(lambda: (root / FAULT_FILE).read_text() == "paused-after-record", 60, "batch 0 recorded")
    service, config = cluster.broker.transaction_service, cluster.broker.config
    saved = config.transaction_check_max
    config.transaction_check_max, service.clock_ms = 0, lambda: now_ms() + 3_600_000  # discard, no check
    try:
        discarded = service.discarded
        cluster.run(service.check_pass())
        assert service.discarded > discarded and _pending(cluster) == 0
    finally:
        config.transaction_check_max, service.clock_ms = saved, now_ms
    (root / FAULT_FILE).unlink()  # the driver's COMMITs go on: refused
    for attempt in range(2):
        with pytest.raises(Exception, match="batch 0 is recorded committed, but the broker refused") as err:
            query.awaitTermination(120)
        assert "lost/0 to 0.accepted" in str(err.value)
        if attempt == 0:
            query = _start(spark, namesrv, topic, src, cp, True)  # restarted: batch 0 again
    TxState(root).lost_path(0).rename(root / "lost" / "0.accepted")
    spark.conf.set("spark.sql.streaming.minBatchesToRetain", "1")  # Spark keeps 1 batch: we purge
    try:
        assert _run(spark, namesrv, topic, src, cp, True, None)
    finally:
        spark.conf.unset("spark.sql.streaming.minBatchesToRetain")
    # batch 0 ended without its lost rows; its files went with Spark's offsets/0
    assert sorted(p.name for p in (root / "commits").iterdir()) == ["1", "2"]
    assert list((root / "lost").iterdir()) == [] and TxState(root).purged_below() == 1
    counts = _read_keys(namesrv, mqs, "tx-check-refused")
    assert set(counts.values()) == {1} and len(counts) == ROWS_PER_FILE * (FILES - 1)
    assert len({k.split("-")[0] for k in keys - set(counts)}) == 1  # one file's rows: batch 0's
