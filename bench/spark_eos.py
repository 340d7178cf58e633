"""Exactly-once proof of the transactional Spark sink: the driver SIGKILLed at random points.

``python -m bench.spark_eos [--trials 20] [--plain-trials 5] [--files 100] [--rows 300] [--max-delay 5]``

An in-process tidemq cluster (checks every 500 ms of half messages older than 1 s, never given
up). For each mode (``transactional=true`` with ``--trials`` kills, then ``transactional=false`` with
``--plain-trials``), one streaming query from a JSON file source (``--files`` files of ``--rows``
unique keys, one file per micro-batch, Trigger.AvailableNow) into a fresh topic, its driver a
separate process (Spark's JVM and Python workers in its own process group):

* each trial starts the driver on the query's checkpoint, waits until its tasks write (the run
  registered in the sink's state; for the plain sink, messages arriving), then sleeps a random 0..``--max-delay`` s and SIGKILLs the whole process group; the trial's
  line tells where the kill fell (from the checkpoint: a batch's tasks writing / its commit recorded / between batches)
  and how many batches were committed;
* a last run goes to the end; once no half message of the group is pending, the topic is read back
  and every key counted.

Prints one JSON line per trial and a summary per mode: keys missing, keys twice or more (the
transactional mode must show 0 and 0; the plain one shows duplicates when a kill fell between a
batch's writes and Spark's commit).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import interpreter, spark_session

GROUP = "tidemq-spark-tx-writer"


def _driver(args: argparse.Namespace) -> None:
    """The driver process: run the query to its end (or until killed)."""
    import tidemq.spark

    spark = spark_session("bench-spark-eos")
    tidemq.spark.use_filesystem_checkpoints(spark)
    query = (
        spark.readStream.schema("k string")
        .option("maxFilesPerTrigger", 1)
        .json(args.src)
        .selectExpr("k as body")
        .writeStream.format("tidemq")
        .option("namesrv", args.namesrv)
        .option("topic", args.topic)
        .option("transactional", args.tx)
        .option("checkpointLocation", args.cp)
        .trigger(availableNow=True)
        .start()
    )
    while query.isActive:  # READY once the first micro-batch is running (its tasks about to write)
        status = query.status
        if status.get("isTriggerActive") and status.get("isDataAvailable"):
            break
        time.sleep(0.02)
    print("READY", flush=True)
    query.awaitTermination()
    print("DONE", flush=True)
    spark.stop()


def _last(directory: Path) -> int:
    """The highest batch id file in a checkpoint log directory (-1 when none)."""
    try:
        ids = [int(n) for n in os.listdir(directory) if n.isdigit()]
    except FileNotFoundError:
        return -1
    return max(ids, default=-1)


def _where(cp: Path) -> dict[str, Any]:
    """Where the kill fell, from the checkpoint (the killed run is the newest in ``runs/``)."""
    offsets, commits = _last(cp / "offsets"), _last(cp / "commits")
    if offsets <= commits:
        return {"batches_committed": commits + 1, "phase": "between batches"}
    state = cp / "tidemq-tx"
    record_path = state / "commits" / str(offsets)
    if not record_path.exists():
        phase = "tasks writing / before the commit's record"
    else:
        runs = state / "runs"
        newest = max(os.listdir(runs), key=lambda n: int((runs / n).read_bytes() or b"0"))
        mine = json.loads(record_path.read_bytes())["runId"] == newest
        phase = "commit recorded, ending halves" if mine else "replaying a batch an earlier run recorded"
    return {"batches_committed": commits + 1, "phase": f"batch {offsets}: {phase}"}


def _start(cli: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.spark_eos", "--driver", *cli],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def _wait_ready(proc: subprocess.Popen[str], timeout: float = 180.0) -> bool:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return False
        if line.strip() == "READY":
            return True
    return False


def _kill(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _marker(cluster: Any, cp: Path, topic: str, tx: bool) -> int:
    """What changes once a run's tasks write: runs registered in the transactional sink's state;
    for the plain sink, messages in the topic (2 queues)."""
    if tx:
        try:
            return len(os.listdir(cp / "tidemq-tx" / "runs"))
        except FileNotFoundError:
            return 0
    store = cluster.broker.store
    return sum(store.get_max_offset_in_queue(topic, q) for q in range(2))


def _wait_writing(proc: subprocess.Popen[str], cluster: Any, cp: Path, topic: str, tx: bool) -> bool:
    """Wait (at most 180 s) until the driver's tasks write; False if the driver ended first."""
    before = _marker(cluster, cp, topic, tx)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if _marker(cluster, cp, topic, tx) != before:
            return True
        time.sleep(0.02)
    return False


