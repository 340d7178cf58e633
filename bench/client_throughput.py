"""End-to-end client benchmark: prints one JSON line.

Setup: in-process name server + broker (``tidemq.testing.run_cluster``, temp store, async
flush) and the tidemq client on the same event loop, one topic with 8 queues.

* ``throughput_msgs_per_s``: 1 KiB messages sent in batches of 64 (``send_batch``) by one
  producer while one ``AsyncPushConsumer`` (batch size 32, coroutine listener) consumes;
  messages/s from the first send to the last message consumed.
* ``latency_p50_ms`` / ``latency_p99_ms``: produce-to-consume latency (born timestamp to
  listener call) at a paced 2,000 messages/s of single sends.

Run: ``python -m bench.client_throughput [--messages N] [--latency-messages N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time

from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import run_cluster


async def run(messages: int, latency_messages: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        async with run_cluster(tmp) as cluster:
            addr = cluster.namesrv_addr
            producer = AsyncProducer(namesrv_addr=addr, producer_group="bench-p", default_topic_queue_nums=8)
            await producer.start()
            await producer.send(Message("BenchT", b"warmup"))
            await producer.send(Message("BenchL", b"warmup"))
            done = asyncio.Event()
            count = 0
            latencies: list[float] = []

            async def on_bulk(msgs: list[MessageExt], ctx: object) -> None:
                nonlocal count
                count += len(msgs)
                if count >= messages:
                    done.set()

            async def on_latency(msgs: list[MessageExt], ctx: object) -> None:
                now = time.time() * 1000
                latencies.extend(now - m.born_timestamp for m in msgs if m.body != b"warmup")

            bulk = AsyncPushConsumer(
                namesrv_addr=addr,
                consumer_group="bench-c",
                consume_from_where="CONSUME_FROM_LAST_OFFSET",
                consume_message_batch_max_size=32,
            )
            bulk.subscribe("BenchT")
            bulk.register_message_listener(on_bulk)
            await bulk.start()
            await asyncio.sleep(0.5)  # let the consumer own its queues before timing
            body = b"x" * 1024
            start = time.perf_counter()
            for i in range(0, messages, 64):
                await producer.send_batch([Message("BenchT", body) for _ in range(min(64, messages - i))])
            await asyncio.wait_for(done.wait(), 120)
            elapsed = time.perf_counter() - start
            await bulk.shutdown()

            lat = AsyncPushConsumer(
                namesrv_addr=addr, consumer_group="bench-l", consume_from_where="CONSUME_FROM_LAST_OFFSET"
            )
            lat.subscribe("BenchL")
            lat.register_message_listener(on_latency)
            await lat.start()
            await asyncio.sleep(0.5)
            t0 = time.perf_counter()
            for i in range(latency_messages):
                target = t0 + i / 2000.0
                delay = target - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await producer.send(Message("BenchL", body))
            deadline = time.monotonic() + 30
            while len(latencies) < latency_messages and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            await lat.shutdown()
            await producer.shutdown()
    q = statistics.quantiles(latencies, n=100) if len(latencies) >= 2 else [float("nan")] * 99
    return {
        "bench": "client_throughput",
        "setup": "in-process namesrv+broker, 1 KiB bodies, batch send x64, 1 push consumer, 8 queues",
        "messages": messages,
        "throughput_msgs_per_s": round(messages / elapsed, 1),
        "latency_rate_msgs_per_s": 2000,
        "latency_samples": len(latencies),
        "latency_p50_ms": round(q[49], 2),
        "latency_p99_ms": round(q[98], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--latency-messages", type=int, default=4_000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.messages, args.latency_messages))))


if __name__ == "__main__":
    main()
