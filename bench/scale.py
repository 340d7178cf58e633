"""How the broker's and name server's cost grows with the size of a deployment.

Starts ``tidemq serve`` (name server + broker, async flush) in a subprocess with a temporary store,
then for each topic count of ``--topics`` (cumulative: 1k, then up to 10k, then up to 50k):

- creates the topics through the batch create (UPDATE_AND_CREATE_TOPIC_LIST, code 18) in chunks of
  ``--chunk``, and ``--one-by-one`` of them with one UPDATE_AND_CREATE_TOPIC (17) each, timing both;
- the broker's and name server's RSS (one process here: ``tidemq serve``);
- one full REGISTER_BROKER as the broker sends it (body bytes, encode + round-trip time), and the
  periodic registration when nothing changed (QUERY_DATA_VERSION only);
- GET_ROUTEINFO_BY_TOPIC p50 / p99 over ``--lookups`` random topics.

Then for ``--groups`` consumer groups (each with a subscription and a committed offset) and
``--clients`` client connections heartbeating every ``--heartbeat-s``:
the broker's CPU (% of one core) at rest, RSS, and the consumer-offset persist time.

Prints one JSON line per step and a final summary line. Example (the issue's goals)::

    python -m bench.scale --topics 1000,10000,50000 --groups 100,1000 --clients 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tidemq.admin.client import AsyncAdminClient
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.remoting.client import RemotingClient
from tidemq.testing import ServeProcess

MB = 1024 * 1024


def rss_mb(pid: int) -> float:
    """``VmRSS`` of ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    """The ``p`` percentile (0..100) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


async def create_topics(
    admin: AsyncAdminClient, names: list[str], chunk: int, one_by_one: int
) -> dict[str, Any]:
    """Create ``names``: the first ``one_by_one`` with UPDATE_AND_CREATE_TOPIC each, the rest in
    batches of ``chunk``. Returns the timings."""
    single, batch = names[:one_by_one], names[one_by_one:]
    t0 = time.perf_counter()
    for name in single:
        await admin.create_topic(name, 8)
    single_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(0, len(batch), chunk):
        await admin.create_topic_list(batch[i : i + chunk], 8)
    batch_s = time.perf_counter() - t0
    return {
        "one_by_one": len(single),
        "one_by_one_s": round(single_s, 2),
        "one_by_one_per_s": round(len(single) / single_s, 1) if single else None,
        "batch": len(batch),
        "batch_s": round(batch_s, 2),
        "batch_per_s": round(len(batch) / batch_s, 1) if batch else None,
    }


async def route_lookups(
    remoting: RemotingClient, namesrv: str, topics: list[str], n: int
) -> dict[str, float]:
    """GET_ROUTEINFO_BY_TOPIC round trips (ms) for ``n`` random topics."""
    times: list[float] = []
    for topic in random.choices(topics, k=n):
        req = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        t0 = time.perf_counter()
        resp = await remoting.invoke(namesrv, req, 5.0)
        times.append((time.perf_counter() - t0) * 1000)
        assert resp.code == 0, resp.remark
    return {"route_p50_ms": round(statistics.median(times), 3), "route_p99_ms": round(pct(times, 99), 3)}


async def registration(remoting: RemotingClient, broker: str) -> dict[str, Any]:
    """Ask the broker for its last registration figures (tidemq's GET_BROKER_RUNTIME_INFO fields)."""
    req = RemotingCommand.create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    resp = await remoting.invoke(broker, req, 5.0)
    table = json.loads(resp.body or b"{}").get("table", {})
    keys = ("registerBodyBytes", "registerFullMs", "registerSkipped", "registerIncremental")
    return {k: table.get(k) for k in keys}


async def run_topics(args: argparse.Namespace, serve: ServeProcess, pid: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    remoting = RemotingClient()
    admin = AsyncAdminClient(serve.namesrv_addr)
    made: list[str] = []
    try:
        for target in [int(x) for x in args.topics.split(",") if x]:
            names = [f"scale-{i:06d}" for i in range(len(made), target)]
            one_by_one = min(args.one_by_one, len(names))
            timing = await create_topics(admin, names, args.chunk, one_by_one)
            made += names
            row = {"step": "topics", "topics": len(made), **timing, "rss_mb": rss_mb(pid)}
            row.update(await route_lookups(remoting, serve.namesrv_addr, made, args.lookups))
            row.update(await registration(remoting, serve.broker_addr))
            emit(row)
            rows.append(row)
    finally:
        await admin.close()
        await remoting.close()
    return rows


def restart_figures(serve: ServeProcess) -> dict[str, Any]:
    """Stop and start ``tidemq serve`` on the same store: time to ready, RSS, and the full
    registration it sends at start (body bytes, ms)."""
    serve.stop()
    t0 = time.perf_counter()
    serve.start()
    ready_s = time.perf_counter() - t0
    assert serve.proc is not None

    async def figures() -> dict[str, Any]:
        remoting = RemotingClient()
        try:
            return await registration(remoting, serve.broker_addr)
        finally:
            await remoting.close()

    return {
        "step": "restart",
        "ready_s": round(ready_s, 2),
        "rss_mb": rss_mb(serve.proc.pid),
        **asyncio.run(figures()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--topics", default="1000,10000,50000", help="cumulative topic counts")
    parser.add_argument("--chunk", type=int, default=1000, help="topics per UPDATE_AND_CREATE_TOPIC_LIST")
    parser.add_argument("--one-by-one", type=int, default=1000, help="topics per step created one at a time")
    parser.add_argument("--lookups", type=int, default=2000, help="route lookups per step")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-scale-") as tmp,
        ServeProcess(Path(tmp) / "store", flush="async", log_path=Path(tmp) / "serve.log") as serve,
    ):
        assert serve.proc is not None
        pid = serve.proc.pid
        emit({"step": "idle", "rss_mb": rss_mb(pid), "cpu_s": cpu_seconds(pid)})
        rows = asyncio.run(run_topics(args, serve, pid))
        restart = restart_figures(serve)
        emit(restart)
    emit({"bench": "scale", "topics": rows, "restart": restart})


if __name__ == "__main__":
    main()
