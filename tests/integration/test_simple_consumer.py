"""tidemq's SimpleConsumer over POP: receive / ack / change invisible duration / redelivery, tag
filters, the blocking facade, and members coming and going under a steady stream (no rebalance: no
message delivered twice while acked in time)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.integration.conftest import Wire
from tests.integration.test_pop import until
from tidemq.broker.broker import Broker
from tidemq.client import AsyncProducer, AsyncSimpleConsumer, Producer, SimpleConsumer
from tidemq.protocol.message import Message
from tidemq.testing import Cluster, ClusterThread, make_broker_configs


async def _receive_until(c: AsyncSimpleConsumer, n: int, invisible_s: float, timeout: float = 10.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"received {len(got)} of {n}"
        got.extend(await c.receive(32, invisible_s))
    return got


async def test_receive_ack_change_and_redelivery(cluster: Cluster, wire: Wire) -> None:
    await wire.create_topic("SimpleT", queues=2)
    producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="spg")
    await producer.start()
    consumer = AsyncSimpleConsumer(
        namesrv_addr=cluster.namesrv_addr,
        consumer_group="scg",
        subscriptions={"SimpleT": "A || B"},
        await_duration=2.0,
        instance_name="s1",
    )
    await consumer.start()
    try:
        for i in range(6):
            await producer.send(Message("SimpleT", f"m{i}".encode(), tags="AB"[i % 2] if i < 4 else "C"))
        msgs = await _receive_until(consumer, 4, 1.0)
        assert sorted(m.body for m in msgs) == [b"m0", b"m1", b"m2", b"m3"]  # tag C filtered out
        assert all(m.topic == "SimpleT" and m.reconsume_times == 0 for m in msgs)
        await consumer.ack(msgs[0])
        await consumer.change_invisible_duration(msgs[1], 60)
        await consumer.ack(msgs[1])  # ack with the new handle is final
        again = await _receive_until(consumer, 2, 30)  # msgs[2], msgs[3] after their 1 s
        assert sorted(m.body for m in again) == sorted(m.body for m in msgs[2:])
        assert all(m.reconsume_times == 1 for m in again)
        await consumer.ack_many(again)  # one BATCH_ACK_MESSAGE
        consumer.config.await_duration = 0.3
        assert await consumer.receive(4, 30) == []  # nothing left, nothing redelivered
    finally:
        await consumer.shutdown()
        await producer.shutdown()


def test_blocking_simple_consumer(tmp_path: Path) -> None:
    with ClusterThread(tmp_path) as cluster:
        producer = Producer(namesrv_addr=cluster.namesrv_addr, producer_group="bpg")
        producer.start()
        consumer = SimpleConsumer(
            namesrv_addr=cluster.namesrv_addr, consumer_group="bcg", await_duration=1.0, instance_name="b1"
        )
        consumer.subscribe("SimpleBlocking")
        try:
            producer.send(Message("SimpleBlocking", b"x"))
            consumer.start()
            got: list = []
            deadline = time.monotonic() + 10
            while not got and time.monotonic() < deadline:
                got = consumer.receive(1, 10)
            assert [m.body for m in got] == [b"x"]
            consumer.change_invisible_duration(got[0], 20)
            consumer.ack(got[0])
        finally:
            consumer.shutdown()
            producer.shutdown()


async def test_members_come_and_go_no_duplicates(cluster: Cluster, wire: Wire) -> None:
    await wire.create_topic("SimpleChurn", queues=4)
    producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="churn-pg")
    await producer.start()
    total = 300
    delivered: list[bytes] = []
    stop = asyncio.Event()

    async def member(name: str, lifetime: float) -> None:
        c = AsyncSimpleConsumer(
            namesrv_addr=cluster.namesrv_addr,
            consumer_group="churn",
            subscriptions={"SimpleChurn": "*"},
            await_duration=0.5,
            instance_name=name,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        )
        await c.start()
        end = time.monotonic() + lifetime
        try:
            while time.monotonic() < end and not stop.is_set():
                for m in await c.receive(8, 30):
                    delivered.append(m.body)
                    await c.ack(m)
        finally:
            await c.shutdown()

    async def produce() -> None:
        for i in range(total):
            await producer.send(Message("SimpleChurn", f"c{i}".encode()))
            if i % 20 == 0:
                await asyncio.sleep(0.01)

    members = [asyncio.create_task(member("a", 30)), asyncio.create_task(member("b", 0.3))]
    prod = asyncio.create_task(produce())
    await asyncio.sleep(0.2)
    members.append(asyncio.create_task(member("c", 0.4)))  # joins, leaves mid-stream
    await prod
    members.append(asyncio.create_task(member("d", 30)))
    await until(lambda: len(delivered) >= total, 15)
    stop.set()
    await asyncio.gather(*members)
    await producer.shutdown()
    assert len(delivered) == total, f"{len(delivered)} deliveries of {total}"
    assert len(set(delivered)) == total  # each exactly once


async def test_two_brokers(cluster: Cluster, wire: Wire, tmp_path: Path) -> None:
    """Every broker of a topic is read; each ack goes to the broker its handle names."""
    bc, sc = make_broker_configs(tmp_path / "store-b", cluster.namesrv_addr, broker_name="broker-b")
    broker_b = Broker(bc, sc)
    await broker_b.start()
    try:
        wire_b = Wire(wire.client, cluster)
        wire_b.cluster = Cluster(cluster.namesrv_addr, broker_b.addr, cluster.namesrv, broker_b)
        for w, name in ((wire, "a"), (wire_b, "b")):
            await w.create_topic("SimpleTwo", queues=2)
            for i in range(3):
                assert (await w.send("SimpleTwo", f"{name}{i}".encode())).code == 0
        c = AsyncSimpleConsumer(
            namesrv_addr=cluster.namesrv_addr,
            consumer_group="two",
            subscriptions={"SimpleTwo": "*"},
            await_duration=0.3,
            instance_name="two",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        )
        await c.start()
        try:
            await until(lambda: len(c._targets()) == 2, 10)
            got = await _receive_until(c, 6, 30)
            assert sorted(m.body for m in got) == [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2"]
            assert {m.broker_name for m in got} == {"broker-a", "broker-b"}
            await c.ack_many(got)
            assert await c.receive(8, 30) == []
        finally:
            await c.shutdown()
        for b in (cluster.broker, broker_b):
            assert b.pop_service.stats.table[("two", "SimpleTwo")].acked == 3
    finally:
        await broker_b.shutdown()


async def test_a_failed_start_can_be_retried() -> None:
    """A start that failed (no name server) left the consumer marked running, so a second start()
    returned at once and the consumer never fetched a route nor heartbeated."""
    from tidemq.errors import TideMQError

    consumer = AsyncSimpleConsumer(namesrv_addr="127.0.0.1:1", consumer_group="G", await_duration=1)
    consumer.subscribe("T")
    for _ in range(2):
        try:
            await consumer.start()
        except TideMQError:
            pass
        else:
            raise AssertionError("start() without a name server succeeded")
    await consumer.shutdown()
