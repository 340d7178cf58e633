"""How the broker's and name server's cost grows with the size of a deployment.

Starts ``tidemq serve`` (name server + broker, async flush) in a subprocess with a temporary store,
then for each topic count of ``--topics`` (cumulative: 1k, then up to 10k, then up to 50k):

- creates the topics through the batch create (UPDATE_AND_CREATE_TOPIC_LIST, code 18) in chunks of
  ``--chunk``, and ``--one-by-one`` of them with one UPDATE_AND_CREATE_TOPIC (17) each, timing both;
- the broker's and name server's RSS (one process here: ``tidemq serve``);
- one full REGISTER_BROKER as the broker sends it (body bytes, encode + round-trip time), and the
  periodic registration when nothing changed (QUERY_DATA_VERSION only);
- GET_ROUTEINFO_BY_TOPIC p50 / p99 over ``--lookups`` random topics.

Then for ``--groups`` consumer groups (each with 8 committed offsets) and ``--clients`` raw client
connections sending a consumer heartbeat every ``--heartbeat-s`` (two per group at the largest
count): the broker's CPU (% of one core) over ``--rest-s`` of rest, and its RSS. Last, a restart on
the same store (time to ready, the full registration it sends) and, in this process, the time to
persist the offsets of each group count whole (what every 5 s persist cost before the journal)
against a journal append when 1% of the groups committed since the last persist.

Prints one JSON line per step and a final summary line. Example (the issue's goals)::

    python -m bench.scale --topics 1000,10000,50000 --groups 100,1000 --clients 2000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tidemq.admin.client import AsyncAdminClient
from tidemq.broker.offset_manager import ConsumerOffsetManager
from tidemq.protocol.body import ConsumerData, HeartbeatData, SubscriptionData
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand, encode_command
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


async def _client(
    addr: str, client_id: str, group: str, topic: str, period: float, stop: asyncio.Event
) -> None:
    """One raw client connection: a consumer heartbeat every ``period`` s; requests from the broker
    (rebalance notifications) are read and dropped."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    data = HeartbeatData(
        client_id=client_id,
        consumer_data_set=[
            ConsumerData(
                group_name=group, subscription_data_set=[SubscriptionData(topic=topic, sub_string="*")]
            )
        ],
    )

    async def drain() -> None:
        while await reader.read(65536):
            pass

    drainer = asyncio.ensure_future(drain())
    try:
        while not stop.is_set():
            cmd = RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, data.encode())
            writer.write(encode_command(cmd))
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), period)
    finally:
        drainer.cancel()
        writer.close()


async def run_groups(args: argparse.Namespace, serve: ServeProcess, pid: int) -> list[dict[str, Any]]:
    """Consumer groups with committed offsets and heartbeating clients: broker CPU at rest and RSS."""
    rows: list[dict[str, Any]] = []
    remoting = RemotingClient()
    admin = AsyncAdminClient(serve.namesrv_addr)
    topic = "scale-groups"
    await admin.create_topic(topic, 8)
    made = 0
    try:
        for target in [int(x) for x in args.groups.split(",") if x]:
            for g in range(made, target):
                for q in range(8):
                    req = RemotingCommand.create_request(
                        RequestCode.UPDATE_CONSUMER_OFFSET,
                        {
                            "consumerGroup": f"group-{g:05d}",
                            "topic": topic,
                            "queueId": str(q),
                            "commitOffset": "0",
                        },
                    )
                    await remoting.invoke(serve.broker_addr, req, 5.0)
            made = target
            clients = args.clients * target // max(int(x) for x in args.groups.split(","))
            stop = asyncio.Event()
            tasks = [
                asyncio.ensure_future(
                    _client(
                        serve.broker_addr,
                        f"10.0.0.{i % 250}@{i}",
                        f"group-{i % target:05d}",
                        topic,
                        args.heartbeat_s,
                        stop,
                    )
                )
                for i in range(clients)
            ]
            await asyncio.sleep(min(10.0, args.heartbeat_s))  # the joins and their notifications settle
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            await asyncio.sleep(args.rest_s)
            cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0) * 100
            row = {
                "step": "groups",
                "groups": target,
                "clients": clients,
                "heartbeat_s": args.heartbeat_s,
                "broker_cpu_pct_at_rest": round(cpu, 2),
                "rss_mb": rss_mb(pid),
            }
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            emit(row)
            rows.append(row)
    finally:
        await admin.close()
        await remoting.close()
    return rows


def offset_persist_figures(groups: int, changed_pct: float) -> dict[str, Any]:
    """In-process: the time to persist ``groups`` x 8 offsets whole (every 5 s before) and as a
    journal append when ``changed_pct`` % of the groups committed since the last persist."""
    with tempfile.TemporaryDirectory(prefix="tidemq-offsets-") as tmp:
        com = ConsumerOffsetManager(Path(tmp) / "consumerOffset.json")
        for g in range(groups):
            for q in range(8):
                com.commit_offset("bench", f"group-{g:05d}", "scale-groups", q, 1000 + q)
        t0 = time.perf_counter()
        com.persist()
        whole_ms = (time.perf_counter() - t0) * 1000
        size = com.path.stat().st_size
        changed = max(1, int(groups * changed_pct / 100))
        for g in range(changed):
            com.commit_offset("bench", f"group-{g:05d}", "scale-groups", 0, 5000)
        t0 = time.perf_counter()
        com.persist(force=False)
        journal_ms = (time.perf_counter() - t0) * 1000
        return {
            "step": "offsets",
            "groups": groups,
            "file_bytes": size,
            "whole_persist_ms": round(whole_ms, 2),
            "changed_groups": changed,
            "journal_persist_ms": round(journal_ms, 2),
            "journal_bytes": com.journal.size(),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--topics", default="1000,10000,50000", help="cumulative topic counts")
    parser.add_argument("--chunk", type=int, default=1000, help="topics per UPDATE_AND_CREATE_TOPIC_LIST")
    parser.add_argument("--one-by-one", type=int, default=1000, help="topics per step created one at a time")
    parser.add_argument("--lookups", type=int, default=2000, help="route lookups per step")
    parser.add_argument("--groups", default="100,1000", help="cumulative consumer-group counts")
    parser.add_argument(
        "--clients", type=int, default=2000, help="client connections at the largest group count"
    )
    parser.add_argument("--heartbeat-s", type=float, default=30.0, help="heartbeat period (RocketMQ: 30 s)")
    parser.add_argument(
        "--rest-s", type=float, default=30.0, help="seconds of rest over which CPU is measured"
    )
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-scale-") as tmp,
        ServeProcess(Path(tmp) / "store", flush="async", log_path=Path(tmp) / "serve.log") as serve,
    ):
        assert serve.proc is not None
        pid = serve.proc.pid
        emit({"step": "idle", "rss_mb": rss_mb(pid), "cpu_s": cpu_seconds(pid)})
        rows = asyncio.run(run_topics(args, serve, pid)) if args.topics else []
        groups = asyncio.run(run_groups(args, serve, pid)) if args.groups else []
        restart = restart_figures(serve)
        emit(restart)
    offsets = [offset_persist_figures(int(g), 1.0) for g in args.groups.split(",") if g]
    for row in offsets:
        emit(row)
    emit({"bench": "scale", "topics": rows, "groups": groups, "offsets": offsets, "restart": restart})


if __name__ == "__main__":
    main()
