"""Planned membership changes under a steady stream: duplicates, losses, per-queue pauses and
end-to-end latency, with tidemq's clean hand-off and with RocketMQ's behaviour
(``clean_handoff=False``), in one run (issue 29; DESIGN.md "Rebalance without its hazards").

Setup: ``tidemq serve`` in a subprocess (async flush, temp store, free loopback ports); one
producer sends ``--rate`` messages/s round-robin over ``--queues`` queues of a fresh topic, each
body carrying its send time. Members of one consumer group join and leave in the order
``--steps`` (default ``+A +B +C -A -B``), ``--dwell`` seconds apart, all in this process, each
with its own client id:

* ``push``: ``PushConsumer`` members (sync listener sleeping ``--listener-ms`` per message,
  ``--threads`` consume threads);
* ``litepull``: ``PullConsumer`` members (subscribe, ``poll`` + auto-commit), each polling on a
  thread of its own and sleeping ``--listener-ms`` per polled message.

After the last step the producer stops and the run waits until every message was consumed.
A short throwaway run comes first, so that both modes run in a warm process.

Printed per mode (``tidemq`` = clean hand-off, ``rocketmq`` = ``clean_handoff=False``):
``duplicates`` (deliveries beyond the first), ``lost``, ``pause_ms`` (per queue, the longest gap
between two consumed messages of that queue in the ``--window`` seconds after each change; max and
median over queues and changes; ``steady_pause_ms`` is the same in windows with no change) and
end-to-end latency p99 (send call to listener call) of the messages sent in those windows
(``change_p99_ms``) vs the rest (``steady_p99_ms``). One JSON line at the end.

Run: ``python -m bench.rebalance [--kind push|litepull] [--rate 400] [--queues 8] [--dwell 2]``.
The test ``tests/integration/test_clean_handoff.py`` runs the same scenario, scaled down, on an
in-process broker and asserts 0 duplicates and 0 lost.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidemq.client.consumer.pull import AsyncPullConsumer
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer.producer import AsyncProducer
from tidemq.errors import NoRouteError
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.testing import ServeProcess

DEFAULT_STEPS = ("+A", "+B", "+C", "-A", "-B")


@dataclass
class Scenario:
    """One run's shape (see the module docstring)."""

    kind: str = "push"
    queues: int = 8
    rate: float = 400.0
    listener_ms: float = 20.0
    threads: int = 20
    steps: tuple[str, ...] = DEFAULT_STEPS
    dwell: float = 2.0
    """Seconds between two changes (bench); the test waits for conditions instead (``min_after``)."""
    min_after: int = 0
    """After each change wait until this many more messages were consumed (test)."""
    window: float = 1.5
    clean_handoff: bool = True
    drain_timeout: float = 30.0


