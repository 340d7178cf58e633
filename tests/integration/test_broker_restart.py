"""Durability across restarts: messages, topics and offsets survive; corrupt offsets are never reset."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidemq.broker.broker import Broker
from tidemq.errors import StoreError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.message_codec import decode_messages
from tidemq.remoting import RemotingClient
from tidemq.testing import ClusterThread, make_broker_configs, run_cluster

from .conftest import Wire


async def committed(wire: Wire, group: str, topic: str, queue_id: int = 0) -> int:
    r = await wire.invoke(
        RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)}
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    return int(r.ext_fields["offset"])


async def test_restart_keeps_messages_topics_and_offsets(tmp_path: Path) -> None:
    """After a clean restart the broker serves the same messages, topic configs and group offsets."""
    async with run_cluster(tmp_path) as cluster:
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            await wire.create_topic("Kept", 3)
            for i in range(10):
                assert (await wire.send("Kept", b"msg-%d" % i, queue_id=i % 3)).code == ResponseCode.SUCCESS
            await wire.invoke(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "KG", "topic": "Kept", "queueId": "1", "commitOffset": "2"},
            )
            await cluster.restart_broker()
            tc = cluster.broker.topic_config_manager.select_topic_config("Kept")
            assert tc is not None and tc.read_queue_nums == 3
            r = await wire.pull("Kept", 0, queue_id=0)
            assert [m.body for m in decode_messages(r.body)] == [b"msg-0", b"msg-3", b"msg-6", b"msg-9"]
            assert await committed(wire, "KG", "Kept", 1) == 2
            r = await wire.send("Kept", b"after", queue_id=0)
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "4"
        finally:
            await client.close()


async def test_clean_shutdown_removes_abort_file(tmp_path: Path) -> None:
    """The abort file exists while running and is gone after shutdown."""
    async with run_cluster(tmp_path):
        assert (tmp_path / "store" / "abort").exists()
    assert not (tmp_path / "store" / "abort").exists()


async def test_corrupt_consumer_offset_file_recovered_from_bak(tmp_path: Path) -> None:
    """A corrupted consumerOffset.json is replaced by its .bak on load; offsets are not reset."""
    async with run_cluster(tmp_path) as cluster:
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            await wire.send("Off", b"x")
            await wire.invoke(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "OG", "topic": "Off", "queueId": "0", "commitOffset": "1"},
            )
            cluster.broker.consumer_offset_manager.persist()
            await cluster.broker.shutdown()  # persists again: consumerOffset.json and .bak both hold it
            path = tmp_path / "store" / "config" / "consumerOffset.json"
            assert Path(str(path) + ".bak").exists()  # noqa: ASYNC240
            path.write_bytes(b'{"offsetTable": {"Off@OG": {0: 1')
            cluster.broker = Broker(cluster.broker.config, cluster.broker.store_config)
            await cluster.broker.start()
            cluster.broker_addr = cluster.broker.addr
            wire = Wire(client, cluster)
            assert await committed(wire, "OG", "Off") == 1
        finally:
            await client.close()


async def test_both_offset_files_corrupt_refuses_to_start(tmp_path: Path) -> None:
    """If consumerOffset.json and its .bak are both corrupt the broker refuses to start (StoreError)."""
    store = tmp_path / "store"
    config_dir = store / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "consumerOffset.json").write_text("garbage{")
    (config_dir / "consumerOffset.json.bak").write_text("also garbage{")
    bc, sc = make_broker_configs(store, None)
    broker = Broker(bc, sc)
    with pytest.raises(StoreError):
        await broker.start()
    assert broker.addr == ""  # never bound nor served


def test_cluster_thread_restart_keeps_data(tmp_path: Path) -> None:
    """ClusterThread (sync use): a message sent before restart() is readable after, at the same address."""
    with ClusterThread(tmp_path) as cluster:

        async def send_and_read(send: bool) -> list[bytes]:
            client = RemotingClient()
            try:
                wire = Wire(client, cluster.cluster)  # type: ignore[arg-type]
                if send:
                    assert (await wire.send("CT", b"persisted")).code == ResponseCode.SUCCESS
                r = await wire.pull("CT", 0)
                return [m.body for m in decode_messages(r.body)]
            finally:
                await client.close()

        addr = cluster.broker_addr
        assert cluster.run(send_and_read(True)) == [b"persisted"]
        cluster.restart()
        assert cluster.broker_addr == addr
        assert cluster.run(send_and_read(False)) == [b"persisted"]
