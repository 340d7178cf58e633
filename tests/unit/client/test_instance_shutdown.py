"""ClientInstance.shutdown ends its timers even when a rebalance wake-up meets the cancel."""

from __future__ import annotations

import asyncio

from tidemq.client.config import ClientConfig
from tidemq.client.instance import ClientInstance


async def test_shutdown_right_after_a_rebalance_wakeup_returns() -> None:
    """The wake-up and the cancel land in the same loop turn; in Python 3.11 ``wait_for`` then
    returns the wake-up and drops the cancel, which left the rebalance service waiting 20 s more
    and shutdown's gather with it."""
    for i in range(20):
        inst = ClientInstance.acquire(ClientConfig(namesrv_addr="127.0.0.1:1", instance_name=f"shut-{i}"))
        inst.rebalance_interval = 3600.0
        await inst.start()
        await asyncio.sleep(0)  # the rebalance service is now waiting for a wake-up
        inst.rebalance_immediately()
        await asyncio.wait_for(inst.shutdown(), 10)
        assert not inst._tasks
