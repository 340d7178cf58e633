"""POP: throughput and memory with many messages in flight.

Setup: an in-process name server + broker (``tidemq.testing.run_cluster``, ASYNC_FLUSH, store in a
temporary directory), one topic of 8 queues filled with ``--messages`` messages of 256 B (batch
sends). Then, in the broker's loop:

1. ``pop``: :meth:`PopService.pop` of 32 at a time over every queue with a 10-minute invisible time
   until every message is in flight (one check-point per pop of a queue), then one revive step so
   every check-point is held; figures: messages popped per second, check-points held, the Python
   heap the revive's in-memory state takes (tracemalloc, bytes per in-flight message), and the
   broker process's RSS growth;
2. ``ack``: every message acked one by one (:meth:`PopService.ack`), then a revive step; acks/s and
   the check-points still held (0);
3. ``simple_ack_each`` / ``simple_ack_many``: tidemq's ``AsyncSimpleConsumer`` over remoting
   (POP_MESSAGE of 32 on a real socket) receives ``--client-messages`` new messages of a new topic
   and acks them one ACK_MESSAGE each, or one BATCH_ACK_MESSAGE per receive (``ack_many``):
   messages/s end to end.

Prints ONE JSON line::

    {"bench": "pop", "setup": {...}, "pop": {...}, "ack": {...}, "simple_ack_each": {...},
     "simple_ack_many": {...}}

Run: ``python -m bench.pop [--messages N] [--client-messages M]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import resource
import tempfile
import time
import tracemalloc
from typing import Any

from bench import create_topic
from tidemq.client import AsyncSimpleConsumer
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import SendMessageRequestHeader
from tidemq.protocol.message import Message
from tidemq.protocol.message_codec import encode_batch_body
from tidemq.remoting import RemotingClient
from tidemq.testing import run_cluster

TOPIC = "BenchPop"
QUEUES = 8
BODY = b"x" * 256


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def _fill(client: RemotingClient, addr: str, n: int, prefix: str, topic: str = TOPIC) -> None:
    per_queue = n // QUEUES
    for q in range(QUEUES):
        for start in range(0, per_queue, 64):
            count = min(64, per_queue - start)
            msgs = [Message(topic, BODY) for _ in range(count)]
            header = SendMessageRequestHeader(
                producer_group="bench-pg",
                topic=topic,
                default_topic="TBW102",
                default_topic_queue_nums=QUEUES,
                queue_id=q,
                sys_flag=0,
                born_timestamp=int(time.time() * 1000),
                flag=0,
                properties=f"{prefix}\x01{start}",
                batch=True,
            )
            request = RemotingCommand.create_request(
                RequestCode.SEND_BATCH_MESSAGE, header.to_v2_ext_fields(), encode_batch_body(msgs)
            )
            response = await client.invoke(addr, request, 10)
            assert response.code == ResponseCode.SUCCESS, response.remark


async def _pop_phase(broker: Any, n: int) -> tuple[dict[str, Any], list[str]]:
    service = broker.pop_service
    handles: list[str] = []
    rss0 = _rss_kib()
    t0 = time.perf_counter()
    while len(handles) < n:
        result = service.pop("bench-g", TOPIC, -1, 32, 600_000, init_mode=0)
        if not result.messages:
            break
        handles.extend(m.extra_info for m in result.messages)
    elapsed = time.perf_counter() - t0
    tracemalloc.start()  # the revive's state is built when it reads the check-points
    base = tracemalloc.get_traced_memory()[0]
    service.revive.step()  # hold every check-point
    held_bytes = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    in_flight = sum(v for v in service.revive.in_flight_by_group().values())
    return {
        "messages_in_flight": in_flight,
        "pop_msgs_per_s": round(len(handles) / elapsed),
        "check_points_held": service.revive.pending_count,
        "python_heap_bytes_per_in_flight_msg": round(held_bytes / max(1, in_flight), 1),
        "rss_growth_mib": round((_rss_kib() - rss0) / 1024, 1),
        "max_check_points_held": service.revive.max_pending,
    }, handles


async def _ack_phase(broker: Any, handles: list[str]) -> dict[str, Any]:
    service = broker.pop_service
    t0 = time.perf_counter()
    for h in handles:
        service.ack("bench-g", TOPIC, h)
    elapsed = time.perf_counter() - t0
    service.revive.step()
    return {
        "acks": len(handles),
        "ack_per_s": round(len(handles) / elapsed),
        "check_points_held": service.revive.pending_count,
    }


async def _simple_phase(ns: str, client: RemotingClient, addr: str, n: int, ack_many: bool) -> dict[str, Any]:
    topic = f"BenchSimple{int(ack_many)}"
    await _fill(client, addr, n, "c", topic)
    consumer = AsyncSimpleConsumer(
        namesrv_addr=ns,
        consumer_group="bench-simple",
        subscriptions={topic: "*"},
        await_duration=1.0,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        instance_name="bench",
    )
    await consumer.start()
    got = 0
    t0 = time.perf_counter()
    try:
        while got < n:
            msgs = await consumer.receive(32, 60)
            if not msgs:
                break
            if ack_many:
                await consumer.ack_many(msgs)
            else:
                for m in msgs:
                    await consumer.ack(m)
            got += len(msgs)
    finally:
        elapsed = time.perf_counter() - t0
        await consumer.shutdown()
    return {"messages": got, "receive_ack_msgs_per_s": round(got / elapsed)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with run_cluster(tmp, revive_interval=3_600_000) as cluster:
            client = RemotingClient()
            try:
                await create_topic(client, cluster.broker_addr, TOPIC, QUEUES)
                await _fill(client, cluster.broker_addr, args.messages, "p")
                pop, handles = await _pop_phase(cluster.broker, args.messages)
                ack = await _ack_phase(cluster.broker, handles)
                ns, addr, n = cluster.namesrv_addr, cluster.broker_addr, args.client_messages
                simple = await _simple_phase(ns, client, addr, n, False)
                simple_many = await _simple_phase(ns, client, addr, n, True)
            finally:
                await client.close()
    return {
        "bench": "pop",
        "setup": {
            "messages": args.messages,
            "client_messages": args.client_messages,
            "queues": QUEUES,
            "body_bytes": len(BODY),
            "python": platform.python_version(),
            "machine": platform.machine(),
        },
        "pop": pop,
        "ack": ack,
        "simple_ack_each": simple,
        "simple_ack_many": simple_many,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--client-messages", type=int, default=5_000)
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
