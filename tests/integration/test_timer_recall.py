"""Timer-message recall through a real broker and tidemq's client (RocketMQ 5.3's recallHandle and
RECALL_MESSAGE 370, and the 4.x/5.x TIMER_DEL_UNIQKEY put): a recalled message never arrives, also
after a broker restart; a recall after delivery is refused saying so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.test_timer import now_ms, visible
from tidemq.client.producer.producer import AsyncProducer
from tidemq.errors import BrokerError, ClientError
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.message import Message
from tidemq.protocol.recall import RecallHandle, delete_key
from tidemq.testing import run_cluster

TOPIC = "RecallTopic"


async def test_recall_before_due_survives_a_restart_and_after_delivery_is_refused(tmp_path: Path) -> None:
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg-recall")
        await producer.start()
        try:
            warm = await producer.send(Message(TOPIC, b"warm"))
            assert warm.recall_handle is None  # only timer messages get one
            due = now_ms() + 2500
            gone = await producer.send(Message(TOPIC, b"recalled", delivery_time_ms=due))
            kept = await producer.send(Message(TOPIC, b"kept", delivery_time_ms=due))
            early = await producer.send(Message(TOPIC, b"early", delivery_time_ms=now_ms() + 700))
            assert gone.recall_handle is not None
            handle = RecallHandle.decode(gone.recall_handle)
            assert (handle.topic, handle.broker_name, handle.message_id) == (TOPIC, "broker-a", gone.msg_id)
            assert handle.timestamp_ms == due + 1  # TIMER_OUT_MS + 1, as RocketMQ writes it
            assert await producer.recall_message(TOPIC, gone.recall_handle) == gone.msg_id
            # the 4.x / 5.x remoting way: a timer put carrying TIMER_DEL_UNIQKEY and the same time
            raw = await producer.send(Message(TOPIC, b"raw-cancelled", delivery_time_ms=due))
            marker = Message(TOPIC, b"0", delivery_time_ms=due)
            marker.properties["TIMER_DEL_UNIQKEY"] = delete_key(TOPIC, raw.msg_id)
            await producer.send(marker)
            with pytest.raises(ClientError, match="recall handle is invalid"):
                await producer.recall_message(TOPIC, "bm90IGEgaGFuZGxl")
            await producer.send(Message("OtherTopic", b"x"))
            with pytest.raises(BrokerError, match="topic not match"):
                await producer.recall_message("OtherTopic", kept.recall_handle or "")
            await wait_for(
                lambda: b"early" in {m.body for m in visible(cluster, TOPIC)}, 10, "the early timer"
            )
            with pytest.raises(BrokerError) as late:
                await producer.recall_message(TOPIC, early.recall_handle or "")
            assert late.value.code == ResponseCode.ILLEGAL_OPERATION
            assert "has been delivered" in late.value.remark

            await cluster.restart_broker()  # the cancellations are pending across it
            timer_store = cluster.broker.timer_message_service.timer_store  # type: ignore[union-attr]
            await wait_for(lambda: timer_store.pending == 0, 10, "every timer due")
            bodies = sorted(m.body for m in visible(cluster, TOPIC))
            assert bodies == [b"early", b"kept", b"warm"]  # never a recalled one, never a marker
            assert timer_store.cancelled == 2 and len(timer_store.cancels) == 0
        finally:
            await producer.shutdown()
