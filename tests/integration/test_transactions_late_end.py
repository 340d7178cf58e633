"""END_TRANSACTION after its transaction was decided or discarded, on a real broker: a late COMMIT
of a discarded half is refused, a late ROLLBACK is not, a duplicate COMMIT of a committed half
answers SUCCESS and puts nothing, across a restart too (transactions.md §1.3; fates.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tidemq.clock import now_ms
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.remoting import RemotingClient
from tidemq.testing import run_cluster

from .conftest import Wire
from .test_transactions_wire import HALF, end_request, messages

HOUR_MS = 3_600_000


async def _end(wire: Wire, sent: RemotingCommand, kind: int) -> RemotingCommand:
    return await wire.client.invoke(wire.addr, end_request("PG", sent, kind), 5)


async def test_late_commit_refused_late_rollback_not_duplicate_commit_idempotent(tmp_path: Path) -> None:
    async with run_cluster(tmp_path, transaction_check_max=1) as cluster:
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            lost = await wire.send("TxLate", b"lost", properties=HALF, sys_flag=4)
            kept = await wire.send("TxLate", b"kept", properties={**HALF, "UNIQ_KEY": "K"}, sys_flag=4)
            assert (await _end(wire, kept, 8)).code == ResponseCode.SUCCESS
            service = cluster.broker.transaction_service
            assert service is not None
            service.clock_ms = lambda: now_ms() + HOUR_MS  # "lost" is old enough to check, then discard
            await service.check_pass()  # checked once (no producer to ask)
            await service.check_pass()  # transactionCheckMax reached: discarded
            assert service.pending == {} and service.discarded == 1
            for _ in range(2):  # a retried END gets the same answer
                late = await _end(wire, lost, 8)
                assert late.code == ResponseCode.SYSTEM_ERROR and late.remark is not None
                assert late.remark.startswith("Find prepared transaction message failed: ")
                assert "half message U " in late.remark and "discarded" in late.remark
            assert (await _end(wire, lost, 12)).code == ResponseCode.SUCCESS  # harmless
            assert (await _end(wire, kept, 8)).code == ResponseCode.SUCCESS  # duplicate: idempotent
            await service.check_pass()  # the group's offsets pass every op record: restart reads none
        finally:
            await client.close()
        await cluster.restart_broker()
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            service = cluster.broker.transaction_service
            assert service is not None and service.pending == {}
            offsets = cluster.broker.consumer_offset_manager
            assert offsets.query_offset("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == 1
            assert (tmp_path / "store" / "transaction" / "fates").is_dir()
            assert (await _end(wire, kept, 8)).code == ResponseCode.SUCCESS  # from the fate file
            late = await _end(wire, lost, 8)
            assert late.code == ResponseCode.SYSTEM_ERROR and "discarded" in (late.remark or "")
            assert [m.body for m in await messages(wire, "TxLate")] == [b"kept"]  # once, "lost" never
        finally:
            await client.close()
        # the fate file gone (a slave promoted to master, a store from before it): rebuilt at start
        await cluster.broker.shutdown()
        shutil.rmtree(tmp_path / "store" / "transaction" / "fates")
        await cluster.restart_broker()
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            assert (await _end(wire, kept, 8)).code == ResponseCode.SUCCESS
            assert "discarded" in ((await _end(wire, lost, 8)).remark or "")
            assert [m.body for m in await messages(wire, "TxLate")] == [b"kept"]
        finally:
            await client.close()
