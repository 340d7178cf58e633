"""Broker memory with many stored messages: prints the broker's RSS as messages pile up, one JSON line.

Setup: ``python -m tidemq serve`` (ASYNC_FLUSH) in a subprocess on free loopback ports with its store in
a temporary directory; tidemq's sync ``Producer`` stores ``--messages`` messages of ``--body`` bytes
(100) with ``send_batch`` of ``--batch`` (128) into a 4-queue topic, each with a distinct key (so the
key index is exercised). The broker's ``VmRSS`` / ``RssAnon`` (heap) / ``RssFile`` (mapped store pages)
from ``/proc/<pid>/status`` are printed at every tenth of the run and at the end.

The store is mmap'd: file pages count in RSS while cached but the kernel can drop them; ``RssAnon``
is what per-message Python objects would grow. Goal (issue #9): VmRSS < 300 MB at 10,000,000 messages.

Run: ``python -m bench.memory [--messages N] [--body BYTES] [--batch N]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench import rss
from tidemq.client import Producer
from tidemq.protocol.message import Message
from tidemq.testing import ServeProcess

MB = 1024 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--body", type=int, default=100, help="body bytes")
    parser.add_argument("--batch", type=int, default=128, help="messages per send_batch")
    args = parser.parse_args()
    samples: list[dict[str, float]] = []
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-memory-") as tmp,
        ServeProcess(Path(tmp) / "store", flush="async", log_path=Path(tmp) / "serve.log") as serve,
    ):
        assert serve.proc is not None
        pid = serve.proc.pid
        producer = Producer(namesrv_addr=serve.namesrv_addr, producer_group="mem-p")
        producer.start()
        try:
            body = b"m" * args.body
            producer.send(Message("MemTopic", body))
            idle = rss(pid)
            step = max(args.messages // 10, args.batch)
            sent = 0
            next_report = step
            t0 = time.perf_counter()
            while sent < args.messages:
                n = min(args.batch, args.messages - sent)
                producer.send_batch([Message("MemTopic", body, keys=f"k{sent + i}") for i in range(n)])
                sent += n
                if sent >= next_report or sent >= args.messages:
                    sample = {"messages": sent, **rss(pid)}
                    samples.append(sample)
                    print(json.dumps(sample), flush=True)
                    next_report += step
            elapsed = time.perf_counter() - t0
        finally:
            producer.shutdown()
        final = rss(pid)
    print(
        json.dumps(
            {
                "bench": "memory",
                "messages": args.messages,
                "body_bytes": args.body,
                "produce_msgs_per_s": round(args.messages / elapsed, 1),
                "rss_idle_mb": idle,
                "rss_final_mb": final,
                "samples": samples,
                "goal": "VmRSS < 300 MB at 10,000,000 messages",
            }
        )
    )


if __name__ == "__main__":
    main()
