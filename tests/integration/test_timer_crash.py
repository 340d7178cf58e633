"""SIGKILL of ``tidemq serve`` while timer messages are pending: after the restart none is lost, the
overdue ones come at once, none that was delivered before the kill comes again, and none that was
recalled (RECALL_MESSAGE) before the kill comes at all."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

from tests.integration.test_broker_crash import QUEUES, read_queue
from tidemq.client import Producer
from tidemq.protocol.message import Message
from tidemq.remoting import RemotingClient
from tidemq.testing import ServeProcess

TOPIC = "TimerCrash"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def bodies(addr: str) -> Counter[bytes]:
    client = RemotingClient()
    try:
        got: Counter[bytes] = Counter()
        for qid in range(QUEUES):
            got.update((await read_queue(client, addr, TOPIC, qid)).values())
        return got
    finally:
        await client.close()


def test_sigkill_with_timers_pending_loses_none(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = ServeProcess(store).start()
    producer = Producer(namesrv_addr=proc.namesrv_addr, producer_group="pg-timer-crash")
    producer.start()
    t0 = now_ms()
    plan = {b"early-%d" % i: t0 + 1000 for i in range(5)}  # delivered before the kill
    plan |= {b"overdue-%d" % i: t0 + 2500 + 50 * i for i in range(5)}  # due while the broker is down
    plan |= {b"later-%d" % i: t0 + 6000 + 100 * i for i in range(5)}  # due after the restart
    handles: dict[bytes, str | None] = {}
    try:
        producer.send(Message(TOPIC, b"warm"))
        for body, due in plan.items():
            handles[body] = producer.send(Message(TOPIC, body, delivery_time_ms=due)).recall_handle
        for body in (b"overdue-0", b"later-0"):  # recalled: must not come, also after the SIGKILL
            producer.recall_message(TOPIC, handles[body] or "")
            del plan[body]
    finally:
        producer.shutdown()

    async def until(addr: str, want: set[bytes], timeout: float) -> Counter[bytes]:
        got: Counter[bytes] = Counter()

        async def check() -> bool:
            got.clear()
            got.update(await bodies(addr))
            return want <= set(got)

        deadline = time.monotonic() + timeout
        while not await check():
            assert time.monotonic() < deadline, f"missing {sorted(want - set(got))}"
            await asyncio.sleep(0.05)
        return got

    early = {b for b in plan if b.startswith(b"early")}
    before = asyncio.run(until(proc.broker_addr, early, 10))
    checked = now_ms()
    assert all(plan.get(b, 0) <= checked for b in before)  # nothing comes early
    proc.kill()
    assert (store / "abort").exists()
    wait_for_overdue = plan[b"overdue-4"] - now_ms()
    if wait_for_overdue > 0:
        time.sleep(wait_for_overdue / 1000)  # the broker is dead: its timers come due meanwhile
    proc2 = ServeProcess(store).start()
    try:
        overdue = {b for b in plan if b.startswith(b"overdue")}
        restarted = now_ms()
        asyncio.run(until(proc2.broker_addr, overdue, 10))
        assert now_ms() - restarted < 5000  # at once (100 ms slots; slack for a busy machine)
        got = asyncio.run(until(proc2.broker_addr, set(plan), 15))
        assert now_ms() >= plan[b"later-4"]
        assert got == Counter(set(plan) | {b"warm"}), "a timer was lost or delivered twice"
    finally:
        assert proc2.stop() == 0
