"""Broker throughput: produce then consume 1 KiB messages against ``tidemq serve``.

Setup: for each flush mode (ASYNC_FLUSH, SYNC_FLUSH) a fresh ``python -m tidemq serve`` subprocess on
127.0.0.1 with its store in a temporary directory; one topic with ``--queues`` queues; ``--senders``
concurrent senders (over ``--connections`` TCP connections) each sending SEND_BATCH_MESSAGE requests
of 32 messages of 1 KiB until ``--messages`` messages are stored or ``--seconds`` pass; then every queue
is drained concurrently with PULL_MESSAGE of 32.

Prints ONE JSON line::

    {"bench": "broker_throughput", "setup": {...},
     "ASYNC_FLUSH": {"produce_msgs_per_s": ..., "produce_mb_per_s": ..., "consume_msgs_per_s": ...,
                     "consume_mb_per_s": ..., "messages": ...},
     "SYNC_FLUSH": {...}}

Run: ``python -m bench.broker_throughput [--messages N] [--seconds S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import create_topic
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    PullMessageRequestHeader,
    PullSysFlag,
    SendMessageRequestHeader,
)
from tidemq.protocol.message import Message
from tidemq.protocol.message_codec import encode_batch_body
from tidemq.remoting import RemotingClient
from tidemq.remoting.loop import use_best_event_loop
from tidemq.testing import ServeProcess

TOPIC = "BenchTopic"
BATCH = 32
MSG_SIZE = 1024
MB = 1024 * 1024


def batch_body(sender: int) -> bytes:
    """32 messages of 1 KiB (distinct bodies and UNIQ_KEYs per sender)."""
    msgs = [
        Message(
            TOPIC,
            (b"%04d-%04d-" % (sender, i)).ljust(MSG_SIZE, b"x"),
            properties={"UNIQ_KEY": f"S{sender}M{i}"},
        )
        for i in range(BATCH)
    ]
    return encode_batch_body(msgs)


async def produce(addr: str, args: argparse.Namespace) -> tuple[int, float]:
    """Send batches until ``args.messages`` are stored or ``args.seconds`` pass; returns (count, seconds)."""
    clients = [RemotingClient() for _ in range(args.connections)]
    await create_topic(clients[0], addr, TOPIC, args.queues)
    stored = 0
    start = time.perf_counter()
    deadline = start + args.seconds
    queue_cycle = itertools.count()

    async def sender(n: int) -> None:
        nonlocal stored
        client = clients[n % len(clients)]
        body = batch_body(n)
        while stored < args.messages and time.perf_counter() < deadline:
            h = SendMessageRequestHeader(
                producer_group="BenchPG",
                topic=TOPIC,
                default_topic="TBW102",
                default_topic_queue_nums=args.queues,
                queue_id=next(queue_cycle) % args.queues,
                sys_flag=0,
                born_timestamp=int(time.time() * 1000),
                flag=0,
                batch=True,
            )
            req = RemotingCommand.create_request(RequestCode.SEND_BATCH_MESSAGE, h.to_v2_ext_fields(), body)
            r = await client.invoke(addr, req, 30)
            if r.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"send failed: {r.code} {r.remark}")
            stored += BATCH

    try:
        await asyncio.gather(*(sender(i) for i in range(args.senders)))
    finally:
        elapsed = time.perf_counter() - start
        for c in clients:
            await c.close()
    return stored, elapsed


async def consume(addr: str, args: argparse.Namespace) -> tuple[int, int, float]:
    """Drain every queue with pulls of 32; returns (messages, body bytes, seconds)."""
    client = RemotingClient()
    count = 0
    nbytes = 0
    start = time.perf_counter()

    async def drain(queue_id: int) -> None:
        nonlocal count, nbytes
        offset = 0
        while True:
            h = PullMessageRequestHeader(
                consumer_group="BenchCG",
                topic=TOPIC,
                queue_id=queue_id,
                queue_offset=offset,
                max_msg_nums=BATCH,
                sys_flag=PullSysFlag.FLAG_SUBSCRIPTION,
                commit_offset=0,
                suspend_timeout_millis=0,
                subscription="*",
                sub_version=0,
            )
            r = await client.invoke(
                addr, RemotingCommand.create_request(RequestCode.PULL_MESSAGE, h.to_ext_fields()), 30
            )
            if r.code != ResponseCode.SUCCESS:
                return
            offset = int(r.ext_fields["nextBeginOffset"])
            # count records without decoding bodies twice: each record's TOTALSIZE prefixes it
            pos = 0
            body = r.body
            while pos < len(body):
                size = int.from_bytes(body[pos : pos + 4], "big")
                count += 1
                nbytes += MSG_SIZE
                pos += size

    try:
        await asyncio.gather(*(drain(q) for q in range(args.queues)))
    finally:
        elapsed = time.perf_counter() - start
        await client.close()
    return count, nbytes, elapsed


def run_mode(flush: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    with ServeProcess(root / f"store-{flush}", flush=flush) as proc:
        produced, p_secs = asyncio.run(produce(proc.broker_addr, args))
        consumed, c_bytes, c_secs = asyncio.run(consume(proc.broker_addr, args))
    return {
        "messages": produced,
        "produce_msgs_per_s": round(produced / p_secs, 1),
        "produce_mb_per_s": round(produced * MSG_SIZE / MB / p_secs, 2),
        "consumed": consumed,
        "consume_msgs_per_s": round(consumed / c_secs, 1),
        "consume_mb_per_s": round(c_bytes / MB / c_secs, 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--messages", type=int, default=200_000, help="stop producing after this many messages"
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="stop producing after this many seconds")
    parser.add_argument("--senders", type=int, default=8, help="concurrent senders")
    parser.add_argument("--connections", type=int, default=4, help="TCP connections shared by the senders")
    parser.add_argument("--queues", type=int, default=4, help="queues of the topic")
    args = parser.parse_args(argv)
    use_best_event_loop()
    result: dict[str, Any] = {
        "bench": "broker_throughput",
        "setup": {
            "message_bytes": MSG_SIZE,
            "batch": BATCH,
            "senders": args.senders,
            "connections": args.connections,
            "queues": args.queues,
            "max_messages": args.messages,
            "max_seconds": args.seconds,
            "pull_batch": BATCH,
            "server": "python -m tidemq serve (subprocess, 127.0.0.1)",
            "python": platform.python_version(),
            "machine": platform.machine(),
        },
    }
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-") as tmp:
        for mode, flush in (("ASYNC_FLUSH", "async"), ("SYNC_FLUSH", "sync")):
            result[mode] = run_mode(flush, args, Path(tmp))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
