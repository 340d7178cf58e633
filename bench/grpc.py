"""RocketMQ 5 clients over gRPC against the same broker's remoting path, in one run.

Setup: one ``tidemq serve --grpc-port 0`` subprocess (ASYNC_FLUSH); bodies of ``--size`` bytes
(default 256). Four phases, each on its own topic, each timed by its client (start-up excluded):

* ``v5_produce``: RocketMQ 5's official Python client (PyPI rocketmq-python-client 5.1.2, run from
  ``.venv-v5``) sends ``--count`` messages with ``send_async``, ``--window`` in flight;
* ``v5_receive_ack``: its SimpleConsumer receives them (batches of 32) and acks each one;
* ``remoting_produce``: tidemq's own ``AsyncProducer`` sends as many, ``--window`` in flight;
* ``remoting_receive_ack``: tidemq's own ``AsyncSimpleConsumer`` (remoting POP) receives them
  (batches of 32) and acks each one;
* ``grpc_heartbeat``: ``--count`` bare Heartbeat RPCs (``--window`` in flight) from a grpcio stub:
  what one gRPC call costs the endpoint with no broker work (the floor under each v5 figure).

For each phase: messages/s, and the broker's CPU per message (user + system of the serve process
from ``/proc/<pid>/stat`` over the phase, divided by the messages; the gRPC endpoint runs in that
process, so the v5 figures include the proxy's work). Prints one JSON line::

    {"bench": "grpc", "count": N, "size": B, "window": W,
     "v5_produce": {"msgs_per_s": ..., "broker_cpu_us_per_msg": ...}, "v5_receive_ack": {...},
     "remoting_produce": {...}, "remoting_receive_ack": {...}, "python": {...}}

Run: ``python -m bench.grpc [--count 3000] [--size 256] [--window 32]`` (needs ``make v5-venv``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import interpreter

ROOT = Path(__file__).resolve().parents[1]
V5_PYTHON = ROOT / ".venv-v5" / "bin" / "python"
_TICK = os.sysconf("SC_CLK_TCK")


def broker_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def measured(pid: int, run: Callable[[], dict[str, Any]]) -> dict[str, float]:
    """Run one phase; its throughput (by the client's clock) and the broker's CPU per message."""
    before = broker_cpu_s(pid)
    out = run()
    cpu = broker_cpu_s(pid) - before
    n = max(1, int(out["count"]))
    return {
        "count": n,
        "msgs_per_s": round(n / out["elapsed_s"], 1),
        "broker_cpu_us_per_msg": round(cpu * 1e6 / n, 1),
    }


def v5(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        # -P: the script's directory (bench/, whose grpc.py is this file) stays off sys.path
        [str(V5_PYTHON), "-P", str(ROOT / "bench" / "v5_load.py"), *args],
        capture_output=True,
        timeout=300,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    lines = [ln for ln in proc.stdout.decode().splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"v5 client failed: {proc.stderr.decode()[-2000:]}")
    out: dict[str, Any] = json.loads(lines[-1])
    return out


async def remoting_produce(namesrv: str, topic: str, count: int, size: int, window: int) -> dict[str, Any]:
    from tidemq.client import AsyncProducer
    from tidemq.protocol.message import Message

    producer = AsyncProducer(namesrv_addr=namesrv, producer_group="bench-grpc-pg")
    await producer.start()
    body = b"x" * size
    try:
        await producer.send(Message(topic, body))  # route + connection warm
        sem = asyncio.Semaphore(window)

        async def one() -> None:
            async with sem:
                await producer.send(Message(topic, body))

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(count)))
        elapsed = time.perf_counter() - start
    finally:
        await producer.shutdown()
    return {"count": count, "elapsed_s": elapsed}


async def remoting_receive_ack(namesrv: str, topic: str, count: int) -> dict[str, Any]:
    from tidemq.client import AsyncSimpleConsumer

    consumer = AsyncSimpleConsumer(
        namesrv_addr=namesrv,
        consumer_group="bench-grpc-remoting",
        subscriptions={topic: "*"},
        await_duration=5.0,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )
    await consumer.start()
    got = 0
    try:
        start = time.perf_counter()
        deadline = time.monotonic() + 120
        while got < count and time.monotonic() < deadline:
            for msg in await consumer.receive(32, 30.0):
                await consumer.ack(msg)
                got += 1
        elapsed = time.perf_counter() - start
    finally:
        await consumer.shutdown()
    return {"count": got, "elapsed_s": elapsed}


def grpc_heartbeats(endpoint: str, count: int, window: int) -> dict[str, Any]:
    """``count`` Heartbeat RPCs, ``window`` in flight, from a plain grpcio stub."""
    import grpc

    from tidemq.proxy.pb import d, grpc_service, s

    with grpc.insecure_channel(endpoint) as channel:
        stub = grpc_service.MessagingServiceStub(channel)
        request = s.HeartbeatRequest(client_type=d.ClientType.Value("PRODUCER"))
        md = (("x-mq-client-id", "bench@1@0@heartbeat"),)
        stub.Heartbeat(request, metadata=md)
        start = time.perf_counter()
        for done in range(0, count, window):
            futures = [stub.Heartbeat.future(request, metadata=md) for _ in range(min(window, count - done))]
            for future in futures:
                future.result()
        elapsed = time.perf_counter() - start
    return {"count": count, "elapsed_s": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--window", type=int, default=32)
    args = parser.parse_args()
    if not V5_PYTHON.exists():
        sys.exit(f"no {V5_PYTHON}: make v5-venv installs RocketMQ 5's Python client")
    from tidemq.testing import ServeProcess

    n, size, window = args.count, args.size, args.window
    with (
        tempfile.TemporaryDirectory(prefix="bench-grpc-") as tmp,
        ServeProcess(Path(tmp) / "store", extra_args=["--grpc-port", "0"]) as serve,
    ):
        pid, grpc, namesrv = serve.pid, serve.fields["grpc"], serve.namesrv_addr
        result: dict[str, Any] = {"bench": "grpc", "count": n, "size": size, "window": window}
        result["v5_produce"] = measured(
            pid, lambda: v5("produce", grpc, "BenchV5", str(n), str(size), str(window))
        )
        result["v5_receive_ack"] = measured(
            pid, lambda: v5("consume", grpc, "BenchV5", str(n + 1), "bench-grpc-v5")
        )
        result["remoting_produce"] = measured(
            pid, lambda: asyncio.run(remoting_produce(namesrv, "BenchRemoting", n, size, window))
        )
        result["remoting_receive_ack"] = measured(
            pid, lambda: asyncio.run(remoting_receive_ack(namesrv, "BenchRemoting", n + 1))
        )
        result["grpc_heartbeat"] = measured(pid, lambda: grpc_heartbeats(grpc, n, window))
    result["python"] = interpreter()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
