"""POP under repeated SIGKILLs: nothing lost, nothing acked delivered again.

Setup: a ``tidemq serve`` subprocess (ASYNC_FLUSH, consumer offsets never written by the periodic
task: ``flushConsumerOffsetInterval=600000``, so recovery comes from the revive log alone); a topic of
2 queues with ``--messages`` messages. Then ``--kills`` rounds: a SimpleConsumer of the group
receives 1-6 messages at a time with an invisible duration of 0.5 or 1.5 s and acks 70 % of them
(the rest come back later), for a random 0.5-3 s; the broker is SIGKILLed and restarted on its store.
A last round consumes, acking everything, until every message is acked (at most 30 s). Run for normal and FIFO pops.

Prints ONE JSON line::

    {"bench": "pop_crash", "setup": {...}, "normal": {"kills": K, "messages": N, "acked": N,
     "deliveries": D, "acked_then_delivered_again": 0, "lost": 0}, "fifo": {...}}

Run: ``python -m bench.pop_crash [--messages N] [--kills K] [--seed S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from tidemq.client import AsyncProducer, AsyncSimpleConsumer
from tidemq.protocol.message import Message, MessageQueue
from tidemq.testing import ServeProcess

TOPIC = "PopCrashBench"


class _Run:
    def __init__(self, fifo: bool, rng: random.Random) -> None:
        self.fifo = fifo
        self.rng = rng
        self.acked: set[bytes] = set()
        self.again: set[bytes] = set()
        self.deliveries = 0

    async def produce(self, ns: str, n: int) -> None:
        producer = AsyncProducer(namesrv_addr=ns, producer_group="pop-crash-pg")
        await producer.start()

        def by_number(mqs: list[MessageQueue], msg: Message, arg: object) -> MessageQueue:
            return sorted(mqs, key=lambda q: q.queue_id)[int(msg.body) % 2]

        for i in range(n):
            await producer.send(Message(TOPIC, str(i).encode()), selector=by_number)
        await producer.shutdown()

    async def consume(self, ns: str, seconds: float, n: int, ack_ratio: float = 0.7) -> None:
        rng = self.rng
        consumer = AsyncSimpleConsumer(
            namesrv_addr=ns,
            consumer_group=f"pop-crash-{int(self.fifo)}",
            subscriptions={TOPIC: "*"},
            await_duration=0.3,
            fifo=self.fifo,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            instance_name=f"m{rng.randrange(10**9)}",
        )
        await consumer.start()
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end and len(self.acked) < n:
                for m in await consumer.receive(rng.randint(1, 6), rng.choice([0.5, 1.5])):
                    self.deliveries += 1
                    if m.body in self.acked:
                        self.again.add(m.body)
                    if rng.random() < ack_ratio:
                        await consumer.ack(m)
                        self.acked.add(m.body)
        finally:
            await consumer.shutdown()


def run(fifo: bool, messages: int, kills: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "broker.conf"
        conf.write_text(
            "brokerName=broker-a\nflushConsumerOffsetInterval=600000\nmappedFileSizeCommitLog=4194304\n"
        )
        args = ["-c", str(conf)]
        proc = ServeProcess(Path(tmp) / "store", extra_args=args).start()
        state = _Run(fifo, rng)
        try:
            asyncio.run(state.produce(proc.namesrv_addr, messages))
            for _ in range(kills):
                asyncio.run(state.consume(proc.namesrv_addr, rng.uniform(0.5, 3.0), messages))
                proc.kill()
                proc = ServeProcess(Path(tmp) / "store", extra_args=args).start()
            asyncio.run(state.consume(proc.namesrv_addr, 30.0, messages, ack_ratio=1.0))
        finally:
            proc.stop()
    return {
        "kills": kills,
        "messages": messages,
        "acked": len(state.acked),
        "deliveries": state.deliveries,
        "acked_then_delivered_again": len(state.again),
        "lost": messages - len(state.acked),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args()
    out = {
        "bench": "pop_crash",
        "setup": {"messages": a.messages, "kills": a.kills, "seed": a.seed, "queues": 2, "ack_ratio": 0.7},
        "normal": run(False, a.messages, a.kills, a.seed),
        "fifo": run(True, a.messages, a.kills, a.seed),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
