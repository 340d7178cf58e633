"""PullAPIWrapper's choice of node (suggestWhichBrokerId, slave fallback, unreachable master) and
the broker lookups it mirrors (findBrokerAddressInSubscribe / InAdmin), sans I/O."""

from __future__ import annotations

from typing import Any

import pytest

from tidemq.client.api import PullResult, PullStatus
from tidemq.client.consumer.pull_api import UNREACHABLE_BACKOFF_S, PullAPIWrapper, process_pull_result
from tidemq.client.consumer.pull_core import QueuePull
from tidemq.client.route import FindBrokerResult, find_broker_in_admin, find_broker_in_subscribe
from tidemq.errors import BrokerError, ClientError, RemotingConnectError
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.headers import PullSysFlag
from tidemq.protocol.message import MessageQueue

MASTER, SLAVE = "10.0.0.1:10911", "10.0.0.2:10911"
MQ = MessageQueue("T", "broker-a", 0)


def test_find_broker_in_subscribe_mirrors_rocketmq() -> None:
    group = {0: MASTER, 1: SLAVE}
    assert find_broker_in_subscribe(group, 0) == FindBrokerResult(MASTER, False, 0)
    assert find_broker_in_subscribe(group, 1) == FindBrokerResult(SLAVE, True, 1)
    assert find_broker_in_subscribe({0: MASTER, 2: SLAVE}, 1) == FindBrokerResult(SLAVE, True, 2)  # id + 1
    assert find_broker_in_subscribe({1: SLAVE}, 0) == FindBrokerResult(SLAVE, True, 1)  # master gone
    assert find_broker_in_subscribe({1: SLAVE}, 0, only_this_broker=True) is None
    assert find_broker_in_subscribe({0: MASTER}, 3) == FindBrokerResult(MASTER, False, 0)
    assert find_broker_in_subscribe({}, 0) is None
    assert find_broker_in_subscribe(None, 0) is None


def test_offsets_go_to_the_master_else_a_slave() -> None:
    assert find_broker_in_admin({1: SLAVE, 0: MASTER}) == FindBrokerResult(MASTER, False, 0)
    assert find_broker_in_admin({1: SLAVE}) == FindBrokerResult(SLAVE, True, 1)
    assert find_broker_in_admin({}) is None


