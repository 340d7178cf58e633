"""SIGKILL a ``tidemq serve`` with popped, un-acked messages (normal and FIFO pops): after the
restart each un-acked one is delivered again once its invisible time has passed, none is lost, and
no acked one comes back -- although the consumer offsets file is never written before the kill."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tidemq.client import AsyncProducer, AsyncSimpleConsumer
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.testing import ServeProcess

INVISIBLE_S = 3.0


async def _receive(c: AsyncSimpleConsumer, until_n: int, timeout: float) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout
    while len(got) < until_n and time.monotonic() < deadline:
        got.extend(await c.receive(32, INVISIBLE_S))
    return got


def _consumer(ns: str, group: str, topic: str, name: str, fifo: bool = False) -> AsyncSimpleConsumer:
    return AsyncSimpleConsumer(
        namesrv_addr=ns,
        consumer_group=group,
        subscriptions={topic: "*"},
        await_duration=0.5,
        instance_name=name,
        fifo=fifo,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )


def _first_queue(mqs: list[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    return sorted(mqs, key=lambda mq: mq.queue_id)[0]


async def _before_kill(ns: str) -> tuple[set[bytes], set[bytes], float]:
    """Pop 40 normal and 4 FIFO messages, ack half of each; the un-acked and acked bodies."""
    producer = AsyncProducer(namesrv_addr=ns, producer_group="crash-pg")
    await producer.start()
    for i in range(40):
        await producer.send(Message("PopCrash", f"n{i}".encode()))
    for i in range(4):
        await producer.send(Message("PopCrashFifo", f"f{i}".encode()), selector=_first_queue)
    await producer.shutdown()
    popped: list[MessageExt] = []
    acked: set[bytes] = set()
    for topic, n, fifo in (("PopCrash", 40, False), ("PopCrashFifo", 4, True)):
        c = _consumer(ns, "crash-g", topic, f"k1{fifo}", fifo)
        await c.start()
        got = await _receive(c, n, 15)
        assert len(got) == n
        if fifo:
            assert [m.body for m in got] == [b"f0", b"f1", b"f2", b"f3"]
        for m in got[1::2]:
            await c.ack(m)
            acked.add(m.body)
        popped += got
        await c.shutdown()
    return {m.body for m in popped} - acked, acked, time.monotonic()


def test_pop_survives_sigkill(tmp_path: Path) -> None:
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerName=broker-a\nflushConsumerOffsetInterval=600000\nmappedFileSizeCommitLog=4194304\n"
        "mappedFileSizeConsumeQueue=24000\n"  # a restart after a crash re-checks every entry
    )
    proc = ServeProcess(store, extra_args=["-c", str(conf)]).start()
    try:
        unacked, acked, popped_at = asyncio.run(_before_kill(proc.namesrv_addr))
        assert proc.kill() != 0
        proc = ServeProcess(store, extra_args=["-c", str(conf)]).start()

        async def after() -> list[MessageExt]:
            got: list[MessageExt] = []
            for topic, fifo in (("PopCrash", False), ("PopCrashFifo", True)):
                c = _consumer(proc.namesrv_addr, "crash-g", topic, f"k2{fifo}", fifo)
                await c.start()
                try:
                    early = await c.receive(32, INVISIBLE_S)
                    if time.monotonic() < popped_at + INVISIBLE_S - 1.0:  # still inside the window
                        assert early == [], "redelivered before its invisible time"
                    want = len([b for b in unacked if b.startswith(b"f" if fifo else b"n")])
                    mine = early + await _receive(c, want - len(early), 20)
                    for m in mine:
                        await c.ack(m)
                    mine += await c.receive(32, INVISIBLE_S)  # nothing more: acked ones stay acked
                    got += mine
                finally:
                    await c.shutdown()
            return got

        got = asyncio.run(after())
        bodies = [m.body for m in got]
        assert sorted(bodies) == sorted(unacked), f"lost or duplicated: {sorted(bodies)}"
        assert not set(bodies) & acked
        assert all(m.reconsume_times == 1 for m in got)
        assert [b for b in bodies if b.startswith(b"f")] == [b"f0", b"f2"]  # FIFO: in order
    finally:
        proc.stop()