@dataclass
class Record:
    """What the members saw: every delivery ``(body, queue id, monotonic time, latency ms)``."""

    deliveries: list[tuple[bytes, int, float, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self, msgs: list[MessageExt]) -> None:
        """Record ``msgs`` consumed now (any thread)."""
        now_wall, now = time.time(), time.monotonic()
        rows = []
        for m in msgs:
            sent = float(m.body.split(b":", 1)[1])
            rows.append((m.body, m.queue_id, now, (now_wall - sent) * 1000.0))
        with self.lock:
            self.deliveries.extend(rows)

    def count(self) -> int:
        with self.lock:
            return len(self.deliveries)


class _Member:
    """One group member of either kind, started and stopped on the scenario's loop."""

    def __init__(self, name: str, ns: str, group: str, topic: str, sc: Scenario, rec: Record) -> None:
        self.name, self.sc, self.rec = name, sc, rec
        common: dict[str, Any] = {
            "namesrv_addr": ns,
            "consumer_group": group,
            "instance_name": f"{group}-{name}",
            "consume_from_where": "CONSUME_FROM_FIRST_OFFSET",
            "clean_handoff": sc.clean_handoff,
        }
        self.consumer: AsyncPushConsumer | AsyncPullConsumer
        self._stop = threading.Event()
        self._poller: asyncio.Future[None] | None = None
        if sc.kind == "push":
            push = AsyncPushConsumer(consume_thread_min=sc.threads, consume_thread_max=sc.threads, **common)
            push.subscribe(topic)
            push.register_message_listener(self._listen)
            self.consumer = push
        else:
            pull = AsyncPullConsumer(auto_commit_interval=1.0, **common)
            pull.subscribe(topic)
            self.consumer = pull

    def _listen(self, msgs: list[MessageExt], ctx: object) -> None:
        self.rec.seen(msgs)
        time.sleep(self.sc.listener_ms * len(msgs) / 1000.0)

    async def _poll(self) -> None:
        consumer = self.consumer
        assert isinstance(consumer, AsyncPullConsumer)
        while not self._stop.is_set():
            msgs = await consumer.poll(0.05)
            if msgs:
                self.rec.seen(msgs)
                await asyncio.sleep(self.sc.listener_ms * len(msgs) / 1000.0 / self.sc.threads)

    async def start(self) -> None:
        await self.consumer.start()
        if isinstance(self.consumer, AsyncPullConsumer):
            self._poller = asyncio.ensure_future(self._poll())

    async def stop(self) -> None:
        self._stop.set()
        if self._poller is not None:
            await self._poller
        await self.consumer.shutdown()

    def assignment(self, topic: str) -> list[MessageQueue]:
        return [q for q in self.consumer.assignment() if q.topic == topic]


async def _wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


async def _route_known(producer: AsyncProducer, topic: str, timeout: float = 20.0) -> None:
    """Wait until the name server routes ``topic`` (an auto-created topic is registered by the
    broker's next registration; a lite pull member started before would wait for its 30 s route
    poll)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await producer.instance.get_route(topic)
            return
        except NoRouteError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def run_scenario(ns: str, topic: str, group: str, sc: Scenario) -> dict[str, Any]:
    """Run ``sc`` against the name server ``ns`` on a fresh ``topic``; the figures (module docstring)."""
    producer = AsyncProducer(namesrv_addr=ns, producer_group=f"{group}-p", default_topic_queue_nums=sc.queues)
    await producer.start()
    rec = Record()
    sent: list[bytes] = []
    members: dict[str, _Member] = {}
    changes: list[float] = []
    stop = asyncio.Event()
    try:
        await producer.send(Message(topic, f"warmup:{time.time()}".encode()))
        queues = sorted(await producer.fetch_publish_message_queues(topic))
        await _route_known(producer, topic)

        async def produce() -> None:
            t0 = time.monotonic()
            i = 0
            while not stop.is_set():
                body = f"{i}:{time.time():.6f}".encode()
                await producer.send(Message(topic, body), queue=queues[i % len(queues)])
                sent.append(body)
                i += 1
                ahead = t0 + i / sc.rate - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)

        producing = asyncio.ensure_future(produce())
        for step in sc.steps:
            name = step[1:]
            changes.append(time.monotonic())
            if step[0] == "+":
                members[name] = _Member(name, ns, group, topic, sc, rec)
                await members[name].start()
            else:
                await members.pop(name).stop()
            live = list(members.values())

            def balanced(live: list[_Member] = live) -> bool:
                owned = [q for m in live for q in m.assignment(topic)]
                return len(owned) == len(queues) and len(set(owned)) == len(queues)

            await _wait(balanced, 20, f"balance after {step}")
            if sc.min_after:
                target = rec.count() + sc.min_after
                await _wait(lambda t=target: rec.count() >= t, 20, f"{sc.min_after} consumed after {step}")
            remaining = changes[-1] + sc.dwell - time.monotonic()
            if remaining > 0:
                await asyncio.sleep(remaining)
        stop.set()
        await producing
        wanted = set(sent)
        await _wait(
            lambda: wanted <= {b for b, *_ in list(rec.deliveries)},
            sc.drain_timeout,
            "every message consumed",
        )
    finally:
        stop.set()
        for m in members.values():
            await m.stop()
        await producer.shutdown()
    return summarize(rec, sent, changes, sc.window)


def summarize(rec: Record, sent: list[bytes], changes: list[float], window: float) -> dict[str, Any]:
    """Duplicates, lost, pauses and latency p99 in change windows vs steady (module docstring)."""
    counts = Counter(b for b, *_ in rec.deliveries if not b.startswith(b"warmup"))
    duplicates = sum(n - 1 for n in counts.values())
    lost = len(set(sent) - set(counts))
    by_queue: dict[int, list[float]] = defaultdict(list)
    for _, qid, t, _lat in rec.deliveries:
        by_queue[qid].append(t)
    first_change, end = changes[0], max(t for _, _, t, _ in rec.deliveries)

    def in_change(t: float) -> bool:
        return any(c <= t < c + window for c in changes[1:])

    change_gaps: list[float] = []
    steady_gaps: list[float] = []
    for times in by_queue.values():
        times.sort()
        gaps = [(b, b - a) for a, b in itertools.pairwise(times) if a >= first_change + window]
        for c in changes[1:]:
            during = [g for t, g in gaps if c <= t < c + window]
            if during:
                change_gaps.append(max(during))
        steady = [g for t, g in gaps if not in_change(t) and t < end - 0.5]
        if steady:
            steady_gaps.append(max(steady))
    lat_change = [lat for _, _, t, lat in rec.deliveries if in_change(t)]
    lat_steady = [lat for _, _, t, lat in rec.deliveries if not in_change(t) and t >= first_change + window]
    return {
        "sent": len(sent),
        "duplicates": duplicates,
        "lost": lost,
        "pause_ms_max": _ms(max(change_gaps, default=0.0)),
        "pause_ms_median": _ms(statistics.median(change_gaps) if change_gaps else 0.0),
        "steady_pause_ms_max": _ms(max(steady_gaps, default=0.0)),
        "change_p99_ms": round(_p99(lat_change), 1),
        "steady_p99_ms": round(_p99(lat_steady), 1),
    }


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * 0.99))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=("push", "litepull"), default="push")
    ap.add_argument("--rate", type=float, default=400.0, help="messages/s sent")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--listener-ms", type=float, default=20.0, help="work per message, ms")
    ap.add_argument("--threads", type=int, default=20, help="consume threads per push member")
    ap.add_argument("--dwell", type=float, default=2.0, help="seconds between membership changes")
    ap.add_argument("--window", type=float, default=1.5, help="seconds after a change counted as 'change'")
    ap.add_argument("--steps", nargs="+", default=list(DEFAULT_STEPS))
    ap.add_argument("--modes", nargs="+", choices=("tidemq", "rocketmq"), default=["tidemq", "rocketmq"])
    args = ap.parse_args()
    out: dict[str, Any] = {"bench": "rebalance", "kind": args.kind, "rate": args.rate, "queues": args.queues}
    out["listener_ms"], out["steps"], out["dwell_s"] = args.listener_ms, args.steps, args.dwell
    with tempfile.TemporaryDirectory() as tmp, ServeProcess(Path(tmp) / "store") as proc:
        # A throwaway run first, so that neither mode pays for a cold process (imports, first
        # threads and connections): measured, the first mode's p99 was several times the second's.
        warm = Scenario(kind=args.kind, rate=args.rate, steps=("+W",), dwell=1.5)
        asyncio.run(run_scenario(proc.namesrv_addr, "RebalWarm", "rebal-warm", warm))
        for i, mode in enumerate(args.modes):
            sc = Scenario(
                kind=args.kind,
                queues=args.queues,
                rate=args.rate,
                listener_ms=args.listener_ms,
                threads=args.threads,
                steps=tuple(args.steps),
                dwell=args.dwell,
                window=args.window,
                clean_handoff=mode == "tidemq",
            )
            t0 = time.monotonic()
            res = asyncio.run(run_scenario(proc.namesrv_addr, f"Rebal{i}", f"rebal-{mode}-{i}", sc))
            out[mode] = res
            print(f"{mode:9s} {json.dumps(res)}  ({time.monotonic() - t0:.0f}s)", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
