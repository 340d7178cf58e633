"""Scheduled (delayed) messages through a real broker: invisible before the delay, visible after,
also across a broker restart, and delivered exactly once per message across the restart."""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from tests.helpers import wait_for
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.message import Message, MessageExt
from tidemq.protocol.message_codec import decode_messages
from tidemq.testing import Cluster, run_cluster

DELAYS = "1s 3s 10s"  # level 2 = 3 s


def visible(cluster: Cluster, topic: str) -> list[MessageExt]:
    """What a consumer of ``topic`` can read now (every queue, from offset 0)."""
    store = cluster.broker.store
    out: list[MessageExt] = []
    for qid in store.consume_queues.topics_and_queues().get(topic, []):
        result = store.get_message("t", topic, qid, 0, 32, None)
        out += [m for buf in result.message_buffers for m in decode_messages(buf)]
    return out


async def send_delayed(cluster: Cluster, topic: str, body: bytes, level: int = 2) -> tuple[str, float]:
    producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg-delay")
    await producer.start()
    try:
        msg = Message(topic, body, tags="D")
        msg.delay_time_level = level
        result = await producer.send(msg)
        return result.msg_id, time.time()
    finally:
        await producer.shutdown()


async def test_delay_level_2_is_invisible_before_and_visible_after(tmp_path: Path) -> None:
    async with run_cluster(tmp_path, message_delay_level=DELAYS) as cluster:
        await send_delayed(cluster, "DelayTopic", b"warm", level=1)  # creates the topic
        await wait_for(lambda: len(visible(cluster, "DelayTopic")) == 1, 10, "the warm-up message")
        msg_id, sent_at = await send_delayed(cluster, "DelayTopic", b"later")
        assert [m.body for m in visible(cluster, "DelayTopic")] == [b"warm"]  # stored, not readable
        # polled every 10 ms from the send on: the first moment it is readable is >= its 3 s delay
        await wait_for(lambda: len(visible(cluster, "DelayTopic")) == 2, 10, "the delayed message")
        elapsed = time.time() - sent_at
        (m,) = [m for m in visible(cluster, "DelayTopic") if m.body == b"later"]
        assert m.msg_id == msg_id and m.tags == "D"
        assert "DELAY" not in m.properties
        assert 2.9 <= elapsed < 6, elapsed
        born_to_store = m.store_timestamp - m.born_timestamp
        assert born_to_store >= 2900, born_to_store


async def test_delay_survives_a_broker_restart(tmp_path: Path) -> None:
    async with run_cluster(tmp_path, message_delay_level=DELAYS) as cluster:
        await send_delayed(cluster, "DelayRestart", b"warm", level=1)
        await wait_for(lambda: len(visible(cluster, "DelayRestart")) == 1, 10, "the warm-up message")
        _, sent_at = await send_delayed(cluster, "DelayRestart", b"across")
        await cluster.restart_broker()
        assert time.time() - sent_at < 2.5, "restart too slow for this test"
        assert [m.body for m in visible(cluster, "DelayRestart")] == [b"warm"]
        await wait_for(lambda: len(visible(cluster, "DelayRestart")) == 2, 10, "the delayed message")
        assert time.time() - sent_at >= 2.9
        saved = orjson.loads((tmp_path / "store" / "config" / "delayOffset.json").read_bytes())
        assert saved["offsetTable"]["1"] == 1  # the warm-up's delivery was persisted at shutdown

        # a second restart after delivery neither loses nor repeats anything
        await cluster.restart_broker()
        s = cluster.broker.schedule_message_service
        assert s is not None and s.offset_table.get(2) == 1
        await send_delayed(cluster, "DelayRestart", b"probe", level=1)
        await wait_for(lambda: len(visible(cluster, "DelayRestart")) == 3, 10, "the probe")
        assert sorted(m.body for m in visible(cluster, "DelayRestart")) == [b"across", b"probe", b"warm"]
