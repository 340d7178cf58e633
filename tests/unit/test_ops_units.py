"""Issue 31's pure pieces: offset-persist failures logged per state change, consumerProgress read
from a slave when the master does not answer (and the brokers it could not ask named)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tidemq.admin.ops_offsets import OffsetOps
from tidemq.client.consumer.offset_store import RemoteBrokerOffsetStore
from tidemq.errors import RemotingConnectError
from tidemq.protocol.body import ConsumeStats, OffsetWrapper
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import MessageQueue


class _Backend:
    def __init__(self) -> None:
        self.up = False

    async def update_consumer_offset(
        self, group: str, mq: MessageQueue, offset: int, *, oneway: bool
    ) -> None:
        if not self.up:
            raise RemotingConnectError("connect to 127.0.0.1:10911 failed: Connection refused")


def test_offset_persist_failures_log_once_per_broker_per_state_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = _Backend()
    store = RemoteBrokerOffsetStore(backend, "g")  # type: ignore[arg-type]
    mqs = [MessageQueue("T", "broker-a", i) for i in range(5)]
    for mq in mqs:
        store.update_offset(mq, 3, False)
    caplog.set_level(logging.INFO, "tidemq.client.consumer.offset_store")
    for _ in range(4):  # four persist periods of an outage: 20 failures
        asyncio.run(store.persist_all(mqs))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "broker-a" in warnings[0].getMessage()
    backend.up = True
    asyncio.run(store.persist_all(mqs))
    asyncio.run(store.persist_all(mqs))
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(infos) == 1 and "after 20 failed attempt(s)" in infos[0], infos


class _FakeAdmin(OffsetOps):
    """Two broker groups; broker-a's master refuses connections, its slave answers."""

    def __init__(self, groups: dict[str, list[str]], dead: set[str]) -> None:
        super().__init__("127.0.0.1:9876")
        self.groups, self.dead, self.asked = groups, dead, []

    async def _broker_groups(self, topic: str | None, timeout: float | None) -> dict[str, list[str]]:
        return self.groups

    async def invoke_checked(
        self, addr: str, request: RemotingCommand, timeout: float | None
    ) -> RemotingCommand:
        self.asked.append(addr)
        if addr in self.dead:
            raise RemotingConnectError(f"connect to {addr} failed: Connection refused")
        name = "broker-a" if addr.startswith("a") else "broker-b"
        stats = ConsumeStats()
        stats.offset_table[MessageQueue("T", name, 0)] = OffsetWrapper(broker_offset=10, consumer_offset=4)
        return RemotingCommand.create_response(ResponseCode.SUCCESS, None, None, stats.encode())


def test_consumer_progress_reads_the_slave_and_names_brokers_not_asked() -> None:
    admin = _FakeAdmin({"broker-a": ["a-master:1", "a-slave:2"], "broker-b": ["b-master:3"]}, {"a-master:1"})
    rows, unreachable = asyncio.run(admin.consumer_progress_report("g"))
    assert [(r.mq.broker_name, r.lag) for r in rows] == [("broker-a", 6), ("broker-b", 6)]
    assert unreachable == {} and admin.asked == ["a-master:1", "a-slave:2", "b-master:3"]

    admin = _FakeAdmin({"broker-a": ["a-master:1"], "broker-b": ["b-master:3"]}, {"a-master:1"})
    rows, unreachable = asyncio.run(admin.consumer_progress_report("g"))
    assert [r.mq.broker_name for r in rows] == ["broker-b"]
    assert list(unreachable) == ["broker-a"] and "a-master:1" in unreachable["broker-a"]


def test_consume_rates_windows() -> None:
    """statusTable figures: ok/failed per second over the last minute, ms per listener call, failures
    of the last hour (what rocketmq_client_* show)."""
    from tidemq.client.consumer.consume_rates import ConsumeRates

    rates = ConsumeRates(start=0.0)
    first = rates.figures((600, 6, 100, 500.0), now=60.0)
    assert first == {"consumeOKTPS": 10.0, "consumeFailedTPS": 0.1, "consumeRT": 5.0, "consumeFailedMsgs": 6}
    later = rates.figures((1200, 6, 300, 700.0), now=120.0)  # the minute since the last sample
    assert later["consumeOKTPS"] == 10.0 and later["consumeFailedTPS"] == 0.0 and later["consumeRT"] == 1.0
    assert later["consumeFailedMsgs"] == 6
