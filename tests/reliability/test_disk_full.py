"""Disk space never costs an acknowledged message (issue 24), on a real small file system.

Each test mounts a size-limited tmpfs (root only: CI runs as root; skipped with the reason
otherwise) and fills it with acknowledged sends or a ballast file. Segments are small, so the fills
take a few hundred sends. The long form (a bigger fill, a 60 s full-disk period with delayed
messages) is ``python -m bench.disk_full``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.disk_full import df_percent, fill_to, readable
from tests.helpers import wait_for
from tidemq.admin.client import AsyncAdminClient
from tidemq.broker.processor.admin_runtime import BrokerRuntimeProcessor
from tidemq.client.producer.producer import AsyncProducer
from tidemq.errors import BrokerError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.message import Message
from tidemq.protocol.message_codec import decode_messages
from tidemq.store.disk import disk_usage
from tidemq.testing import Cluster, run_cluster

FS_MIB = 24
BODY = random.Random(24).randbytes(32 * 1024)  # incompressible: the producer compresses > 4 KiB
SMALL_STORE: dict[str, Any] = {
    "mapped_file_size_commit_log": 512 * 1024,
    "mapped_file_size_consume_queue": 20 * 1000,
    "message_index_enable": False,
    "max_message_size": 128 * 1024,  # the guard also keeps one largest message free
    "message_delay_level": "1s 2s",
}


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A ``FS_MIB`` MiB tmpfs at ``tmp_path/fs``, unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root (CI runs as root)")
    where = tmp_path / "fs"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_MIB}m", "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


async def fill_with_sends(
    producer: AsyncProducer, topic: str, limit: int = 2000
) -> tuple[list[bytes], BrokerError]:
    """Send until the broker refuses; the acknowledged bodies and the refusal."""
    acked: list[bytes] = []
    for i in range(limit):
        body = b"%06d" % i + BODY
        try:
            await producer.send(Message(topic, body))
        except BrokerError as exc:
            return acked, exc
        acked.append(body)
    raise AssertionError(f"{limit} sends and the disk is still not full")


def test_disk_ratio_is_dfs_on_this_machines_disk(tmp_path: Path) -> None:
    assert abs(disk_usage(tmp_path).percent - df_percent(tmp_path)) <= 1


def test_disk_ratio_is_dfs_on_a_small_fs(small_fs: Path) -> None:
    for percent in (0, 40, 93):
        fill_to(small_fs, percent)
        assert abs(disk_usage(small_fs).percent - df_percent(small_fs)) <= 1, percent


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_full_disk_refuses_sends_keeps_reads_and_loses_nothing(
    small_fs: Path, flush: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with run_cluster(small_fs, flush_disk_type=flush, **SMALL_STORE) as cluster:
        fill_to(small_fs, 80)
        producer = AsyncProducer(
            namesrv_addr=cluster.namesrv_addr, producer_group="pg", retry_times_when_send_failed=0
        )
        await producer.start()
        try:
            acked, refusal = await fill_with_sends(producer, "Full")
            assert refusal.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "disk is full [CL: " in refusal.remark and "disk full" in refusal.remark
            assert len(acked) > 20
            runtime = BrokerRuntimeProcessor(cluster.broker).runtime_info()
            assert abs(float(runtime["commitLogDiskRatio"]) * 100 - df_percent(small_fs)) <= 1
            assert float(runtime["commitLogDiskRatio"]) > 0.9
            allocator = cluster.broker.store.commit_log.queue.allocator
            if flush == "SYNC_FLUSH":  # near the limit the next segment was not warmed (no room)
                assert allocator is not None and allocator.skipped > 0
            # reads and offset commits go on, over the wire too
            assert sorted(readable(cluster, "Full")) == acked
            await pull_and_commit(cluster, "Full", 3)
            cluster.broker.consumer_offset_manager.persist()
            # nothing acknowledged is lost across a restart on the full disk, and it stays full
            await cluster.restart_broker()
            assert sorted(readable(cluster, "Full")) == acked
            assert cluster.broker.consumer_offset_manager.query_offset("g", "Full", 0) == 3
            with pytest.raises(BrokerError) as again:
                await producer.send(Message("Full", b"still full"))
            assert again.value.code == ResponseCode.SERVICE_NOT_AVAILABLE
            # space freed: accepted again within the guard's check interval
            (small_fs / "ballast").unlink()
            await wait_for_send(producer, "Full", b"after")
            assert sorted(readable(cluster, "Full")) == [*acked, b"after"]
        finally:
            await producer.shutdown()
    states = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith(("disk full", "disk writable"))
    ]
    assert [s.split(":")[0] for s in states] == ["disk full", "disk full", "disk writable again"], states
    assert not any(r.exc_info for r in caplog.records)  # an expected full disk: no traceback anywhere


async def pull_and_commit(cluster: Cluster, topic: str, offset: int) -> None:
    """PULL_MESSAGE queue 0 from 0 (SUCCESS) and UPDATE_CONSUMER_OFFSET of group g to ``offset``."""
    from tests.integration.conftest import Wire
    from tidemq.protocol.headers import UpdateConsumerOffsetRequestHeader
    from tidemq.remoting import RemotingClient

    client = RemotingClient()
    try:
        wire = Wire(client, cluster)
        pulled = await wire.pull(topic, 0, group="g")
        assert pulled.code == ResponseCode.SUCCESS and decode_messages(pulled.body)
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group="g", topic=topic, queue_id=0, commit_offset=offset
        )
        committed = await wire.invoke(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())
        assert committed.code == ResponseCode.SUCCESS
    finally:
        await client.close()


async def wait_for_send(producer: AsyncProducer, topic: str, body: bytes, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            await producer.send(Message(topic, body))
            return
        except BrokerError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.05)


def segments(fs: Path) -> list[str]:
    return sorted(p.name for p in (fs / "store" / "commitlog").iterdir() if not p.name.endswith(".tmp"))


async def test_unconsumed_backlog_survives_a_full_disk_until_the_operator_forces(
    small_fs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    # file_reserved_time=0: every segment has expired; only the consumers' progress keeps them
    async with run_cluster(small_fs, file_reserved_time=0, **SMALL_STORE) as cluster:
        broker = cluster.broker
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg")
        await producer.start()
        try:
            acked = [b"%06d" % i + BODY for i in range(40)]  # about 2.5 segments
            for body in acked:
                await producer.send(Message("Backlog", body))
        finally:
            await producer.shutdown()
        queues = broker.store.consume_queues.topics_and_queues()["Backlog"]
        for qid in queues:  # group g subscribed and has consumed nothing
            broker.consumer_offset_manager.commit_offset("t", "g", "Backlog", qid, 0)
        fill_to(small_fs, 80)  # above diskMaxUsedSpaceRatio (75), below the warning level (90)
        before = segments(small_fs)
        await broker._retention_check()
        assert segments(small_fs) == before and sorted(readable(cluster, "Backlog")) == acked
        # g consumes the first half of every queue: only segments wholly consumed go
        half = {q: broker.store.get_max_offset_in_queue("Backlog", q) // 2 for q in queues}
        for qid, offset in half.items():
            broker.consumer_offset_manager.commit_offset("t", "g", "Backlog", qid, offset)
        await broker._retention_check()
        left = segments(small_fs)
        assert len(left) < len(before)
        for qid, offset in half.items():  # what g has not consumed is all there
            assert broker.store.get_min_offset_in_queue("Backlog", qid) <= offset
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        # the operator forces once (expired segments go whoever has not consumed them), reported
        async with AsyncAdminClient(cluster.namesrv_addr) as admin:
            await admin.delete_expired_commitlog(cluster.broker_addr, force=True)
        assert len(segments(small_fs)) == 1  # all but the one being written
        (error,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert "not yet consumed (tidemq admin deleteExpiredCommitLog --force)" in error
        assert "Backlog queue" in error and "offsets" in error and "consumers g" in error
        lost = broker.store.retention.unconsumed_deleted
        assert lost > 0
        from tidemq.broker.metrics import BrokerCollector

        (family,) = [
            m for m in BrokerCollector(broker).collect() if m.name == "tidemq_unconsumed_messages_deleted"
        ]
        assert family.samples[0].value == lost


async def test_delayed_messages_due_on_a_full_disk_wait_across_a_restart(small_fs: Path) -> None:
    # bench.disk_full holds them through a 60 s full-disk period; here the period is a few seconds
    async with run_cluster(small_fs, **SMALL_STORE) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg")
        await producer.start()
        try:
            for i in range(3):
                msg = Message("Later", b"delayed %d" % i)
                msg.delay_time_level = 1  # 1 s
                await producer.send(msg)
        finally:
            await producer.shutdown()
        fill_to(small_fs, 95)  # full before they come due

        def waits() -> int:
            service = cluster.broker.schedule_message_service
            return service.disk_full_waits if service is not None else 0

        await wait_for(lambda: waits() > 0, 10, "a due message refused for the full disk")
        assert readable(cluster, "Later") == []
        await cluster.restart_broker()  # still full: they wait, nothing is skipped
        await wait_for(lambda: waits() > 0, 10, "the due messages waiting again after the restart")
        assert readable(cluster, "Later") == []
        (small_fs / "ballast").unlink()
        await wait_for(lambda: len(readable(cluster, "Later")) == 3, 10, "the delayed messages")
        await cluster.restart_broker()
        assert sorted(readable(cluster, "Later")) == [b"delayed 0", b"delayed 1", b"delayed 2"]


async def test_a_retry_sent_back_on_a_full_disk_is_refused_then_taken(small_fs: Path) -> None:
    from tests.integration.conftest import Wire
    from tidemq.protocol.command import RemotingCommand
    from tidemq.protocol.headers import ConsumerSendMsgBackRequestHeader
    from tidemq.protocol.message_codec import decode_offset_msg_id
    from tidemq.remoting import RemotingClient

    async with run_cluster(small_fs, **SMALL_STORE) as cluster:
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            sent = await wire.send("Retried", b"failed once")
            offset = decode_offset_msg_id(sent.ext_fields["msgId"])[1]
            header = ConsumerSendMsgBackRequestHeader(offset=offset, group="G", delay_level=0)

            async def send_back() -> RemotingCommand:
                request = RemotingCommand.create_request(
                    RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields()
                )
                return await client.invoke(wire.addr, request, 5.0)

            fill_to(small_fs, 95)
            cluster.broker.store.disk_guard.check()  # now rather than within its 100 ms
            refused = await send_back()  # the consumer keeps the message and consumes it again later
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and "disk full" in (
                refused.remark or ""
            )
            (small_fs / "ballast").unlink()
            cluster.broker.store.disk_guard.check()
            assert (await send_back()).code == ResponseCode.SUCCESS
            await wait_for(lambda: readable(cluster, "%RETRY%G") == [b"failed once"], 10, "the retry copy")
        finally:
            await client.close()
