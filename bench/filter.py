"""Broker cost per scanned message of an SQL92 filter against a tag filter, in the same run.

Setup: an in-process name server + broker (temp store, defaults). One queue of ``--messages``
messages (``--body`` bytes each), sent in batches by tidemq's producer; message ``i`` carries tag
``TagA`` when ``i`` is even (else ``TagB``), property ``a = i % 10`` and ``b = 'x'`` or ``'y'``
(alternating every two), plus the producer's own ``UNIQ_KEY`` / ``WAIT`` / ``TAGS``. Then the whole
queue is read by PULL_MESSAGE requests (32 messages per pull, the subscription in each request,
as ali-ons sends them) handed straight to the broker's pull processor on this thread, from offset 0
until the end, for each filter in turn, ``--reps`` times, keeping the best time:

* ``none``: ``*`` (no filter);
* ``tag``: ``TagA`` (half the messages match);
* ``sql``: ``a > 4`` (half match);
* ``sql2``: ``a > 4 AND b = 'x'`` (a quarter match).

Prints one JSON line: per filter, scanned messages per second, µs per scanned message, matched
messages, and each SQL filter's rate as a ratio of the tag filter's (goal: ``sql_vs_tag`` >= 0.5)::

    {"bench": "filter", "messages": ..., "none": {"scanned_per_s": ..., "us_per_scanned": ...,
     "matched": ...}, "tag": {...}, "sql": {...}, "sql2": {...}, "sql_vs_tag": ..., "sql2_vs_tag": ...}

Run: ``python -m bench.filter [--messages N] [--body BYTES] [--reps N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from types import SimpleNamespace
from typing import Any

from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import PullMessageRequestHeader, PullSysFlag
from tidemq.protocol.message import Message, MessageQueue
from tidemq.testing import run_cluster

TOPIC = "FilterBench"
GROUP = "FilterBenchGroup"
FILTERS = {
    "none": ("TAG", "*"),
    "tag": ("TAG", "TagA"),
    "sql": ("SQL92", "a > 4"),
    "sql2": ("SQL92", "a > 4 AND b = 'x'"),
}


async def _fill(namesrv_addr: str, messages: int, body: bytes) -> MessageQueue:
    producer = AsyncProducer(namesrv_addr=namesrv_addr, producer_group="FilterBenchProducer")
    await producer.start()
    try:
        first = await producer.send(Message(TOPIC, body, tags="TagA", properties={"a": "0", "b": "x"}))
        queue = first.message_queue
        batch: list[Message] = []
        for i in range(1, messages):
            props = {"a": str(i % 10), "b": "x" if (i // 2) % 2 == 0 else "y"}
            batch.append(Message(TOPIC, body, tags="TagA" if i % 2 == 0 else "TagB", properties=props))
            if len(batch) == 256 or i == messages - 1:
                await producer.send_batch(batch, queue=queue)
                batch = []
        return queue
    finally:
        await producer.shutdown()


def _scan(
    processor: Any, queue_id: int, expression_type: str, expression: str, end: int
) -> tuple[float, int]:
    """Pull the whole queue once; (seconds, matched messages)."""
    channel = SimpleNamespace(remote_addr="bench:0", is_active=True)
    offset = 0
    bodies: list[bytes] = []
    start = time.thread_time()
    while offset < end:
        header = PullMessageRequestHeader(
            consumer_group=GROUP,
            topic=TOPIC,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=32,
            sys_flag=PullSysFlag.build_sys_flag(False, False, True, False),
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription=expression,
            sub_version=1,
            expression_type=expression_type,
        )
        request = RemotingCommand.create_request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        response = processor.process(channel, request, broker_allow_suspend=False)
        if response.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
            raise RuntimeError(f"pull at {offset} answered {response.code}: {response.remark}")
        if response.code == ResponseCode.SUCCESS:
            bodies.append(response.body)
        offset = int(response.ext_fields["nextBeginOffset"])
    seconds = time.thread_time() - start
    return seconds, sum(map(_count, bodies))


def _count(body: bytes) -> int:
    n, pos = 0, 0
    while pos < len(body):
        pos += int.from_bytes(body[pos : pos + 4], "big")
        n += 1
    return n


async def run(messages: int, body_size: int, reps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-filter-") as tmp:
        async with run_cluster(tmp) as cluster:
            queue = await _fill(cluster.namesrv_addr, messages, b"x" * body_size)
            broker = cluster.broker
            end = broker.store.get_max_offset_in_queue(TOPIC, queue.queue_id)
            out: dict[str, Any] = {"bench": "filter", "messages": end, "body_bytes": body_size, "reps": reps}
            best: dict[str, float] = {}
            for _ in range(reps):  # filters interleaved, so each sees the same machine conditions
                for name, (expression_type, expression) in FILTERS.items():
                    seconds, matched = _scan(
                        broker.pull_processor, queue.queue_id, expression_type, expression, end
                    )
                    best[name] = min(best.get(name, seconds), seconds)
                    out[name] = {"expression": expression, "matched": matched}
            for name, seconds in best.items():
                out[name] |= {
                    "scanned_per_s": round(end / seconds),
                    "us_per_scanned": round(seconds / end * 1e6, 3),
                }
            out["sql_vs_tag"] = round(best["tag"] / best["sql"], 3)
            out["sql2_vs_tag"] = round(best["tag"] / best["sql2"], 3)
            return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--body", type=int, default=256, help="body bytes per message")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.messages, args.body, args.reps))))


if __name__ == "__main__":
    main()
