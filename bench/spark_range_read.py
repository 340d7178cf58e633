"""CPU of the Spark source's executor read path alone (no Spark): ``read_queue_range`` over one queue.

``python -m bench.spark_range_read [--count 1000000] [--size 100] [--reps 9]``; A/B another checkout:
``PYTHONPATH=/other/checkout python bench/spark_range_read.py``.

Setup: ``tidemq serve`` as a child process with the pipelines' broker config (pulls of up to 8,192
messages, :class:`~tidemq.pipelines.embedded.EmbeddedBroker`), ``--count`` messages of ``--size``
bytes on one queue (batches of 256), then ``--reps`` reads of the whole range in this process with
the source's default settings (all columns, 2 pulls in flight). What the executor's Python does per
row: the pull window (the pull kernel), the blocking connection's reads, Arrow decoding. Prints one
JSON line: the median CPU seconds of this process per read and per million rows, rows per CPU
second, the median wall seconds, and the receive buffer's behaviour (``buffer_moves``: bytes moved
to make room, ``buffers_allocated``: new buffers after the first read; both ideally 0) with the load
average (a shared machine's wall figures drift; the CPU ones much less).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tidemq.admin import AdminClient
from tidemq.client.producer.producer import Producer
from tidemq.pipelines.embedded import EmbeddedBroker
from tidemq.protocol.message import Message
from tidemq.spark.conn import ReadSettings, connections, read_queue_range
from tidemq.spark.offsets import QueueRange

TOPIC = "RangeRead"


class BufferWatch:
    """Counts what ``BlockingConnection._make_room`` does while installed (a ``with`` block); counts
    nothing on a checkout without :mod:`tidemq.remoting.blocking` (for A/B runs)."""

    def __init__(self) -> None:
        self.moved = 0
        self.allocated = 0
        try:
            from tidemq.remoting.blocking import BlockingConnection
        except ImportError:
            self._cls: Any = None
        else:
            self._cls = BlockingConnection
            self._original = BlockingConnection._make_room

    def __enter__(self) -> BufferWatch:
        if self._cls is None:
            return self
        original, watch = self._original, self

        def make_room(conn: Any, need: int) -> None:
            before = conn._view
            watch.moved += conn._end - conn._start
            original(conn, need)
            watch.allocated += conn._view is not before

        self._cls._make_room = make_room
        return self

    def __exit__(self, *exc: object) -> None:
        if self._cls is not None:
            self._cls._make_room = self._original


def _fill(namesrv: str, count: int, size: int) -> None:
    producer = Producer(namesrv_addr=namesrv, producer_group="range-read-bench")
    producer.start()
    try:
        body = os.urandom(size)
        for i in range(0, count, 256):
            producer.send_batch([Message(TOPIC, body, tags="t") for _ in range(min(256, count - i))])
    finally:
        producer.shutdown()


def run(count: int, size: int, reps: int) -> dict[str, Any]:
    """Store ``count`` messages of ``size`` bytes in one queue of an embedded broker, then read the
    range ``reps`` times (after a warm-up read) with the Spark source's executor reader; returns the
    figures (CPU and wall seconds per read, the medians; rows per CPU second; receive-buffer moves).

    Raises:
        RuntimeError: a read returned another number of rows.
    """
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(Path(tmp) / "store") as broker:
        with AdminClient(broker.namesrv_addr) as admin:
            admin.create_topic(TOPIC, 1)
            admin.wait_for_route(TOPIC)
            (mq,) = admin.fetch_subscribe_message_queues(TOPIC)
        _fill(broker.namesrv_addr, count, size)
        conns = connections()
        addr = conns.loop.run(conns.admin(broker.namesrv_addr).broker_addr(mq.broker_name, topic=TOPIC), 10)
        rng, settings = QueueRange(mq, 0, count, addr), ReadSettings(namesrv=broker.namesrv_addr, group="g")
        cpu, wall = [], []
        with BufferWatch() as watch:
            for rep in range(reps + 1):
                if rep == 1:  # the first read is a warm-up (imports, the buffer's growth)
                    watch.moved = watch.allocated = 0
                c0, t0 = time.process_time(), time.perf_counter()
                rows = sum(batch.num_rows for batch in read_queue_range(rng, settings))
                if rep:
                    cpu.append(time.process_time() - c0)
                    wall.append(time.perf_counter() - t0)
                if rows != count:
                    raise RuntimeError(f"read {rows} rows of {count}")
    per_read = statistics.median(cpu)
    return {
        "bench": "spark_range_read",
        "rows": count,
        "body_bytes": size,
        "reps": reps,
        "cpu_s_per_read": round(per_read, 4),
        "cpu_s_per_million_rows": round(per_read * 1e6 / count, 4),
        "rows_per_cpu_s": int(count / per_read),
        "wall_s_per_read": round(statistics.median(wall), 4),
        "buffer_moves_bytes": watch.moved,
        "buffers_allocated": watch.allocated,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (default: the command line), run, print the figures as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="messages (default 1,000,000)")
    parser.add_argument("--size", type=int, default=100, help="body bytes (default 100)")
    parser.add_argument("--reps", type=int, default=9, help="timed reads after one warm-up (default 9)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.count, args.size, args.reps)))


if __name__ == "__main__":
    main()
