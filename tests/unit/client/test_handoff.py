"""The clean hand-off's bookkeeping (``handoff.py``, ``ProcessQueue``) and the rebalancer's lock
wait, without a broker."""

from __future__ import annotations

import asyncio
import threading

from tidemq.client.consumer.handoff import QueueHandoff
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.rebalance import Rebalancer
from tidemq.protocol.message import MessageQueue

MQ = MessageQueue("T", "broker-a", 0)


class FakeLocks:
    """Lock RPCs answered from a table ``{queue: holder}``; this client is ``me``."""

    group_name = "g"

    def __init__(self) -> None:
        self.holder: dict[MessageQueue, str] = {}
        self.unlocked: list[set[MessageQueue]] = []

    async def find_broker_addr_for_lock(self, broker_name: str) -> str | None:
        return "addr"

    async def lock_batch_mq(self, addr: str, mqs: set[MessageQueue], timeout: float) -> set[MessageQueue]:
        got = {mq for mq in mqs if self.holder.get(mq, "me") == "me"}
        for mq in got:
            self.holder[mq] = "me"
        return got

    async def unlock_batch_mq(
        self, addr: str, mqs: set[MessageQueue], timeout: float, *, oneway: bool
    ) -> None:
        self.unlocked.append(set(mqs))
        for mq in mqs:
            if self.holder.get(mq) == "me":
                del self.holder[mq]


def test_a_hand_off_refuses_new_listener_calls_but_commits_running_ones() -> None:
    pq = ProcessQueue()
    assert pq.begin_listen()  # a call running when the hand-off begins
    pq.start_hand_off()
    assert pq.dropped and pq.commits_results
    assert not pq.begin_listen()  # a call not started yet is skipped (its messages stay uncommitted)
    pq.end_listen()
    assert pq.listening == 0


async def test_drain_waits_for_running_calls_and_stops_committing_after() -> None:
    pq = ProcessQueue()
    assert pq.begin_listen()
    handoff = QueueHandoff(FakeLocks(), timeout=5.0)
    ended = threading.Timer(0.05, pq.end_listen)  # the listener call finishes on another thread
    ended.start()
    assert await handoff.drain(MQ, pq)
    assert pq.listening == 0 and not pq.commits_results
    ended.join()


async def test_drain_gives_up_after_the_timeout() -> None:
    pq = ProcessQueue()
    assert pq.begin_listen()  # never ends
    assert not await QueueHandoff(FakeLocks(), timeout=0.05).drain(MQ, pq)
    assert not pq.commits_results  # a late result does not move the offset of a queue given away


class Host:
    """A RebalanceHost recording what the rebalancer asked."""

    def __init__(self) -> None:
        self.started: list[tuple[MessageQueue, int]] = []

    async def find_consumer_id_list(self, topic: str) -> list[str]:
        return ["me"]

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return True

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        return 7

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        pass

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        pass

    def dispatch_pull_request(self, requests: list) -> None:  # type: ignore[type-arg]
        self.started.extend((r.message_queue, r.next_offset) for r in requests)


def _rebalancer(locks: FakeLocks, *, wait: float, required: bool) -> tuple[Rebalancer, Host]:
    host = Host()
    rb = Rebalancer("g", "me", "CLUSTERING", None, host)
    rb.lock_hook = QueueHandoff(locks, timeout=wait).lock
    rb.lock_wait, rb.lock_required = wait, required
    return rb, host


async def test_a_new_owner_waits_for_the_release_then_starts() -> None:
    locks = FakeLocks()
    locks.holder[MQ] = "old"
    rb, host = _rebalancer(locks, wait=5.0, required=False)
    adding = asyncio.ensure_future(rb.update_process_queue_table_in_rebalance("T", {MQ}, {MQ}))
    await asyncio.sleep(0.05)
    assert host.started == []  # still held by the old owner
    del locks.holder[MQ]  # the old owner committed and unlocked
    assert await adding
    assert host.started == [(MQ, 7)] and rb.process_queue_table[MQ].locked


async def test_a_release_that_never_comes_is_waited_for_a_bounded_time() -> None:
    locks = FakeLocks()
    locks.holder[MQ] = "hung"
    rb, host = _rebalancer(locks, wait=0.05, required=False)
    assert await rb.update_process_queue_table_in_rebalance("T", {MQ}, {MQ})
    assert host.started == [(MQ, 7)] and not rb.process_queue_table[MQ].locked  # as RocketMQ does
    orderly, host = _rebalancer(locks, wait=0.05, required=True)
    assert not await orderly.update_process_queue_table_in_rebalance("T", {MQ}, {MQ})
    assert host.started == []  # orderly never consumes a queue it has not locked
