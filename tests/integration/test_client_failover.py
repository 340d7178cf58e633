"""Producers route around a dead broker group (two groups, real brokers, real sockets).

broker-a and broker-b are both masters registered with one name server; broker-a is shut down
while the producer still holds a route listing it. Every send must still be SEND_OK (on
broker-b) after at most one failed attempt, with and without latency fault tolerance, for the
asyncio producer and for the blocking producer's direct (caller-thread) path.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_until
from tidemq.broker.broker import Broker
from tidemq.client.producer.producer import AsyncProducer, Producer, SendAttempts
from tidemq.protocol.message import Message, MessageQueue, SendResult
from tidemq.testing import Cluster, make_broker_configs, run_cluster

TOPIC = "FailoverT"


@pytest.fixture
def failed_attempts(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """Failed attempts per send (keyed by the SendAttempts object's id)."""
    counts: Counter[int] = Counter()
    real = SendAttempts.failed

    def spy(self: SendAttempts, exc: Exception, mq: Any) -> bool:
        counts[id(self)] += 1
        return real(self, exc, mq)

    monkeypatch.setattr(SendAttempts, "failed", spy)
    return counts


async def start_broker_b(cluster: Cluster, tmp_path: Path) -> Broker:
    bc, sc = make_broker_configs(tmp_path / "store-b", cluster.namesrv_addr, broker_name="broker-b")
    broker = Broker(bc, sc)
    await broker.start()
    return broker


async def route_has_both_groups(producer: AsyncProducer) -> None:
    async def both() -> bool:
        await producer.instance.update_topic_route_info_from_name_server(TOPIC)
        queues = await producer.fetch_publish_message_queues(TOPIC)
        return {mq.broker_name for mq in queues} == {"broker-a", "broker-b"}

    await wait_until(both, 10.0, "the route to list both broker groups", interval=0.05)


@pytest.mark.parametrize("fault_enable", [False, True])
async def test_async_producer_routes_around_a_dead_broker(
    tmp_path: Path, failed_attempts: Counter[int], fault_enable: bool
) -> None:
    async with run_cluster(tmp_path) as cluster:
        broker_b = await start_broker_b(cluster, tmp_path)
        producer = AsyncProducer(
            namesrv_addr=cluster.namesrv_addr,
            producer_group="fo-p",
            send_latency_fault_enable=fault_enable,
            poll_name_server_interval=3600,
        )
        try:
            await producer.start()
            first = await producer.send(Message(TOPIC, b"create"))  # auto-created through TBW102
            other = "broker-b" if first.message_queue.broker_name == "broker-a" else "broker-a"
            await producer.send(Message(TOPIC, b"create"), queue=MessageQueue(TOPIC, other, 0))
            await route_has_both_groups(producer)
            await cluster.broker.shutdown()  # the producer's route still lists broker-a
            results: list[SendResult] = [await producer.send(Message(TOPIC, f"m{i}")) for i in range(30)]
        finally:
            await producer.shutdown()
            await broker_b.shutdown()
            await cluster.restart_broker()  # run_cluster shuts it down again on exit
    assert {r.send_status for r in results} == {"SEND_OK"}
    assert {r.message_queue.broker_name for r in results} == {"broker-b"}
    assert max(failed_attempts.values(), default=0) <= 1
    if fault_enable:
        assert sum(failed_attempts.values()) == 1  # broker-a avoided after its first failure


async def test_blocking_producer_direct_path_routes_around_a_dead_broker(
    tmp_path: Path, failed_attempts: Counter[int]
) -> None:
    async with run_cluster(tmp_path) as cluster:
        broker_b = await start_broker_b(cluster, tmp_path)
        producer = Producer(
            namesrv_addr=cluster.namesrv_addr,
            producer_group="fo-sync",
            send_latency_fault_enable=True,
            poll_name_server_interval=3600,
        )
        try:
            await asyncio.to_thread(producer.start)
            first = await asyncio.to_thread(producer.send, Message(TOPIC, b"create"))
            other = "broker-b" if first.message_queue.broker_name == "broker-a" else "broker-a"
            mq = MessageQueue(TOPIC, other, 0)
            await asyncio.to_thread(producer.send, Message(TOPIC, b"create"), queue=mq)
            await asyncio.wrap_future(producer._loop.submit(route_has_both_groups(producer._core)))
            await cluster.broker.shutdown()

            def send_all() -> list[SendResult]:
                return [producer.send(Message(TOPIC, f"s{i}")) for i in range(30)]

            results = await asyncio.to_thread(send_all)
        finally:
            await asyncio.to_thread(producer.shutdown)
            await broker_b.shutdown()
            await cluster.restart_broker()
    assert {r.message_queue.broker_name for r in results} == {"broker-b"}
    assert sum(failed_attempts.values()) == 1  # one refused connect, then broker-a is avoided
