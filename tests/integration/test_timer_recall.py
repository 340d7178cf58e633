"""Timer-message recall through a real broker and tidemq's client (RocketMQ 5.3's recallHandle and
RECALL_MESSAGE 370, and the 4.x/5.x TIMER_DEL_UNIQKEY put): a recalled message never arrives, also
after a broker restart; a recall after delivery is refused saying so."""

from __future__ import annotations

import asyncio
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
            due = now_ms() + 4000  # room for a loaded machine: the recalls come well before
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


async def test_recall_through_the_cluster_mode_proxy(tmp_path: Path) -> None:
    """The v5 RecallMessage path of ``tidemq proxy`` (proxy/recall.py over ClusterBackend): the broker
    the handle names answers; a bad handle and an unknown topic are the client's errors."""
    from tidemq.proxy import codes
    from tidemq.proxy.cluster import ClusterBackend
    from tidemq.proxy.context import RequestContext
    from tidemq.proxy.pb import d, s
    from tidemq.proxy.recall import recall_message

    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg-recall-proxy")
        await producer.start()
        backend = ClusterBackend(cluster.namesrv_addr)
        ctx = RequestContext({}, "", "v5-client", "127.0.0.1:5000", "127.0.0.1")
        try:
            sent = await producer.send(Message(TOPIC, b"via-proxy", delivery_time_ms=now_ms() + 60_000))
            request = s.RecallMessageRequest(topic=d.Resource(name=TOPIC), recall_handle=sent.recall_handle)
            response = await recall_message(backend, request, ctx)
            assert response.status.code == codes.OK and response.message_id == sent.msg_id
            timer_store = cluster.broker.timer_message_service.timer_store  # type: ignore[union-attr]
            assert delete_key(TOPIC, sent.msg_id) in timer_store.cancels
            for topic, handle, code in (
                (TOPIC, "not-a-handle", codes.BAD_REQUEST),
                ("NoSuchTopic", sent.recall_handle, codes.TOPIC_NOT_FOUND),
            ):
                bad = s.RecallMessageRequest(topic=d.Resource(name=topic), recall_handle=handle)
                with pytest.raises(codes.ProxyError) as refused:
                    await recall_message(backend, bad, ctx)
                assert refused.value.code == code, refused.value.message
        finally:
            await backend.close()
            await producer.shutdown()


async def test_a_traced_recall_shows_in_the_message_trace(tmp_path: Path) -> None:
    """``enable_msg_trace``: the recall is a ``Recall`` record next to the send's ``Pub``
    (``DefaultRecallMessageTraceHook``), shown by queryMsgTraceById."""
    from tidemq.admin.client import AsyncAdminClient
    from tidemq.admin.ops_trace import query_msg_trace_by_id
    from tidemq.client.trace.view import MessageTrace

    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(
            namesrv_addr=cluster.namesrv_addr, producer_group="pg-recall-trace", enable_msg_trace=True
        )
        await producer.start()
        try:
            sent = await producer.send(Message(TOPIC, b"traced", delivery_time_ms=now_ms() + 60_000))
            await producer.recall_message(TOPIC, sent.recall_handle or "")
        finally:
            await producer.shutdown()  # flushes the trace records
        admin = AsyncAdminClient(cluster.namesrv_addr)
        try:
            traces: list[MessageTrace] = []

            async def probe() -> bool:
                trace = await query_msg_trace_by_id(admin, sent.msg_id)
                traces.append(trace)
                return bool(trace.pubs and trace.recalls)

            deadline = asyncio.get_running_loop().time() + 10
            while not await probe():
                assert asyncio.get_running_loop().time() < deadline, traces[-1]
                await asyncio.sleep(0.05)
            trace = traces[-1]
            assert [(r.group_name, r.status) for r in trace.recalls] == [("pg-recall-trace", "success")]
        finally:
            await admin.close()
