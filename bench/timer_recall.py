"""Timer-message recall at scale: recall rate and latency, and that no recalled timer ever fires, one
JSON line.

Setup: ``python -m tidemq serve`` (ASYNC_FLUSH) in a subprocess on free loopback ports, its store in a
temporary directory. tidemq's :class:`~tidemq.client.producer.producer.AsyncProducer` stores
``--count`` timer messages (``TIMER_DELIVER_MS``, 100-byte bodies, ``--concurrency`` sends in flight),
each due ``--lead`` + a uniform random ``[0, --span]`` seconds after its send, into a 4-queue topic,
then recalls every other one with ``Producer.recall_message`` (RECALL_MESSAGE 370, the send's
``recall_handle``). With ``--crash`` the broker is SIGKILLed right after the recalls and started again
on the same store (the cancellations must survive: the timer wheel is rebuilt from the log). It then
reads the topic until every kept timer came (or a deadline).

Prints: the store and recall rates (per s), recall latency p50 / p99 (ms), how many recalled timers
were delivered (goal 0) and how many kept ones were not (goal 0).

Run: ``python -m bench.timer_recall [--count N] [--lead S] [--span S] [--concurrency N] [--crash]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path

from bench.timers import percentile
from tidemq.client.consumer.pull import PullConsumer
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.message import Message
from tidemq.testing import ServeProcess

TOPIC = "BenchRecall"


async def store_and_recall(namesrv: str, args: argparse.Namespace) -> dict[str, object]:
    """Store the timers, recall every other one; rates, latencies and the two id sets."""
    producer = AsyncProducer(namesrv_addr=namesrv, producer_group="bench-recall", send_msg_timeout=30_000)
    await producer.start()
    rng = random.Random(11)
    handles: list[tuple[str, str]] = []
    latencies: list[int] = []
    try:
        await producer.send(Message(TOPIC, b"warm"))
        todo = iter(range(args.count))

        async def send() -> None:
            for _ in todo:
                due = time.time_ns() // 1_000_000 + int((args.lead + rng.random() * args.span) * 1000)
                result = await producer.send(Message(TOPIC, b"t" * 100, delivery_time_ms=due))
                assert result.recall_handle is not None
                handles.append((result.msg_id, result.recall_handle))

        t0 = time.perf_counter()
        await asyncio.gather(*(send() for _ in range(args.concurrency)))
        store_s = time.perf_counter() - t0
        doomed = iter(handles[::2])

        async def recall() -> None:
            for _msg_id, handle in doomed:
                t = time.perf_counter_ns()
                await producer.recall_message(TOPIC, handle)
                latencies.append((time.perf_counter_ns() - t) // 1_000_000)

        t0 = time.perf_counter()
        await asyncio.gather(*(recall() for _ in range(args.concurrency)))
        recall_s = time.perf_counter() - t0
    finally:
        await producer.shutdown()
    return {
        "store_rate_per_s": round(args.count / store_s),
        "recalled": len(latencies),
        "recall_rate_per_s": round(len(latencies) / recall_s),
        "recall_p50_ms": percentile(latencies, 0.50),
        "recall_p99_ms": percentile(latencies, 0.99),
        "recalled_ids": {m for m, _ in handles[::2]},
        "kept_ids": {m for m, _ in handles[1::2]},
    }


def read_until(namesrv: str, kept: set[str], seconds: float) -> set[str]:
    """Message ids of the timers delivered, reading until every ``kept`` one came (or ``seconds``)."""
    consumer = PullConsumer(
        namesrv_addr=namesrv,
        consumer_group="bench-recall-reader",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )
    consumer.subscribe(TOPIC)
    consumer.start()
    seen: set[str] = set()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not kept <= seen:
            seen.update(m.msg_id for m in consumer.poll(timeout=1.0) if "TIMER_OUT_MS" in m.properties)
        # a little longer: a recalled timer due with the last kept one would show now
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            seen.update(m.msg_id for m in consumer.poll(timeout=0.5) if "TIMER_OUT_MS" in m.properties)
    finally:
        consumer.shutdown()
    return seen


def main() -> None:
    """Parse the command line, store and recall timers on a ``tidemq serve`` (killed and restarted
    with ``--crash``), read until the kept ones are delivered, print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=10_000, help="timer messages to store (half recalled)")
    parser.add_argument(
        "--lead", type=float, default=8.0, help="seconds from a send to its earliest due time"
    )
    parser.add_argument("--span", type=float, default=10.0, help="seconds the due times spread over")
    parser.add_argument("--concurrency", type=int, default=32, help="sends / recalls in flight")
    parser.add_argument(
        "--crash", action="store_true", help="SIGKILL the broker after the recalls, restart it"
    )
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-recall-") as tmp,
        ServeProcess(Path(tmp) / "store", flush="async", log_path=Path(tmp) / "serve.log") as serve,
    ):
        figures = asyncio.run(store_and_recall(serve.namesrv_addr, args))
        recalled, kept = figures.pop("recalled_ids"), figures.pop("kept_ids")
        assert isinstance(recalled, set) and isinstance(kept, set)
        if args.crash:
            serve.kill()
            serve.start()
        seen = read_until(serve.namesrv_addr, kept, args.lead + args.span + 30.0)
    result = {
        "bench": "timer_recall",
        "count": args.count,
        "crash": args.crash,
        **figures,
        "recalled_delivered": len(recalled & seen),
        "kept_missing": len(kept - seen),
        "goal_recalled_delivered": 0,
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