def _pending(cluster: Any) -> int:
    service = cluster.broker.transaction_service
    return sum(1 for tx in list(service.pending.values()) if tx.producer_group == GROUP)


def count_bodies(
    namesrv: str, mqs: list[Any], group: str, idle_polls: int = 3, poll_s: float = 0.5
) -> collections.Counter[str]:
    """Every message body in ``mqs`` (MessageQueues, each read from its first offset until
    ``idle_polls`` polls of ``poll_s`` seconds in a row return nothing), counted."""
    from tidemq.client.consumer.pull import PullConsumer

    consumer = PullConsumer(
        namesrv_addr=namesrv, consumer_group=group, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.assign(mqs)
    consumer.start()
    got: collections.Counter[str] = collections.Counter()
    try:
        for mq in mqs:
            consumer.seek_to_begin(mq)
        idle = 0
        while idle < idle_polls:
            batch = consumer.poll(poll_s)
            idle = 0 if batch else idle + 1
            got.update(m.body.decode() for m in batch)
    finally:
        consumer.shutdown()
    return got


def _count(namesrv: str, topic: str) -> collections.Counter[str]:
    from tidemq.client.producer.producer import Producer

    producer = Producer(namesrv_addr=namesrv, producer_group="bench-eos-route")
    producer.start()
    try:
        mqs = producer.fetch_publish_message_queues(topic)
    finally:
        producer.shutdown()
    return count_bodies(namesrv, mqs, f"bench-eos-{topic}")


def _mode(cluster: Any, base: Path, tx: bool, trials: int, args: argparse.Namespace) -> dict[str, Any]:
    from tests.spark.helpers import create_topic

    name = "tx" if tx else "plain"
    src, cp = base / f"in-{name}", base / f"cp-{name}"
    src.mkdir()
    keys: set[str] = set()
    for f in range(args.files):
        rows = [f"k{f}-{i}" for i in range(args.rows)]
        keys.update(rows)
        (src / f"part-{f:05d}.json").write_text("\n".join(json.dumps({"k": k}) for k in rows))
    topic = f"BenchEos{name.capitalize()}"
    create_topic(cluster.namesrv_addr, topic, 2)
    cli = ["--namesrv", cluster.namesrv_addr, "--topic", topic, "--src", str(src), "--cp", str(cp)]
    cli += ["--tx", str(tx).lower()]
    rng = random.Random(args.seed)
    for trial in range(trials):
        proc = _start(cli)
        if not _wait_ready(proc) or not _wait_writing(proc, cluster, cp, topic, tx):
            _kill(proc)
            print(json.dumps({"mode": name, "trial": trial, "error": "driver did not start"}), flush=True)
            continue
        delay = rng.uniform(0, args.max_delay)
        time.sleep(delay)  # the random kill point: a time, not a synchronisation
        finished = proc.poll() is not None
        _kill(proc)
        line = {"mode": name, "trial": trial, "kill_after_s": round(delay, 2), "finished_first": finished}
        print(json.dumps({**line, **_where(cp)}), flush=True)
    proc = _start(cli)
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.wait()
    deadline = time.monotonic() + 60
    while tx and _pending(cluster) and time.monotonic() < deadline:
        time.sleep(0.2)
    counts = _count(cluster.namesrv_addr, topic)
    summary = {
        "mode": name,
        "summary": True,
        "trials": trials,
        "final_run_done": "DONE" in out,
        "source_rows": len(keys),
        "messages": sum(counts.values()),
        "missing": len(keys - set(counts)),
        "twice_or_more": sum(1 for n in counts.values() if n > 1),
        "pending_halves": _pending(cluster),
    }
    print(json.dumps(summary), flush=True)
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--plain-trials", type=int, default=5)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--max-delay", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    for name in ("namesrv", "topic", "src", "cp", "tx"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.driver:
        _driver(args)
        return

    from tidemq.testing import ClusterThread

    with (
        tempfile.TemporaryDirectory() as tmp,
        ClusterThread(
            Path(tmp) / "cluster",
            transaction_time_out=1000,
            transaction_check_interval=500,
            transaction_check_max=10_000,  # 15 UNKNOWs at this pace would be 8 s: a slow commit here
        ) as cluster,
    ):
        results = [_mode(cluster, Path(tmp), True, args.trials, args)]
        if args.plain_trials:
            results.append(_mode(cluster, Path(tmp), False, args.plain_trials, args))
    tx = results[0]
    print(
        json.dumps(
            {
                "exactly_once": tx["missing"] == 0 and tx["twice_or_more"] == 0 and tx["final_run_done"],
                "tx_kills": args.trials,
                "plain_duplicates": results[1]["twice_or_more"] if len(results) > 1 else None,
                "interpreter": interpreter()["python"],
            }
        )
    )


if __name__ == "__main__":
    main()
