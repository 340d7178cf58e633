"""HA benchmark: replication throughput and the latency SYNC_MASTER adds over ASYNC_MASTER.

Setup: a local cluster of real processes (``tidemq cluster``: one name server, one broker group of
a master and one slave, 127.0.0.1, async disk flush, 16 MiB commit-log segments) per role.

* ``send_latency``: one blocking tidemq ``Producer`` sending 1 KiB messages one at a time (after a
  warm-up), for ASYNC_MASTER and SYNC_MASTER: per-send latency p50 / p99 (ms) and sends/s; the
  difference of the p50s is what waiting for the slave costs.
* ``replication``: with the slave stopped, ``--mb`` MiB of 1 KiB messages are sent to the
  ASYNC_MASTER in batches of 32; then the slave is started and the time until its commit log
  reaches the master's max offset (``commitLogMaxOffset`` of GET_BROKER_RUNTIME_INFO, polled every
  50 ms), counted from the slave's ready line, gives the catch-up throughput in MiB/s (the time
  including the process start is printed too).

Run: ``python -m bench.ha [--messages N] [--mb M]``. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tidemq.admin.client import AdminClient
from tidemq.client.producer.producer import Producer
from tidemq.cluster import LocalCluster
from tidemq.protocol.message import Message

TOPIC = "BenchHa"
BODY = b"x" * 1024
CONF = {"mappedFileSizeCommitLog": str(16 << 20)}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def send_latency(root: Path, sync: bool, messages: int) -> dict[str, float]:
    """Single-message send latency against a master with one slave."""
    with LocalCluster(root, groups=1, replicas=1, sync=sync, extra_conf=CONF).up() as cluster:
        with AdminClient(cluster.namesrv_addr) as admin:
            admin.call("create_topic", TOPIC, 4)
        producer = Producer(namesrv_addr=cluster.namesrv_addr, producer_group="bench-ha")
        producer.start()
        try:
            statuses: set[str] = set()
            for _ in range(200):  # warm-up: route, connections, slave link
                producer.send(Message(TOPIC, BODY))
            lat: list[float] = []
            start = time.perf_counter()
            for _ in range(messages):
                t0 = time.perf_counter()
                statuses.add(producer.send(Message(TOPIC, BODY)).send_status)
                lat.append((time.perf_counter() - t0) * 1000)
            elapsed = time.perf_counter() - start
        finally:
            producer.shutdown()
    assert statuses == {"SEND_OK"}, statuses
    return {
        "p50_ms": round(statistics.median(lat), 3),
        "p99_ms": round(_pct(lat, 0.99), 3),
        "sends_per_s": round(messages / elapsed, 1),
    }


def replication(root: Path, mb: int) -> dict[str, float]:
    """Catch-up throughput of a slave started behind ``mb`` MiB of commit log."""
    with LocalCluster(root, groups=1, replicas=1, sync=False, extra_conf=CONF).up() as cluster:
        ns = cluster.namesrv_addr
        with AdminClient(ns) as admin:
            admin.call("create_topic", TOPIC, 4)
            cluster.stop_node("broker-a-1")
            producer = Producer(namesrv_addr=ns, producer_group="bench-ha-fill")
            producer.start()
            try:
                batch = [Message(TOPIC, BODY) for _ in range(32)]
                for _ in range(mb * 1024 // 32):
                    producer.send_batch(batch)
            finally:
                producer.shutdown()
            master = cluster.node("broker-a-0").addr

            def max_offset(addr: str) -> int:
                return int(admin.call("fetch_broker_runtime_stats", addr)["commitLogMaxOffset"])

            target = max_offset(master)
            begin = time.perf_counter()
            slave = cluster.start_node("broker-a-1").addr
            start = time.perf_counter()
            while max_offset(slave) < target:
                time.sleep(0.05)  # polling the slave's reported offset is the measurement
            elapsed = time.perf_counter() - start
    return {
        "bytes": target,
        "seconds": round(elapsed, 3),
        "mib_per_s": round(target / elapsed / (1 << 20), 1),
        "seconds_with_process_start": round(time.perf_counter() - begin, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=2000, help="timed single sends per role")
    parser.add_argument("--mb", type=int, default=64, help="MiB the slave has to catch up")
    args = parser.parse_args()
    out: dict[str, Any] = {"bench": "ha", "body_bytes": len(BODY)}
    with tempfile.TemporaryDirectory(prefix="bench-ha-") as tmp:
        root = Path(tmp)
        out["async_master"] = send_latency(root / "async", False, args.messages)
        out["sync_master"] = send_latency(root / "sync", True, args.messages)
        out["sync_added_p50_ms"] = round(out["sync_master"]["p50_ms"] - out["async_master"]["p50_ms"], 3)
        out["sync_added_p99_ms"] = round(out["sync_master"]["p99_ms"] - out["async_master"]["p99_ms"], 3)
        out["replication"] = replication(root / "catchup", args.mb)
    a, s, r = out["async_master"], out["sync_master"], out["replication"]
    print(f"{'role':<14}{'p50 ms':>10}{'p99 ms':>10}{'sends/s':>10}")
    print(f"{'ASYNC_MASTER':<14}{a['p50_ms']:>10}{a['p99_ms']:>10}{a['sends_per_s']:>10}")
    print(f"{'SYNC_MASTER':<14}{s['p50_ms']:>10}{s['p99_ms']:>10}{s['sends_per_s']:>10}")
    print(f"SYNC_MASTER adds {out['sync_added_p50_ms']} ms at p50, {out['sync_added_p99_ms']} ms at p99")
    print(f"slave catch-up: {r['bytes']} bytes in {r['seconds']} s = {r['mib_per_s']} MiB/s")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
