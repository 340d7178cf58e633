"""ali-ons 3.12 (npm, a real client) sends half messages it never ends: they stay invisible, plain
messages on the same topic still flow, and after transactionCheckMax checks the halves are
discarded to TRANS_CHECK_MAX_TIME_TOPIC (transactions.md §1.6)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.remoting import RemotingClient
from tidemq.testing import run_cluster

from ..helpers import wait_for
from ..integration.conftest import Wire
from ..integration.test_transactions import delivered

HERE = Path(__file__).resolve().parent
ALI_ONS = HERE / "node" / "node_modules" / "ali-ons"


async def wait_for_route(client: RemotingClient, namesrv: str, route: RemotingCommand) -> None:
    for _ in range(500):
        if (await client.invoke(namesrv, route, 5)).code == ResponseCode.SUCCESS:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the topic never reached the name server")


async def test_ali_ons_half_messages_stay_invisible_then_discarded(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("no node on PATH (make node-check installs it)")
    if not ALI_ONS.exists():
        pytest.skip(f"no {ALI_ONS} (make node-check installs ali-ons 3.12.0)")
    checks = {"transaction_check_interval": 100, "transaction_time_out": 100, "transaction_check_max": 2}
    async with run_cluster(tmp_path, **checks) as cluster:
        client = RemotingClient()
        try:
            await Wire(client, cluster).create_topic("OnsHalf")  # ali-ons does not auto-create
            route = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "OnsHalf"})
            await wait_for_route(client, cluster.namesrv_addr, route)
        finally:
            await client.close()
        spec = {
            "namesrv": cluster.namesrv_addr,
            "topic": "OnsHalf",
            "group": "OnsTxGroup",
            "half": 3,
            "plain": 2,
        }
        proc = await asyncio.create_subprocess_exec(
            "node",
            str(HERE / "ons_half.js"),
            json.dumps(spec),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, stderr.decode()[-2000:]
        sent = json.loads(stdout.decode().strip().splitlines()[-1])
        assert [r["status"] for r in sent["half"] + sent["plain"]] == ["SEND_OK"] * 5
        service = cluster.broker.transaction_service
        assert service is not None
        await wait_for(lambda: service.discarded == 3, 15, "the three halves discarded")
        bodies = sorted(m.body for m in await delivered(cluster, "OnsHalf"))
        discarded = await delivered(cluster, "TRANS_CHECK_MAX_TIME_TOPIC")
    assert bodies == [b"plain-0", b"plain-1"]  # never a half message
    assert sorted(m.body for m in discarded) == [b"half-0", b"half-1", b"half-2"]
    assert {m.properties["TRANSACTION_CHECK_TIMES"] for m in discarded} == {"2"}
    assert service.pending == {}
