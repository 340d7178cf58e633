"""Client benchmark of the blocking (sync) clients against ``tidemq serve`` in a subprocess.

Prints a table and one JSON line. The broker runs as a real ``tidemq serve`` process (async flush,
temp store, free loopback ports), so the figures are the client's own cost plus one broker hop.

Shapes (1 KiB bodies unless ``--body``):

* ``send_single``: one sync :class:`~tidemq.client.producer.producer.Producer`, ``send`` one
  message per round trip, messages/s.
* ``send_batch32``: the same producer, ``send_batch`` of 32, messages/s.
* ``push_batch32``: one sync ``PushConsumer`` (``consume_message_batch_max_size=32``) reading the
  messages stored above, messages/s from start to the last message.
* ``lite_pull``: one sync ``PullConsumer``, ``poll()`` + ``commit_sync()`` per poll, messages/s.
* ``latency``: single sync sends paced at ``--rate`` msg/s (2,000) while a PushConsumer in this
  process consumes; produce-to-consume latency p50 / p90 / p99 / max (ms, born timestamp to the
  listener call), the achieved send rate and the producer's worst lag behind its schedule.

Each throughput shape also prints ``*_client_cpu_us_per_msg``: CPU (user + system) of this client
process per message -- steadier than wall-clock rates on a shared machine.

Run: ``python -m bench.client_throughput [--messages N] [--latency-messages N] [--only SHAPE ...]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tidemq.client.consumer.pull import PullConsumer
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ServeProcess

SHAPES = ("send_single", "send_batch32", "push_batch32", "lite_pull", "latency")


def _producer(ns: str, name: str) -> Producer:
    p = Producer(
        namesrv_addr=ns, producer_group=f"bench-{name}", instance_name=name, default_topic_queue_nums=8
    )
    p.start()
    return p


def bench_send_single(ns: str, topic: str, n: int, body: bytes) -> float:
    p = _producer(ns, "single")
    try:
        p.send(Message(topic, body))
        t0 = time.perf_counter()
        for _ in range(n):
            p.send(Message(topic, body))
        return n / (time.perf_counter() - t0)
    finally:
        p.shutdown()


def bench_send_batch(ns: str, topic: str, n: int, body: bytes) -> float:
    p = _producer(ns, "batch")
    try:
        p.send(Message(topic, body))
        t0 = time.perf_counter()
        for i in range(0, n, 32):
            p.send_batch([Message(topic, body) for _ in range(min(32, n - i))])
        return n / (time.perf_counter() - t0)
    finally:
        p.shutdown()


def bench_push(ns: str, topic: str, n: int) -> float:
    done = threading.Event()
    count = 0
    lock = threading.Lock()
    t0 = 0.0

    def on_msgs(msgs: list[MessageExt], ctx: object) -> None:
        nonlocal count
        with lock:
            count += len(msgs)
            if count >= n:
                done.set()

    c = PushConsumer(
        namesrv_addr=ns,
        consumer_group="bench-push",
        instance_name="push",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        consume_message_batch_max_size=32,
    )
    c.subscribe(topic)
    c.register_message_listener(on_msgs)
    t0 = time.perf_counter()
    c.start()
    try:
        if not done.wait(120):
            raise RuntimeError(f"push consumer got {count} of {n} messages")
        return n / (time.perf_counter() - t0)
    finally:
        c.shutdown()


def bench_lite_pull(ns: str, topic: str, n: int) -> float:
    c = PullConsumer(
        namesrv_addr=ns,
        consumer_group="bench-pull",
        instance_name="pull",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        auto_commit=False,
    )
    c.subscribe(topic)
    t0 = time.perf_counter()
    c.start()
    got = 0
    try:
        deadline = time.monotonic() + 120
        while got < n and time.monotonic() < deadline:
            got += len(c.poll(1.0))
            c.commit_sync()
        return got / (time.perf_counter() - t0)
    finally:
        c.shutdown()


def bench_latency(ns: str, topic: str, n: int, rate: float, body: bytes) -> dict[str, float]:
    latencies: list[float] = []
    lock = threading.Lock()

    def on_msgs(msgs: list[MessageExt], ctx: object) -> None:
        now = time.time() * 1000
        with lock:
            latencies.extend(now - m.born_timestamp for m in msgs if m.body != b"warmup")

    c = PushConsumer(
        namesrv_addr=ns,
        consumer_group="bench-lat",
        instance_name="lat",
        consume_from_where="CONSUME_FROM_LAST_OFFSET",
    )
    c.subscribe(topic)
    c.register_message_listener(on_msgs)
    p = _producer(ns, "lat")
    try:
        p.send(Message(topic, b"warmup"))
        c.start()
        deadline = time.monotonic() + 30
        while len(c.assignment()) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        lag = 0.0
        t0 = time.perf_counter()
        for i in range(n):
            target = t0 + i / rate
            now = time.perf_counter()
            if target > now:
                time.sleep(target - now)
            else:
                lag = max(lag, now - target)
            p.send(Message(topic, body))
        achieved = n / (time.perf_counter() - t0)
        deadline = time.monotonic() + 30
        while len(latencies) < n and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        p.shutdown()
        c.shutdown()
    lat = sorted(latencies)
    q = statistics.quantiles(lat, n=100) if len(lat) >= 2 else [float("nan")] * 99
    return {
        "achieved_msgs_per_s": round(achieved, 1),
        "p50_ms": round(q[49], 3),
        "p90_ms": round(q[89], 3),
        "p99_ms": round(q[98], 3),
        "max_ms": round(lat[-1], 3) if lat else float("nan"),
        "samples": len(lat),
        "max_send_lag_ms": round(lag * 1000, 3),
    }


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _Cpu:
    """Client-process CPU seconds (user + system) spent inside a ``with`` block."""

    def __enter__(self) -> _Cpu:
        self.start = _cpu_s()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = _cpu_s() - self.start

    def per_msg_us(self, n: int) -> float:
        return round(self.seconds / max(n, 1) * 1e6, 1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    body = b"x" * args.body
    out: dict[str, Any] = {"bench": "client_throughput", "messages": args.messages, "body_bytes": args.body}
    shapes = args.only or SHAPES
    with tempfile.TemporaryDirectory() as tmp, ServeProcess(Path(tmp) / "store", flush="async") as proc:
        ns = proc.namesrv_addr
        n = args.messages
        if "send_single" in shapes:
            with _Cpu() as cpu:
                out["send_single_msgs_per_s"] = round(bench_send_single(ns, "BenchS", n // 4, body), 1)
            out["send_single_client_cpu_us_per_msg"] = cpu.per_msg_us(n // 4)
        if {"send_batch32", "push_batch32", "lite_pull"} & set(shapes):
            with _Cpu() as cpu:
                rate = bench_send_batch(ns, "BenchB", n, body)
            if "send_batch32" in shapes:
                out["send_batch32_msgs_per_s"] = round(rate, 1)
                out["send_batch32_client_cpu_us_per_msg"] = cpu.per_msg_us(n)
        if "push_batch32" in shapes:
            with _Cpu() as cpu:
                out["push_batch32_msgs_per_s"] = round(bench_push(ns, "BenchB", n), 1)
            out["push_batch32_client_cpu_us_per_msg"] = cpu.per_msg_us(n)
        if "lite_pull" in shapes:
            with _Cpu() as cpu:
                out["lite_pull_msgs_per_s"] = round(bench_lite_pull(ns, "BenchB", n), 1)
            out["lite_pull_client_cpu_us_per_msg"] = cpu.per_msg_us(n)
        if "latency" in shapes:
            out["latency"] = bench_latency(ns, "BenchL", args.latency_messages, args.rate, body)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--latency-messages", type=int, default=6_000)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--only", nargs="*", choices=SHAPES)
    args = parser.parse_args()
    result = run(args)
    for key, value in result.items():
        if key != "latency":
            print(f"{key:28} {value}")
    for key, value in result.get("latency", {}).items():
        print(f"latency.{key:20} {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
