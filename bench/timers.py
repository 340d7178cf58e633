"""Timer messages at scale: broker memory with many pending timers and delivery delay, one JSON line.

Setup: ``python -m tidemq serve`` (ASYNC_FLUSH) in a subprocess on free loopback ports with its store
in a temporary directory. tidemq's :class:`~tidemq.client.producer.producer.AsyncProducer` stores
``--count`` timer messages (``TIMER_DELIVER_MS``, 100-byte bodies, ``--concurrency`` sends in flight)
into a 4-queue topic, each due at its send time plus a uniform random ``[--lead, --lead + --span]``
seconds: 1,000,000 spread over an hour by default. Then it reads for ``--measure`` seconds what came
due (every message delivered since the start, during the stores and after).

Prints: the store rate, the broker's ``VmRSS`` / ``RssAnon`` (heap) / ``RssFile`` from
``/proc/<pid>/status`` when idle, after the stores and at the end (goal: VmRSS < 200 MB with 1,000,000
pending), the timers still pending, and for every delivered one its delivery delay: its store time in
the real topic minus its due time (``TIMER_OUT_MS``), p50 / p99 / max ms (goal: p99 <= 1000 ms), plus
how many came early (must be 0).

With ``--crash``: ``--kill-after`` seconds after the stores (deliveries under way) the broker is
SIGKILLed and started again on the same store; the line adds the restart time (process start to
ready, the timer wheel rebuilt from the log) and, reading until every timer came due (``--span``
should be short) or the deadline, how many were lost (goal 0) and delivered twice (goal 0; at most
the one being put at the kill).

Run: ``python -m bench.timers [--count N] [--span S] [--lead S] [--measure S] [--concurrency N]
[--crash --kill-after S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench import rss
from tidemq.client.consumer.pull import PullConsumer
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ServeProcess

TOPIC = "BenchTimers"


def percentile(values: list[int], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


async def store_timers(namesrv: str, args: argparse.Namespace) -> float:
    """Send ``args.count`` timer messages; returns the seconds it took."""
    producer = AsyncProducer(namesrv_addr=namesrv, producer_group="bench-timers", send_msg_timeout=30_000)
    await producer.start()
    body = b"t" * 100
    rng = random.Random(7)
    next_i = 0
    try:
        await producer.send(Message(TOPIC, b"warm"))  # creates the topic

        async def worker() -> None:
            nonlocal next_i
            while next_i < args.count:
                next_i += 1
                due = time.time_ns() // 1_000_000 + int((args.lead + rng.random() * args.span) * 1000)
                await producer.send(Message(TOPIC, body, delivery_time_ms=due))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        return time.perf_counter() - t0
    finally:
        await producer.shutdown()


def read_delivered(namesrv: str, seconds: float) -> list[MessageExt]:
    """Every message of the topic readable within ``seconds`` (from offset 0)."""
    consumer = PullConsumer(
        namesrv_addr=namesrv,
        consumer_group="bench-timers-reader",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )
    consumer.subscribe(TOPIC)
    consumer.start()
    got: list[MessageExt] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            got.extend(consumer.poll(timeout=min(1.0, max(0.05, deadline - time.monotonic()))))
    finally:
        consumer.shutdown()
    return got


def crash_and_recover(serve: ServeProcess, args: argparse.Namespace) -> dict[str, object]:
    """SIGKILL ``serve`` mid-delivery, start it again on its store, read everything that comes due."""
    time.sleep(args.kill_after)
    serve.kill()
    t0 = time.perf_counter()
    serve.start()
    restart_s = time.perf_counter() - t0
    wait = args.lead + args.span + 30.0
    delivered = read_all(serve.namesrv_addr, args.count, wait)
    ids = Counter(m.msg_id for m in delivered if "TIMER_OUT_MS" in m.properties)
    return {
        "crash_restart_s": round(restart_s, 1),
        "crash_delivered_distinct": len(ids),
        "crash_lost": args.count - len(ids),
        "crash_duplicates": sum(n - 1 for n in ids.values()),
    }


def read_all(namesrv: str, count: int, seconds: float) -> list[MessageExt]:
    """Read the topic from offset 0 until ``count`` timer messages came (or ``seconds`` passed)."""
    consumer = PullConsumer(
        namesrv_addr=namesrv,
        consumer_group="bench-timers-crash",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )
    consumer.subscribe(TOPIC)
    consumer.start()
    got: list[MessageExt] = []
    seen: set[str] = set()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and len(seen) < count + 1:  # + the warm-up message
            batch = consumer.poll(timeout=1.0)
            got.extend(batch)
            seen.update(m.msg_id for m in batch)
    finally:
        consumer.shutdown()
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=1_000_000, help="timer messages to store")
    parser.add_argument("--span", type=float, default=3600.0, help="seconds the due times spread over")
    parser.add_argument(
        "--lead", type=float, default=1.0, help="seconds from its send to a timer's earliest due time"
    )
    parser.add_argument(
        "--measure", type=float, default=20.0, help="seconds to read deliveries after storing"
    )
    parser.add_argument("--concurrency", type=int, default=64, help="sends in flight")
    parser.add_argument("--crash", action="store_true", help="SIGKILL the broker mid-delivery and restart it")
    parser.add_argument("--kill-after", type=float, default=2.0, help="seconds after the stores to kill it")
    args = parser.parse_args()
    crash: dict[str, object] = {}
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-timers-") as tmp,
        ServeProcess(Path(tmp) / "store", flush="async", log_path=Path(tmp) / "serve.log") as serve,
    ):
        assert serve.proc is not None
        pid = serve.proc.pid
        idle = rss(pid)
        stored_s = asyncio.run(store_timers(serve.namesrv_addr, args))
        after_store = rss(pid)
        print(json.dumps({"stored": args.count, "seconds": round(stored_s, 1), **after_store}), flush=True)
        delivered = read_delivered(serve.namesrv_addr, args.measure)
        final = rss(pid)
        if args.crash:
            crash = crash_and_recover(serve, args)
    delays = [
        m.store_timestamp - int(m.properties["TIMER_OUT_MS"])
        for m in delivered
        if "TIMER_OUT_MS" in m.properties
    ]
    result = {
        "bench": "timers",
        "count": args.count,
        "span_s": args.span,
        "store_rate_per_s": round(args.count / stored_s),
        "rss_idle_mb": idle,
        "rss_after_store_mb": after_store,
        "rss_end_mb": final,
        "goal_rss_mb": 200,
        "delivered": len(delays),
        "pending_at_end": args.count - len(delays),
        "delay_p50_ms": percentile(delays, 0.50),
        "delay_p99_ms": percentile(delays, 0.99),
        "delay_max_ms": max(delays, default=None),
        "early": sum(1 for d in delays if d < 0),
        "goal_delay_p99_ms": 1000,
        **crash,
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
