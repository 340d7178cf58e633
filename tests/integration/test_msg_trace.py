"""Message trace end to end: a producer, a push consumer and a lite pull consumer with
``enable_msg_trace=True`` write Pub / SubBefore / SubAfter records to ``RMQ_SYS_TRACE_TOPIC``; ``tidemq admin queryMsgTraceById``
shows the message's whole path (sender, store time, consuming group, costs, results)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from click.testing import CliRunner

from tests.helpers import wait_for_sync
from tidemq.admin.cli import admin_group
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from tidemq.client.consumer.pull import PullConsumer
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ClusterThread


def test_trace_shows_send_and_consume_in_admin(tmp_path: Path) -> None:
    """A traced message's trace names its producer group, store time, consumer group (a failed first
    attempt, then a success on retry) and each step's cost."""
    with ClusterThread(tmp_path) as cluster:
        ns = cluster.namesrv_addr
        producer = Producer(namesrv_addr=ns, producer_group="trace-pg", enable_msg_trace=True)
        producer.start()
        attempts: list[int] = []
        done = threading.Event()

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            attempts.append(msgs[0].reconsume_times)
            if msgs[0].reconsume_times == 0:
                ctx.delay_level_when_next_consume = 1  # retry after 1 s
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            done.set()
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            namesrv_addr=ns,
            consumer_group="trace-cg",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            enable_msg_trace=True,
        )
        consumer.subscribe("TracedTopic", "*")
        consumer.register_message_listener(listener)
        try:
            result = producer.send(Message("TracedTopic", b"trace me", tags="T1", keys="order-7"))
            consumer.start()
            assert done.wait(30), f"consumed attempts: {attempts}"
        finally:
            consumer.shutdown()
            producer.shutdown()
        puller = PullConsumer(
            namesrv_addr=ns,
            consumer_group="trace-lite",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            enable_msg_trace=True,
        )
        puller.subscribe("TracedTopic", "*")
        puller.start()
        try:
            polled: list[MessageExt] = []
            wait_for_sync(lambda: bool(polled.extend(puller.poll(0.2)) or polled), 15, "the lite pull's poll")
        finally:
            puller.shutdown()
        runner = CliRunner()

        def trace() -> dict[str, object] | None:
            out = runner.invoke(admin_group, ["queryMsgTraceById", "-n", ns, "-i", result.msg_id, "--json"])
            if out.exit_code != 0:
                return None
            got = json.loads(out.output)
            subs = got["sub"]
            return (
                got if len(subs.get("trace-cg", [])) >= 2 and subs.get("trace-lite") and got["pub"] else None
            )

        wait_for_sync(lambda: trace() is not None, 15, "the trace of the message in the admin")
        got = trace()
        assert got is not None
        (pub,) = got["pub"]  # type: ignore[misc]
        assert (pub["producerGroup"], pub["status"], pub["topic"], pub["tags"], pub["keys"]) == (
            "trace-pg", "success", "TracedTopic", "T1", "order-7",
        )  # fmt: skip
        assert pub["storeHost"] == cluster.broker_addr and pub["offsetMsgId"] == result.offset_msg_id
        assert pub["sendTime"] <= got["storeTime"]  # type: ignore[operator]
        steps = got["sub"]["trace-cg"]  # type: ignore[index]
        assert [(s["status"], s["retryTimes"], s["returnType"]) for s in steps] == [
            ("failed", 0, "FAILED"),
            ("success", 1, "SUCCESS"),
        ]
        assert all(s["costTime"] >= 0 and s["consumeTime"] >= pub["sendTime"] for s in steps)
        assert [s["status"] for s in got["sub"]["trace-lite"]] == ["success"]  # type: ignore[index]
        text = runner.invoke(admin_group, ["queryMsgTraceById", "-n", ns, "-i", result.msg_id]).output
        assert "trace-pg" in text and "trace-cg" in text and "#ConsumerGroup" in text


async def test_transactional_send_traces_end_transaction(tmp_path: Path) -> None:
    """A traced transactional producer records its half message (Pub, type Trans_Msg_Half) and its
    commit (EndTransaction COMMIT_MESSAGE, not from a check)."""
    from tidemq.admin.client import AsyncAdminClient
    from tidemq.admin.ops_trace import query_msg_trace_by_id
    from tidemq.client import AsyncTransactionProducer, LocalTransactionState, TransactionListener
    from tidemq.testing import run_cluster

    class Commit(TransactionListener):
        def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

    async with run_cluster(tmp_path) as cluster:
        producer = AsyncTransactionProducer(
            Commit(), namesrv_addr=cluster.namesrv_addr, producer_group="trace-tx", enable_msg_trace=True
        )
        await producer.start()
        try:
            result = await producer.send_message_in_transaction(Message("TracedTx", b"pay"))
        finally:
            await producer.shutdown()
        admin = AsyncAdminClient(cluster.namesrv_addr)
        try:
            traces: list[object] = []

            async def probe() -> bool:
                t = await query_msg_trace_by_id(admin, result.msg_id)
                traces.append(t)
                return bool(t.pubs and t.transactions)

            deadline = asyncio.get_running_loop().time() + 10
            while not await probe():
                assert asyncio.get_running_loop().time() < deadline, "no EndTransaction trace"
                await asyncio.sleep(0.05)
        finally:
            await admin.close()
        trace = traces[-1]
        (tx,) = trace.transactions  # type: ignore[attr-defined]
        assert (tx.transaction_state, tx.from_transaction_check, tx.group_name) == (
            "COMMIT_MESSAGE",
            False,
            "trace-tx",
        )
        assert trace.to_json()["pub"][0]["producerGroup"] == "trace-tx"  # type: ignore[attr-defined]