class FakeAPI:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.refuse: set[str] = set()
        self.unknown_group: set[str] = set()
        self.suggest = 0

    def build_pull_message_request(self, **kw: Any) -> dict[str, Any]:
        return kw  # the request's fields stand for the request

    async def invoke_pull_message(
        self, addr: str, request: dict[str, Any], queue_offset: int, timeout: float
    ) -> PullResult:
        kw = request
        self.calls.append({"addr": addr, **kw})
        if addr in self.refuse:
            raise RemotingConnectError(f"connect to {addr} failed")
        if addr in self.unknown_group:
            raise BrokerError(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist")
        return PullResult(
            PullStatus.NO_NEW_MSG, kw["queue_offset"], 0, 0, suggest_which_broker_id=self.suggest
        )


class FakeInstance:
    def __init__(self, group: dict[int, str]) -> None:
        self.api: Any = FakeAPI()
        self.broker_addr_table = {"broker-a": dict(group)}
        self.route_refreshes = 0
        self.route_after_refresh: dict[int, str] | None = None
        self.heartbeats_asked = 0

    def heartbeat_soon(self) -> None:
        self.heartbeats_asked += 1

    async def update_topic_route_info_from_name_server(self, topic: str | None = None) -> bool:
        self.route_refreshes += 1
        if self.route_after_refresh is not None:
            self.broker_addr_table["broker-a"] = self.route_after_refresh
        return True


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


async def pull(
    wrapper: PullAPIWrapper, sys_flag: int = 0, state: QueuePull[object] | None = None
) -> PullResult:
    """One pull of MQ through ``wrapper``; ``state``: the queue's kernel state, which keeps the
    node each answer suggests for the next pull (as a PullRequest does)."""
    result = await wrapper.pull_kernel_impl(
        MQ,
        sub_expression="*",
        expression_type="TAG",
        sub_version=0,
        offset=5,
        max_nums=32,
        sys_flag=sys_flag,
        commit_offset=7,
        broker_suspend_max_time_millis=0,
        suggest_which_broker_id=0 if state is None else state.suggest_which_broker_id,
        timeout=1.0,
    )
    if state is not None:
        state.on_result(result)
    return process_pull_result(MQ, result, None)


async def test_follows_suggest_which_broker_id_and_back() -> None:
    inst = FakeInstance({0: MASTER, 1: SLAVE})
    wrapper = PullAPIWrapper(inst, "g")
    state: QueuePull[object] = QueuePull(MQ, 5)
    flag = PullSysFlag.build_sys_flag(True, True, True, False)
    inst.api.suggest = 1
    await pull(wrapper, flag, state)  # master answers: go to the slave
    inst.api.suggest = 0
    await pull(wrapper, flag, state)  # slave answers: back to the master
    await pull(wrapper, flag, state)
    addrs = [c["addr"] for c in inst.api.calls]
    assert addrs == [MASTER, SLAVE, MASTER]
    flags = [c["sys_flag"] for c in inst.api.calls]
    assert flags[0] & PullSysFlag.FLAG_COMMIT_OFFSET
    assert not flags[1] & PullSysFlag.FLAG_COMMIT_OFFSET  # a slave takes no offset commit
    assert flags[2] & PullSysFlag.FLAG_COMMIT_OFFSET


async def test_master_missing_from_route_pulls_from_slave() -> None:
    inst = FakeInstance({1: SLAVE})
    wrapper = PullAPIWrapper(inst, "g")
    await pull(wrapper)
    assert inst.api.calls[0]["addr"] == SLAVE


async def test_unreachable_master_is_skipped_for_a_while() -> None:
    """A refused connect to the master (still in the route) sends the next pulls to the slave, even
    though the slave keeps suggesting the master; after the backoff the master is tried again."""
    clock = Clock()
    inst = FakeInstance({0: MASTER, 1: SLAVE})
    wrapper = PullAPIWrapper(inst, "g", clock=clock)
    inst.api.refuse.add(MASTER)
    with pytest.raises(RemotingConnectError):
        await pull(wrapper)
    await pull(wrapper)
    await pull(wrapper)
    assert [c["addr"] for c in inst.api.calls] == [MASTER, SLAVE, SLAVE]
    clock.now += UNREACHABLE_BACKOFF_S
    inst.api.refuse.clear()
    await pull(wrapper)
    assert inst.api.calls[-1]["addr"] == MASTER


async def test_lone_master_refusing_is_not_backed_off() -> None:
    """With no other node in the group there is nothing to switch to: every pull tries the master."""
    inst = FakeInstance({0: MASTER})
    wrapper = PullAPIWrapper(inst, "g")
    inst.api.refuse.add(MASTER)
    for _ in range(2):
        with pytest.raises(RemotingConnectError):
            await pull(wrapper)
    assert [c["addr"] for c in inst.api.calls] == [MASTER, MASTER]


async def test_unknown_group_refreshes_the_route_once() -> None:
    inst = FakeInstance({})
    wrapper = PullAPIWrapper(inst, "g")
    with pytest.raises(ClientError, match="broker-a"):
        await pull(wrapper)
    assert inst.route_refreshes == 1
    inst.route_after_refresh = {0: MASTER}
    await pull(wrapper)
    assert inst.api.calls[-1]["addr"] == MASTER


async def test_a_broker_that_forgot_the_group_gets_a_heartbeat_at_once() -> None:
    inst = FakeInstance({0: MASTER})
    wrapper = PullAPIWrapper(inst, "g")
    await pull(wrapper)
    assert inst.heartbeats_asked == 0
    inst.api.unknown_group.add(MASTER)  # e.g. the broker restarted and has not heard from us yet
    with pytest.raises(BrokerError):
        await pull(wrapper)
    assert inst.heartbeats_asked == 1
