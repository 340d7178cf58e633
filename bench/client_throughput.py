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
  process consumes; produce-to-consume latency p50 / p90 / p99 / max (ms, from the send call to the
  listener call), the achieved send rate and the producer's worst lag behind its schedule. The send
  time travels at the start of the body with microsecond precision, as the Redis run's ``ts``
  field: the message's ``born_timestamp`` is whole milliseconds (the wire format), and measuring
  from it would add up to 1 ms (0.5 ms on average) to every figure.

Each throughput shape also prints ``*_client_cpu_us_per_msg`` and ``*_broker_cpu_us_per_msg``: CPU
(user + system) per message of this client process and of the ``tidemq serve`` process -- steadier
than wall-clock rates on a shared machine.

With ``redis-server`` on PATH and redis-py installed, the same shapes run against Redis Streams
(``XADD`` / pipelined ``XADD`` x32 / ``XREADGROUP COUNT 32`` + ``XACK`` / paced ``XADD``; AOF
everysec, a free loopback port) in the same run, and a ratio table (tidemq / Redis) is printed;
otherwise one line says why those rows are skipped.

Run: ``python -m bench.client_throughput [--messages N] [--latency-messages N] [--only SHAPE ...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
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

REDIS_ARGS = ["redis-server", "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes"]
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
            latencies.extend(now - _sent_ms(m.body) for m in msgs if m.body != b"warmup")

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
            p.send(Message(topic, _stamped(body)))
        achieved = n / (time.perf_counter() - t0)
        deadline = time.monotonic() + 30
        while len(latencies) < n and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        p.shutdown()
        c.shutdown()
    return latency_summary(latencies, achieved, lag)


def _stamped(body: bytes) -> bytes:
    """``body`` (same length) starting with the send time, ms since the epoch, and a ``;``."""
    stamp = b"%.3f;" % (time.time() * 1000)
    return stamp + body[len(stamp) :]


def _sent_ms(body: bytes) -> float:
    """The send time written by :func:`_stamped`."""
    return float(body[: body.index(b";")])


def latency_summary(latencies: list[float], achieved: float, lag: float) -> dict[str, float]:
    """Latency figures of a paced run: produce-to-consume ``latencies`` (ms), the ``achieved`` send
    rate (msg/s) and the producer's worst ``lag`` behind its schedule (s)."""
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


def _process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``); 0.0 when unknown or unreadable."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Cpu:
    """CPU seconds (user + system) spent inside a ``with`` block by this client process and, given its
    pid, by the broker process."""

    def __init__(self, broker_pid: int | None = None) -> None:
        self.broker_pid = broker_pid

    def __enter__(self) -> _Cpu:
        self.start = _cpu_s()
        self.broker_start = _process_cpu_s(self.broker_pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = _cpu_s() - self.start
        self.broker_seconds = _process_cpu_s(self.broker_pid) - self.broker_start

    def per_msg_us(self, n: int) -> float:
        return round(self.seconds / max(n, 1) * 1e6, 1)

    def broker_per_msg_us(self, n: int) -> float:
        return round(self.broker_seconds / max(n, 1) * 1e6, 1)


# -- Redis Streams, the same shapes -----------------------------------------------------------------


@contextlib.contextmanager
def redis_server(tmp: str, appendfsync: str = "everysec") -> Any:
    """``redis-server`` with AOF (``appendfsync`` everysec or always) on a free loopback port;
    yields a redis-py client. The server is stopped by pid on exit."""
    import redis

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [*REDIS_ARGS, "--appendfsync", appendfsync, "--port", str(port), "--dir", tmp],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield client
    finally:
        proc.terminate()
        proc.wait(10)


def redis_shapes(
    args: argparse.Namespace,
    body: bytes,
    appendfsync: str = "everysec",
    shapes: tuple[str, ...] = SHAPES,
    single: int | None = None,
) -> dict[str, Any]:
    """Redis Streams figures for ``shapes`` of :func:`run` (same message counts and body size);
    ``single`` messages for ``send_single`` (default ``args.messages // 4``)."""
    out: dict[str, Any] = {}
    n = args.messages
    single = n // 4 if single is None else single
    with tempfile.TemporaryDirectory() as tmp, redis_server(tmp, appendfsync) as r:
        if "send_single" in shapes:
            t0 = time.perf_counter()
            for _ in range(single):
                r.xadd("s1", {"body": body})
            out["send_single_msgs_per_s"] = round(single / (time.perf_counter() - t0), 1)
        t0 = time.perf_counter()
        for i in range(0, n, 32):
            pipe = r.pipeline(transaction=False)
            for _ in range(min(32, n - i)):
                pipe.xadd("sb", {"body": body})
            pipe.execute()
        out["send_batch32_msgs_per_s"] = round(n / (time.perf_counter() - t0), 1)
        for shape in ("push_batch32", "lite_pull"):  # the same Redis loop stands for both consumers
            if shape not in shapes:
                continue
            group = f"g-{shape}"
            r.xgroup_create("sb", group, id="0")
            got = 0
            t0 = time.perf_counter()
            while got < n:
                for _, entries in r.xreadgroup(group, "c", {"sb": ">"}, count=32, block=1000) or []:
                    if entries:
                        r.xack("sb", group, *[e[0] for e in entries])
                        got += len(entries)
            out[f"{shape}_msgs_per_s"] = round(n / (time.perf_counter() - t0), 1)
        if "latency" in shapes:
            out["latency"] = redis_latency(r, args.latency_messages, args.rate, body)
    return out


def redis_latency(r: Any, n: int, rate: float, body: bytes) -> dict[str, float]:
    """Paced single XADDs; a thread blocks in XREADGROUP and records now - send time (ms)."""
    r.xgroup_create("sl", "gl", id="$", mkstream=True)
    latencies: list[float] = []
    done = threading.Event()

    def consume() -> None:
        import redis

        c: Any = redis.Redis(connection_pool=r.connection_pool)
        while len(latencies) < n and not done.is_set():
            for _, entries in c.xreadgroup("gl", "c", {"sl": ">"}, count=32, block=200) or []:
                now = time.time() * 1000
                latencies.extend(now - float(fields[b"ts"]) for _, fields in entries)
                if entries:
                    c.xack("sl", "gl", *[e[0] for e in entries])

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    lag = 0.0
    t0 = time.perf_counter()
    for i in range(n):
        target = t0 + i / rate
        now = time.perf_counter()
        if target > now:
            time.sleep(target - now)
        else:
            lag = max(lag, now - target)
        r.xadd("sl", {"ts": repr(time.time() * 1000), "body": body})
    achieved = n / (time.perf_counter() - t0)
    reader.join(30)
    done.set()
    return latency_summary(latencies, achieved, lag)


def redis_available() -> str | None:
    """None when the Redis rows can run, else why not."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (Debian: apt-get install redis-server)"
    try:
        import redis  # noqa: F401
    except ImportError:
        return "redis-py is not installed (pip install redis hiredis)"
    return None


def print_ratios(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    print(f"{'shape':22} {'tidemq':>10} {'redis':>10} {'tidemq/redis':>13}")
    for shape in SHAPES[:-1]:
        key = f"{shape}_msgs_per_s"
        if key in ours and key in theirs:
            print(f"{shape:22} {ours[key]:>10.0f} {theirs[key]:>10.0f} {ours[key] / theirs[key]:>13.2f}")
    a, b = ours.get("latency"), theirs.get("latency")
    if a and b:
        for k in ("achieved_msgs_per_s", "p50_ms", "p99_ms", "max_ms"):
            print(f"latency.{k:14} {a[k]:>10} {b[k]:>10}")


def run(args: argparse.Namespace, flush: str = "async", single: int | None = None) -> dict[str, Any]:
    """The tidemq figures: ``tidemq serve --flush FLUSH`` (plus ``args.serve_args`` when set) in a
    subprocess, ``args.only`` shapes (default all), ``single`` messages for ``send_single`` (default
    ``args.messages // 4``)."""
    body = b"x" * args.body
    out: dict[str, Any] = {"bench": "client_throughput", "messages": args.messages, "body_bytes": args.body}
    shapes = args.only or SHAPES
    serve_args = list(getattr(args, "serve_args", None) or [])  # bench.compare --serve-arg
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServeProcess(Path(tmp) / "store", flush=flush, extra_args=serve_args) as proc,
    ):
        ns = proc.namesrv_addr
        n = args.messages
        single = n // 4 if single is None else single
        if "send_single" in shapes:
            with _Cpu(proc.pid) as cpu:
                out["send_single_msgs_per_s"] = round(bench_send_single(ns, "BenchS", single, body), 1)
            out["send_single_client_cpu_us_per_msg"] = cpu.per_msg_us(single)
            out["send_single_broker_cpu_us_per_msg"] = cpu.broker_per_msg_us(single)
        if {"send_batch32", "push_batch32", "lite_pull"} & set(shapes):
            with _Cpu(proc.pid) as cpu:
                rate = bench_send_batch(ns, "BenchB", n, body)
            if "send_batch32" in shapes:
                out["send_batch32_msgs_per_s"] = round(rate, 1)
                out["send_batch32_client_cpu_us_per_msg"] = cpu.per_msg_us(n)
                out["send_batch32_broker_cpu_us_per_msg"] = cpu.broker_per_msg_us(n)
        if "push_batch32" in shapes:
            with _Cpu(proc.pid) as cpu:
                out["push_batch32_msgs_per_s"] = round(bench_push(ns, "BenchB", n), 1)
            out["push_batch32_client_cpu_us_per_msg"] = cpu.per_msg_us(n)
            out["push_batch32_broker_cpu_us_per_msg"] = cpu.broker_per_msg_us(n)
        if "lite_pull" in shapes:
            with _Cpu(proc.pid) as cpu:
                out["lite_pull_msgs_per_s"] = round(bench_lite_pull(ns, "BenchB", n), 1)
            out["lite_pull_client_cpu_us_per_msg"] = cpu.per_msg_us(n)
            out["lite_pull_broker_cpu_us_per_msg"] = cpu.broker_per_msg_us(n)
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
    parser.add_argument("--no-redis", action="store_true", help="skip the Redis Streams rows")
    args = parser.parse_args()
    result = run(args)
    for key, value in result.items():
        if key != "latency":
            print(f"{key:34} {value}")
    for key, value in result.get("latency", {}).items():
        print(f"latency.{key:26} {value}")
    why_not = "--no-redis given" if args.no_redis else redis_available()
    if why_not is None:
        redis_result = redis_shapes(args, b"x" * args.body)
        result["redis"] = redis_result
        print_ratios(result, redis_result)
    else:
        print(f"Redis rows skipped: {why_not}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
