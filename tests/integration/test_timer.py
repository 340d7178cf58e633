"""Timer messages (RocketMQ 5's TIMER_DELIVER_MS & co.) through a real broker and tidemq's client:
invisible before their time, visible within a second after it; refused beyond timerMaxDelaySec."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import Wire
from tests.integration.test_transactions_wire import HALF, end_request
from tidemq.broker.timer_service import runtime_info
from tidemq.client.producer.producer import AsyncProducer
from tidemq.errors import BrokerError
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.message import Message, MessageExt
from tidemq.protocol.message_codec import decode_messages
from tidemq.testing import Cluster, run_cluster

TOPIC = "TimerTopic"


def visible(cluster: Cluster, topic: str = TOPIC) -> list[MessageExt]:
    """What a consumer of ``topic`` can read now (every queue, from offset 0)."""
    store = cluster.broker.store
    out: list[MessageExt] = []
    for qid in store.consume_queues.topics_and_queues().get(topic, []):
        result = store.get_message("t", topic, qid, 0, 32, None)
        out += [m for buf in result.message_buffers for m in decode_messages(buf)]
    return out


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_timer_messages_arrive_after_their_time_within_a_second(tmp_path: Path) -> None:
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg-timer")
        await producer.start()
        try:
            await producer.send(Message(TOPIC, b"warm"))  # creates the topic
            due = now_ms() + 1500
            at = await producer.send(Message(TOPIC, b"at", tags="T", delivery_time_ms=due))
            after = await producer.send(Message(TOPIC, b"after", delay_ms=1200))
            after_due = now_ms() + 1200  # the broker counts from its receipt: no later than this
            past = await producer.send(Message(TOPIC, b"past", delivery_time_ms=now_ms() - 60_000))
            with pytest.raises(BrokerError) as refused:
                await producer.send(Message(TOPIC, b"far", delivery_time_ms=now_ms() + 4 * 86_400_000))
            assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
            assert "max delay 259200000ms" in refused.value.remark
            assert sorted(m.body for m in visible(cluster)) == [b"past", b"warm"]  # at once
            assert "timer log" in cluster.broker.store.retention.offset_providers  # keeps their bodies
            # RocketMQ 5's runtime rows (tidemq admin brokerStatus): two timers pending
            await wait_for(lambda: runtime_info(cluster.broker)["timerCongestNum"] == "2", 5, "2 pending")
            seen: dict[bytes, int] = {}

            def arrived() -> bool:
                for m in visible(cluster):
                    seen.setdefault(m.body, now_ms())
                return len(seen) == 4

            await wait_for(arrived, 10, "both timer messages")
            assert due <= seen[b"at"] <= due + 1000, seen[b"at"] - due
            assert after_due - 100 <= seen[b"after"] <= after_due + 1000, seen[b"after"] - after_due
            (m,) = [m for m in visible(cluster) if m.body == b"at"]
            assert m.msg_id == at.msg_id and m.tags == "T" and m.queue_id == at.message_queue.queue_id
            assert m.properties["TIMER_OUT_MS"] == str(due) and "REAL_TOPIC" not in m.properties
            assert m.store_timestamp >= due
            assert {after.msg_id, past.msg_id} <= {v.msg_id for v in visible(cluster)}
            info = runtime_info(cluster.broker)
            assert (info["timerCongestNum"], info["timerOffsetBehind"], info["timerReadBehind"]) == (
                "0",
                "0",
                "0",
            )
        finally:
            await producer.shutdown()


async def test_a_committed_transactional_timer_message_waits_for_its_time(wire: Wire) -> None:
    """The timer hook runs on the commit's put, as RocketMQ 5's put hook does."""
    props = {**HALF, "TIMER_DELAY_MS": "700"}
    sent = await wire.send("TxTimer", b"later", properties=props, sys_flag=4)
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    r = await wire.client.invoke(wire.addr, end_request("PG", sent, 8), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    committed = now_ms()
    assert visible(wire.cluster, "TxTimer") == []
    await wait_for(lambda: len(visible(wire.cluster, "TxTimer")) == 1, 10, "the committed timer message")
    assert now_ms() - committed >= 600
    (m,) = visible(wire.cluster, "TxTimer")
    assert m.body == b"later" and m.sys_flag & 0xC == 8 and "TIMER_OUT_MS" in m.properties
