"""Consumers keep reading from a slave when the master of a broker group goes away (real brokers).

The group broker-a has a master (id 0, registered with the name server) and a second real broker
standing in for its slave (id 1) with the same queue contents (written to both here, so the test
does not depend on replication, and listed in the client's broker table as the name server would
list a slave). The master is shut down while a lite pull consumer is half way: the consumer must
continue from the slave (connect refused -> the other node of the group) with no message lost or
repeated; once the route lists only the slave, offsets are committed to and read from it
(findBrokerAddressInAdmin).
"""

from __future__ import annotations

import time
from pathlib import Path

from tidemq.broker.broker import Broker
from tidemq.client.consumer.pull import AsyncPullConsumer
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.body import TopicRouteData
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.testing import make_broker_configs, run_cluster

TOPIC = "HaT"
MQ = MessageQueue(TOPIC, "broker-a", 0)


async def write_to(producer: AsyncProducer, addrs: list[str], first: int, n: int) -> None:
    """Messages m<first>.. m<first+n-1> into queue 0 of each node in ``addrs`` (what replication
    would do), at offsets ``first``.. on each."""
    api = producer.instance.api
    producer.instance.broker_addr_table.setdefault("broker-a", {0: addrs[0]})
    for i in range(first, first + n):
        msg = Message(TOPIC, f"m{i}".encode())
        body, sys_flag, uniq = producer.encoder.prepare(msg)
        header = producer.encoder.build_header(msg, MQ, sys_flag, batch=False)
        for addr in addrs:
            result = await api.send_message(addr, "broker-a", header, body, 3.0, uniq_id=uniq)
            assert result.queue_offset == i


async def poll_n(consumer: AsyncPullConsumer, n: int, timeout: float) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += await consumer.poll(0.2)
    return got


async def test_lite_consumer_continues_from_the_slave(tmp_path: Path) -> None:
    async with run_cluster(tmp_path) as cluster:
        bc, sc = make_broker_configs(tmp_path / "slave", None, broker_name="broker-a")
        slave = Broker(bc, sc)
        await slave.start()
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="ha-p")
        consumer = AsyncPullConsumer(
            namesrv_addr=cluster.namesrv_addr,
            consumer_group="ha-c",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            auto_commit=False,
            pull_batch_size=5,
            poll_name_server_interval=0.5,
            pull_time_delay_when_exception=0.2,
        )
        try:
            await producer.start()
            await write_to(producer, [cluster.broker_addr, slave.addr], 0, 10)  # auto-creates the topic
            await consumer.assign([MQ])
            await consumer.start()
            inst = consumer.instance
            real_remember = inst.remember_brokers
            listed = {0: cluster.broker_addr, 1: slave.addr}  # the group as a name server lists it

            def remember(route: TopicRouteData) -> None:
                real_remember(route)
                inst.broker_addr_table["broker-a"] = dict(listed)

            inst.remember_brokers = remember  # type: ignore[method-assign]
            inst.broker_addr_table["broker-a"] = dict(listed)
            first = await poll_n(consumer, 10, 10)  # two batches of 5
            await consumer.commit_sync()
            assert await consumer.committed(MQ) == 10

            await cluster.broker.shutdown()  # the master is gone; the route still lists it
            await write_to(producer, [slave.addr], 10, 10)  # readable from the slave only
            rest = await poll_n(consumer, 10, 20)
            assert [m.body for m in first + rest] == [
                f"m{i}".encode() for i in range(20)
            ]  # none lost or repeated
            assert {m.broker_name for m in rest} == {"broker-a"}

            del listed[0]  # the name server drops the dead master from the route
            inst.broker_addr_table["broker-a"] = dict(listed)
            await consumer.commit_sync()
            assert await consumer.committed(MQ) == 20  # committed to and read from the slave
        finally:
            await consumer.shutdown()
            await producer.shutdown()
            await slave.shutdown()
            await cluster.restart_broker()  # run_cluster shuts it down on exit
