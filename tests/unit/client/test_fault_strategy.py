"""Send-latency fault tolerance (MQFaultStrategy / LatencyFaultToleranceImpl) and the send retry
policy (SendAttempts): a producer routes around a broker that failed, sans I/O."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tidemq.client.config import ProducerConfig
from tidemq.client.producer.fault import LatencyFaultTolerance, MQFaultStrategy
from tidemq.client.producer.producer import SendAttempts
from tidemq.client.route import TopicPublishInfo
from tidemq.errors import BrokerError, NoRouteError, RemotingConnectError, RemotingTimeoutError
from tidemq.protocol.message import MessageQueue, SendResult


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def info(brokers: dict[str, int]) -> TopicPublishInfo:
    return TopicPublishInfo("T", [MessageQueue("T", b, i) for b, n in brokers.items() for i in range(n)])


def strategy(clock: Clock, *, enable: bool = True) -> MQFaultStrategy:
    return MQFaultStrategy(
        send_latency_fault_enable=enable, tolerance=LatencyFaultTolerance(clock, random.Random(7))
    )


def test_not_available_duration_follows_rocketmq_tables() -> None:
    """latencyMax {50,100,550,1000,2000,3000,15000} -> notAvailableDuration {0,0,30s,60s,120s,180s,600s}."""
    s = MQFaultStrategy(send_latency_fault_enable=True)
    assert [
        s.compute_not_available_duration(ms) for ms in (0, 99, 549, 550, 1500, 2999, 3000, 15000, 30000)
    ] == [
        0,
        0,
        0,
        30000,
        60000,
        120000,
        180000,
        600000,
        600000,
    ]


def test_failed_broker_is_avoided_until_its_period_ends() -> None:
    clock = Clock()
    s = strategy(clock)
    pub = info({"broker-a": 4, "broker-b": 4})
    s.update_fault_item("broker-a", 12, isolation=True)  # failed: isolated as 30,000 ms -> 600 s
    assert {s.select_one_message_queue(pub, None).broker_name for _ in range(40)} == {"broker-b"}
    clock.now += 600_000
    assert {s.select_one_message_queue(pub, None).broker_name for _ in range(40)} == {"broker-a", "broker-b"}


def test_fast_answer_clears_a_slow_broker() -> None:
    clock = Clock()
    s = strategy(clock)
    pub = info({"broker-a": 2, "broker-b": 2})
    s.update_fault_item("broker-a", 700, isolation=False)  # slow: avoided 30 s
    assert {s.select_one_message_queue(pub, None).broker_name for _ in range(20)} == {"broker-b"}
    s.update_fault_item("broker-a", 3, isolation=False)
    assert "broker-a" in {s.select_one_message_queue(pub, None).broker_name for _ in range(20)}


def test_all_brokers_isolated_picks_the_least_bad_one() -> None:
    """pickOneAtLeast: still a queue of a known broker (never an error) when every broker is avoided."""
    clock = Clock()
    s = strategy(clock)
    pub = info({"broker-a": 2, "broker-b": 3})
    s.update_fault_item("broker-a", 20, isolation=True)
    s.update_fault_item("broker-b", 20, isolation=True)
    for _ in range(10):
        mq = s.select_one_message_queue(pub, None)
        assert mq in pub.message_queue_list


def test_disabled_strategy_only_avoids_the_previous_attempts_broker() -> None:
    clock = Clock()
    s = strategy(clock, enable=False)
    pub = info({"broker-a": 2, "broker-b": 2})
    s.update_fault_item("broker-a", 20, isolation=True)  # ignored when disabled
    assert s.tolerance.fault_item_table == {}
    assert {s.select_one_message_queue(pub, "broker-a").broker_name for _ in range(10)} == {"broker-b"}


class FakeProducer:
    """What SendAttempts reads of an AsyncProducer."""

    def __init__(self, fault: MQFaultStrategy, **cfg: Any) -> None:
        self.fault_strategy = fault
        self.config = ProducerConfig(**cfg)


def send(producer: Any, pub: TopicPublishInfo, dead: set[str], retries: int = 2) -> tuple[SendResult, int]:
    """Drive SendAttempts as the producer does; brokers in ``dead`` refuse connections.
    Returns the result and the number of failed attempts."""
    attempts = SendAttempts(producer, "T", 3.0, retries)
    failures = 0
    while (mq := attempts.next_queue(pub)) is not None:
        if mq.broker_name in dead:
            failures += 1
            assert attempts.failed(RemotingConnectError(f"connect to {mq.broker_name} refused"), mq)
            continue
        result = SendResult("SEND_OK", "id", "", mq, 0)
        if attempts.succeeded(result, mq):
            return result, failures
    return attempts.give_up(), failures


@pytest.mark.parametrize("enable", [False, True])
def test_dead_broker_costs_at_most_one_failed_attempt_per_message(enable: bool) -> None:
    clock = Clock()
    producer = FakeProducer(strategy(clock, enable=enable))
    pub = info({"broker-a": 4, "broker-b": 4})
    failures = []
    for _ in range(50):
        result, failed = send(producer, pub, {"broker-a"})
        assert result.message_queue.broker_name == "broker-b"
        failures.append(failed)
    assert max(failures) <= 1
    if enable:  # after the first failure broker-a is not tried again
        assert sum(failures) == 1


def test_retry_policy_by_error_kind() -> None:
    """Transport errors and retriable broker codes are retried; others and NoRouteError are not."""
    producer = FakeProducer(strategy(Clock(), enable=False))
    pub = info({"broker-a": 1, "broker-b": 1})
    a = SendAttempts(producer, "T", 3.0, 2)
    mq = a.next_queue(pub)
    assert mq is not None
    assert a.failed(RemotingTimeoutError("slow"), mq)
    assert a.failed(BrokerError.for_code(1, "system error", "x"), mq)  # SYSTEM_ERROR: retriable
    assert not a.failed(BrokerError.for_code(13, "message illegal", "x"), mq)  # MESSAGE_ILLEGAL
    assert not a.failed(NoRouteError("gone"), mq)


def test_give_up_names_the_brokers_tried() -> None:
    producer = FakeProducer(strategy(Clock(), enable=False))
    pub = info({"broker-a": 1, "broker-b": 1})
    with pytest.raises(RemotingConnectError) as err:
        send(producer, pub, {"broker-a", "broker-b"})
    assert "3 attempt(s)" in str(err.value.__notes__)


def test_not_store_ok_is_returned_when_retries_run_out() -> None:
    """retry_another_broker_when_not_store_ok: a FLUSH_DISK_TIMEOUT result is retried elsewhere,
    and the last such result is returned (as Java) when every attempt gave one."""
    producer = FakeProducer(strategy(Clock(), enable=False), retry_another_broker_when_not_store_ok=True)
    pub = info({"broker-a": 1, "broker-b": 1})
    a = SendAttempts(producer, "T", 3.0, 1)
    seen = []
    while (mq := a.next_queue(pub)) is not None:
        seen.append(mq.broker_name)
        assert not a.succeeded(SendResult("FLUSH_DISK_TIMEOUT", "id", "", mq, 0), mq)
    assert a.give_up().send_status == "FLUSH_DISK_TIMEOUT"
    assert len(set(seen)) == 2
