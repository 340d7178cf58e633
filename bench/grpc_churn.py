"""RocketMQ 5 SimpleConsumers over gRPC that come and go under a steady stream: no duplicates.

Setup: one ``tidemq serve --grpc-port 0``; tidemq's own producer sends ``--rate`` messages/s to one
topic (8 queues) for ``--seconds``; meanwhile members of one consumer group (RocketMQ 5's official
Python client, from ``.venv-v5``, each a process of its own) join and leave: a new member every
``--join-every`` seconds, each staying ``--stay`` seconds, so 2-3 are in the group at any time and
every member's start and shutdown happen while messages flow. Each member acks every message at
once (well within the 30 s invisible time). A last member drains what is left.

POP has no rebalance: a message acked in time is never delivered again. Prints one JSON line::

    {"bench": "grpc_churn", "sent": N, "received": N, "distinct": N, "duplicates": 0, "missing": 0,
     "members": M, "seconds": S, "rate": R}

Run: ``python -m bench.grpc_churn [--seconds 20] [--rate 200] [--join-every 3] [--stay 7]``
(needs ``make v5-venv``).
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
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
V5_PYTHON = ROOT / ".venv-v5" / "bin" / "python"
TOPIC, GROUP = "ChurnTopic", "churn-group"


def start_member(endpoint: str, seconds: float) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [
        str(V5_PYTHON),
        "-P",
        str(ROOT / "bench" / "v5_load.py"),
        "member",
        endpoint,
        TOPIC,
        str(seconds),
        GROUP,
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)


def ids_of(proc: subprocess.Popen[bytes]) -> list[str]:
    out, _ = proc.communicate(timeout=120)
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"a member exited {proc.returncode} without output")
    ids: list[str] = json.loads(lines[-1])["ids"]
    return ids


async def produce(namesrv: str, seconds: float, rate: int) -> list[str]:
    """Send at ``rate`` messages/s for ``seconds``; the UNIQ_KEYs (the v5 message ids) sent."""
    from tidemq.client import AsyncProducer
    from tidemq.protocol.message import Message

    producer = AsyncProducer(namesrv_addr=namesrv, producer_group="churn-pg")
    await producer.start()
    sent: list[str] = []
    try:
        start = time.monotonic()
        n = int(seconds * rate)
        for i in range(n):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            result = await producer.send(Message(TOPIC, f"m{i}".encode()))
            sent.append(result.msg_id)
    finally:
        await producer.shutdown()
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--join-every", type=float, default=3.0)
    parser.add_argument("--stay", type=float, default=7.0)
    args = parser.parse_args()
    if not V5_PYTHON.exists():
        sys.exit(f"no {V5_PYTHON}: make v5-venv installs RocketMQ 5's Python client")
    from tidemq.admin.client import AdminClient
    from tidemq.testing import ServeProcess

    with (
        tempfile.TemporaryDirectory(prefix="bench-churn-") as tmp,
        ServeProcess(Path(tmp) / "store", extra_args=["--grpc-port", "0"]) as serve,
    ):
        endpoint = serve.fields["grpc"]
        with AdminClient(serve.namesrv_addr) as admin:
            admin.create_topic(TOPIC, 8)
        members: list[subprocess.Popen[bytes]] = [start_member(endpoint, args.stay)]
        result: dict[str, Any] = {}

        async def run() -> list[str]:
            producing = asyncio.ensure_future(produce(serve.namesrv_addr, args.seconds, args.rate))
            while not producing.done():
                await asyncio.wait({producing}, timeout=args.join_every)
                if not producing.done():
                    members.append(start_member(endpoint, args.stay))
            return producing.result()

        sent = asyncio.run(run())
        members.append(start_member(endpoint, args.stay))  # drains the rest
        counts: Counter[str] = Counter()
        for proc in members:
            counts.update(ids_of(proc))
        result = {
            "bench": "grpc_churn",
            "sent": len(sent),
            "received": sum(counts.values()),
            "distinct": len(counts),
            "duplicates": sum(c - 1 for c in counts.values() if c > 1),
            "missing": len(set(sent) - set(counts)),
            "members": len(members),
            "seconds": args.seconds,
            "rate": args.rate,
        }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
