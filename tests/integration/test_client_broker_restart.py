"""A push consumer keeps consuming across a broker restart without waiting for its heartbeat timer."""

from __future__ import annotations

import time
from pathlib import Path

from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.message import MessageExt
from tidemq.remoting import RemotingClient
from tidemq.testing import run_cluster

from ..helpers import start_push_consumer, wait_for
from .conftest import Wire


async def test_consumer_re_registers_with_a_restarted_broker_at_once(tmp_path: Path) -> None:
    """A restarted broker has forgotten the group and refuses its pulls (SUBSCRIPTION_NOT_EXIST);
    the consumer answers with a heartbeat at once instead of after ``heartbeat_broker_interval``
    (set to 10 minutes here, so only the immediate heartbeat can bring the messages)."""
    async with run_cluster(tmp_path) as cluster:
        client = RemotingClient()
        got: list[bytes] = []

        def listener(msgs: list[MessageExt], context: object) -> None:
            got.extend(m.body for m in msgs)

        try:
            wire = Wire(client, cluster)
            await wire.create_topic("Restarted", 1)
            started = time.monotonic()
            consumer = await start_push_consumer(
                cluster.namesrv_addr, "restart-group", "Restarted", listener, heartbeat_broker_interval=600.0
            )
            try:
                assert (await wire.send("Restarted", b"before", queue_id=0)).code == ResponseCode.SUCCESS
                await wait_for(lambda: b"before" in got, 30, "the message sent before the restart")
                # the instance's timer sends one heartbeat 1 s after start, then none for 10 minutes
                await wait_for(lambda: time.monotonic() - started > 2.0, 5, "the timer's first heartbeat")
                await cluster.restart_broker()
                assert (await wire.send("Restarted", b"after", queue_id=0)).code == ResponseCode.SUCCESS
                await wait_for(lambda: b"after" in got, 60, "the message sent after the restart")
                assert got.count(b"after") == 1
            finally:
                await consumer.shutdown()
        finally:
            await client.close()
