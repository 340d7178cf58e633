"""Transactional messages end to end: tidemq's TransactionProducer against a real broker
(commit, rollback, UNKNOW checked back, transactionCheckMax, a raising listener)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from tidemq.client import (
    AsyncTransactionProducer,
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
)
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.message import Message, MessageExt
from tidemq.protocol.message_codec import decode_messages
from tidemq.remoting import RemotingClient
from tidemq.testing import Cluster, ClusterThread, run_cluster

from ..helpers import wait_for, wait_for_sync
from .conftest import Wire

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
FAST_CHECKS = {"transaction_check_interval": 100, "transaction_time_out": 200, "transaction_check_max": 3}


async def delivered(cluster: Cluster, topic: str) -> list[MessageExt]:
    """Every message a consumer of ``topic`` can pull (all queues, from offset 0)."""
    client = RemotingClient()
    out: list[MessageExt] = []
    try:
        wire = Wire(client, cluster)
        for queue_id in range(4):
            r = await wire.pull(topic, 0, queue_id=queue_id)
            if r.code == ResponseCode.SUCCESS:
                out.extend(decode_messages(r.body))
    finally:
        await client.close()
    return out


class Scripted(TransactionListener):
    """Answers from ``plan[body]``: (execute's answer, check's answer); counts checks."""

    def __init__(self, plan: dict[bytes, tuple[LocalTransactionState, LocalTransactionState]]) -> None:
        self.plan = plan
        self.checks: dict[bytes, int] = {}

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return self.plan[msg.body][0]

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checks[msg.body] = self.checks.get(msg.body, 0) + 1
        return self.plan[msg.body][1]


async def test_commit_exactly_once_and_never_before_end(tmp_path: Path) -> None:
    """N commits give exactly N deliveries; while a (slow) local transaction runs its message is in
    no consume queue of the topic; rollbacks give nothing."""
    async with run_cluster(tmp_path) as cluster:
        store = cluster.broker.store
        seen_before_end: list[int] = []

        class Slow(TransactionListener):
            async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
                await asyncio.sleep(0.05 if arg == 0 else 0)  # a slow local transaction (the first)
                seen_before_end.append(sum(store.get_max_offset_in_queue("TxOrders", q) for q in range(4)))
                return COMMIT if arg % 3 else ROLLBACK

            def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
                raise AssertionError("no check expected")

        producer = AsyncTransactionProducer(Slow(), namesrv_addr=cluster.namesrv_addr, producer_group="TxPG")
        await producer.start()
        try:
            results = [
                await producer.send_message_in_transaction(Message("TxOrders", f"o{i}".encode()), arg=i)
                for i in range(12)
            ]
            committed = {f"o{i}".encode() for i in range(12) if i % 3}

            async def count() -> int:
                return len(await delivered(cluster, "TxOrders"))

            await wait_for_count(count, len(committed))
            bodies = [m.body for m in await delivered(cluster, "TxOrders")]
        finally:
            await producer.shutdown()
    assert sorted(bodies) == sorted(committed)  # exactly once each, no rolled-back one
    assert seen_before_end[0] == 0  # the first (slow) one: nothing visible while it ran
    assert [r.local_transaction_state for r in results[:3]] == [ROLLBACK, COMMIT, COMMIT]
    assert all(r.transaction_id == r.msg_id for r in results)


async def wait_for_count(count: Any, expected: int, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while (got := await count()) < expected:
        assert asyncio.get_running_loop().time() < deadline, f"{got} of {expected} delivered"
        await asyncio.sleep(0.02)


async def test_unknow_is_checked_back_and_the_check_decides(tmp_path: Path) -> None:
    """UNKNOW (and a listener that raises) is checked back after transactionTimeOut; the check's
    answer decides; a transaction checked transactionCheckMax times goes to TRANS_CHECK_MAX_TIME_TOPIC."""
    async with run_cluster(tmp_path, **FAST_CHECKS) as cluster:

        class Raising(Scripted):
            def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
                if msg.body == b"x":
                    raise RuntimeError("database down")
                return super().execute_local_transaction(msg, arg)

        plan = {
            b"c": (UNKNOW, COMMIT),
            b"r": (UNKNOW, ROLLBACK),
            b"u": (UNKNOW, UNKNOW),
            b"x": (UNKNOW, COMMIT),
            b"w": (COMMIT, COMMIT),
        }
        listener = Raising(plan)
        producer = AsyncTransactionProducer(
            listener, namesrv_addr=cluster.namesrv_addr, producer_group="TxCheckPG"
        )
        await producer.start()
        service = cluster.broker.transaction_service
        assert service is not None
        try:
            # the broker can check a group once it heartbeated (the first half message triggers it):
            # the counts below assume every pass reaches the producer
            await producer.send_message_in_transaction(Message("TxWarm", b"w"))
            channels = cluster.broker.producer_manager.get_producer_channels
            await wait_for(lambda: bool(channels("TxCheckPG")), 10, "the producer's heartbeat")
            states = [
                (
                    await producer.send_message_in_transaction(Message("TxChecked", body))
                ).local_transaction_state
                for body in (b"c", b"r", b"u", b"x")
            ]
            assert states == [UNKNOW] * 4
            await wait_for(lambda: not service.pending, 15, "every transaction decided or discarded")
            bodies = sorted(m.body for m in await delivered(cluster, "TxChecked"))
            discarded = [m for m in await delivered(cluster, "TRANS_CHECK_MAX_TIME_TOPIC")]
        finally:
            await producer.shutdown()
    assert bodies == [b"c", b"x"]
    assert [m.body for m in discarded] == [b"u"] and listener.checks[b"u"] == 3
    assert discarded[0].properties["REAL_TOPIC"] == "TxChecked"
    assert listener.checks[b"c"] == listener.checks[b"r"] == 1


def test_blocking_producer_runs_the_local_transaction_on_the_caller_thread(tmp_path: Path) -> None:
    """TransactionProducer: execute_local_transaction on the calling thread, checks on the check
    pool (another thread), both answers honoured."""
    with ClusterThread(tmp_path, **FAST_CHECKS) as cluster:
        threads: dict[str, str] = {}

        class Recording(TransactionListener):
            def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
                threads["execute"] = threading.current_thread().name
                return COMMIT if arg else UNKNOW

            def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
                threads["check"] = threading.current_thread().name
                return COMMIT

        with TransactionProducer(
            Recording(), namesrv_addr=cluster.namesrv_addr, producer_group="TxSyncPG"
        ) as p:
            p.send_message_in_transaction(Message("TxSync", b"now"), arg=True)
            p.send_message_in_transaction(Message("TxSync", b"later"), arg=False)

            def bodies() -> list[bytes]:
                return sorted(m.body for m in cluster.run(delivered(cluster.cluster, "TxSync")))  # type: ignore[arg-type]

            wait_for_sync(lambda: bodies() == [b"later", b"now"], 15, "both transactions delivered")
    assert threads["execute"] == threading.current_thread().name
    assert threads["check"].startswith("tidemq-tx-check")


async def test_check_immunity_time_delays_the_first_check(tmp_path: Path) -> None:
    """CHECK_IMMUNITY_TIME_IN_SECONDS=1 with transactionTimeOut 100 ms: no check before a second
    after the send (passes re-append it meanwhile), then the check's answer commits it once."""
    checked_at: list[float] = []

    class Late(TransactionListener):
        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            return UNKNOW

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            checked_at.append(time.time() * 1000 - msg.born_timestamp)
            return COMMIT

    fast = {"transaction_check_interval": 100, "transaction_time_out": 100}
    async with run_cluster(tmp_path, **fast) as cluster:
        producer = AsyncTransactionProducer(
            Late(), namesrv_addr=cluster.namesrv_addr, producer_group="TxImmPG"
        )
        await producer.start()
        try:
            msg = Message("TxImmune", b"later", properties={"CHECK_IMMUNITY_TIME_IN_SECONDS": "1"})
            await producer.send_message_in_transaction(msg)
            await wait_for(lambda: bool(checked_at), 10, "the check after the immunity time")

            async def count() -> int:
                return len(await delivered(cluster, "TxImmune"))

            await wait_for_count(count, 1)
            assert await count() == 1  # a second check racing the first answer commits nothing more
        finally:
            await producer.shutdown()
    assert checked_at[0] >= 1000
