"""Replication in one process (real sockets, real files): the HA wire format, byte-for-byte copies
across segment boundaries, SYNC_MASTER's statuses, a slave's metadata copy and its refusals."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from tests.helpers import wait_for
from tidemq.broker.broker import Broker
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import PullMessageRequestHeader, PullSysFlag, SendMessageRequestHeader
from tidemq.protocol.message import Message
from tidemq.remoting import RemotingClient
from tidemq.store.ha.wire import HEADER, REPORT
from tidemq.testing import Cluster, make_broker_configs, run_cluster

TOPIC = "HaInProcT"
SEGMENT = 64 * 1024


@contextlib.asynccontextmanager
async def slave_of(cluster: Cluster, tmp_path: Path, **overrides: object) -> AsyncIterator[Broker]:
    """A SLAVE (brokerId 1) of ``broker-a`` that finds its master through the name server."""
    bc, sc = make_broker_configs(
        tmp_path / "slave", cluster.namesrv_addr, broker_id=1, broker_role="SLAVE", **overrides
    )
    slave = Broker(bc, sc)
    await slave.start()
    try:
        yield slave
    finally:
        await slave.shutdown()


@contextlib.asynccontextmanager
async def producer_for(cluster: Cluster) -> AsyncIterator[AsyncProducer]:
    producer = AsyncProducer(
        namesrv_addr=cluster.namesrv_addr, producer_group="ha-inproc", send_msg_timeout=5.0
    )
    await producer.start()
    try:
        yield producer
    finally:
        await producer.shutdown()


async def pull(addr: str, queue_id: int, offset: int) -> RemotingCommand:
    """One PULL_MESSAGE (no suspend, no commit) as a RocketMQ client sends it."""
    header = PullMessageRequestHeader(
        consumer_group="ha-group",
        topic=TOPIC,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=PullSysFlag.build_sys_flag(False, False, True, False),
        commit_offset=0,
        suspend_timeout_millis=0,
        subscription="*",
        sub_version=0,
        expression_type="TAG",
    )
    client = RemotingClient()
    try:
        request = RemotingCommand.create_request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        return await client.invoke(addr, request, 5.0)
    finally:
        await client.close()


def segment_bytes(broker: Broker) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(Path(broker.store_config.commit_log_dir).iterdir())}


async def test_slave_holds_the_masters_log_byte_for_byte_across_segments(tmp_path: Path) -> None:
    async with (
        run_cluster(tmp_path, mapped_file_size_commit_log=SEGMENT) as cluster,
        slave_of(cluster, tmp_path, mapped_file_size_commit_log=SEGMENT) as slave,
    ):
        master = cluster.broker
        async with producer_for(cluster) as producer:
            for i in range(300):  # ~330 KiB: five segments, each ending in a blank filler
                await producer.send(Message(TOPIC, (f"m-{i}-" + "x" * 1000).encode()))
        await wait_for(
            lambda: slave.store.get_max_phy_offset() == master.store.get_max_phy_offset(),
            30,
            "slave caught up",
        )
        assert len(segment_bytes(master)) >= 5
        assert segment_bytes(slave) == segment_bytes(master)
        queues = master.store.consume_queues.topics_and_queues()[TOPIC]
        assert slave.store.consume_queues.topics_and_queues()[TOPIC] == queues
        for q in queues:  # its own consume queues, built from the replicated records
            n = master.store.get_max_offset_in_queue(TOPIC, q)
            assert slave.store.get_max_offset_in_queue(TOPIC, q) == n
            mine = slave.store.get_message("g", TOPIC, q, 0, 32, None).message_buffers
            assert mine == master.store.get_message("g", TOPIC, q, 0, 32, None).message_buffers

        # SlaveSynchronize copies topics and committed offsets from the master
        master.consumer_offset_manager.commit_offset("test", "ha-group", TOPIC, 0, 7)
        assert slave.ha is not None and slave.ha.slave_synchronize is not None
        assert await slave.ha.slave_synchronize.sync_all()
        assert slave.topic_config_manager.select_topic_config(TOPIC) is not None
        assert slave.consumer_offset_manager.query_offset("ha-group", TOPIC, 0) == 7

        # a slave never moves a consumer's offset: beyond what it holds it says "retry on the master"
        n = slave.store.get_max_offset_in_queue(TOPIC, 0)
        response = await pull(slave.addr, 0, n + 5)
        assert response.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert response.ext_fields["nextBeginOffset"] == str(n + 5)
        assert response.ext_fields["suggestWhichBrokerId"] == "0"
        assert (await pull(master.addr, 0, n + 5)).code == ResponseCode.PULL_OFFSET_MOVED


async def test_sync_master_statuses_over_the_ha_wire(tmp_path: Path) -> None:
    async with run_cluster(tmp_path, broker_role="SYNC_MASTER", sync_flush_timeout=500) as cluster:
        master = cluster.broker
        assert master.ha is not None and master.ha.service is not None
        async with producer_for(cluster) as producer:
            # no slave at all: stored, answered SLAVE_NOT_AVAILABLE
            result = await producer.send(Message(TOPIC, b"alone"))
            assert result.send_status == "SLAVE_NOT_AVAILABLE"

            # a hand-written slave: 8-byte offset reports in, 12-byte header + log bytes out
            reader, writer = await asyncio.open_connection("127.0.0.1", master.ha.service.port)
            try:
                start = master.store.get_max_phy_offset()
                writer.write(REPORT.pack(start))
                await writer.drain()
                await wait_for(lambda: master.ha.service.connection_count == 1, 10, "HA connection")  # type: ignore[union-attr]

                # it never acknowledges: FLUSH_SLAVE_TIMEOUT after syncFlushTimeout (the message is stored)
                send = asyncio.create_task(producer.send(Message(TOPIC, b"unacked")))
                offset, size = HEADER.unpack(await asyncio.wait_for(reader.readexactly(12), 10))
                assert offset == start and size > 0
                data = await reader.readexactly(size)
                assert data == master.store.commit_log.get_message(start, size)
                assert (await send).send_status == "FLUSH_SLAVE_TIMEOUT"

                # it acknowledges what it received: SEND_OK
                writer.write(REPORT.pack(offset + size))
                send = asyncio.create_task(producer.send(Message(TOPIC, b"acked")))
                offset2, size2 = HEADER.unpack(await asyncio.wait_for(reader.readexactly(12), 10))
                assert offset2 == offset + size
                await reader.readexactly(size2)
                writer.write(REPORT.pack(offset2 + size2))
                await writer.drain()
                assert (await send).send_status == "SEND_OK"
            finally:
                writer.close()


async def test_slave_refuses_sends_with_no_permission(tmp_path: Path) -> None:
    async with run_cluster(tmp_path) as cluster, slave_of(cluster, tmp_path) as slave:
        header = SendMessageRequestHeader(
            producer_group="p",
            topic=TOPIC,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=0,
            sys_flag=0,
            born_timestamp=0,
            flag=0,
            properties=None,
        )
        client = RemotingClient()
        try:
            request = RemotingCommand.create_request(RequestCode.SEND_MESSAGE, header.to_ext_fields(), b"x")
            response = await client.invoke(slave.addr, request, 5.0)
        finally:
            await client.close()
        assert response.code == ResponseCode.NO_PERMISSION
        assert "slave" in (response.remark or "") or "forbidden" in (response.remark or "")
        assert slave.store.get_max_phy_offset() == 0
