"""The send hook for timer messages (RocketMQ 5's HookUtils.transformTimerMessage), pure."""

from __future__ import annotations

import pytest

from tidemq.broker.timer_service import (
    READ_TIME_PERSIST_MS,
    _same_checkpoint,
    is_timer_message,
    transform_timer_message,
)
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.message import Message, MessageConst
from tidemq.protocol.message_codec import MessageSysFlag
from tidemq.protocol.topic import TIMER_TOPIC
from tidemq.store import MessageStoreConfig
from tidemq.store.results import MessageExtBrokerInner

NOW = 1_800_000_000_000
CFG = MessageStoreConfig(store_path_root_dir="/nonexistent")


def msg(props: dict[str, str], sys_flag: int = 0) -> MessageExtBrokerInner:
    return MessageExtBrokerInner("Real", b"x", properties=dict(props), queue_id=3, sys_flag=sys_flag)


@pytest.mark.parametrize(
    ("key", "value", "due"),
    [
        ("TIMER_DELIVER_MS", str(NOW + 5000), NOW + 5000),
        ("TIMER_DELAY_SEC", "7", NOW + 7000),
        ("TIMER_DELAY_MS", "1234", NOW + 1234),
        ("__STARTDELIVERTIME", str(NOW + 10_000), NOW + 10_000),
    ],
)
def test_future_timer_is_parked(key: str, value: str, due: int) -> None:
    m = msg({key: value, "TAGS": "t"})
    assert is_timer_message(m.properties)
    assert transform_timer_message(m, CFG, NOW) is None
    assert (m.topic, m.queue_id) == (TIMER_TOPIC, 0)
    p = m.properties
    assert (p["TIMER_OUT_MS"], p["REAL_TOPIC"], p["REAL_QID"], p[key]) == (str(due), "Real", "3", value)


def test_precedence_and_pass_through() -> None:
    both = msg({"TIMER_DELIVER_MS": str(NOW + 99_000), "TIMER_DELAY_SEC": "2"})
    transform_timer_message(both, CFG, NOW)
    assert both.properties["TIMER_OUT_MS"] == str(NOW + 2000)  # DELAY_SEC first, as RocketMQ
    level = msg({"DELAY": "3", "TIMER_DELIVER_MS": str(NOW + 5000), "TIMER_DELAY_MS": "5"})
    assert transform_timer_message(level, CFG, NOW) is None
    assert level.topic == "Real" and set(level.properties) == {"DELAY"}  # the level wins
    past = msg({"TIMER_DELIVER_MS": str(NOW - 1)})
    assert transform_timer_message(past, CFG, NOW) is None and past.topic == "Real"  # at once
    half = msg({"TIMER_DELIVER_MS": str(NOW + 5000)}, sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE)
    assert transform_timer_message(half, CFG, NOW) is None and half.topic == "Real"
    plain = msg({"TAGS": "t"})
    assert not is_timer_message(plain.properties) and transform_timer_message(plain, CFG, NOW) is None


@pytest.mark.parametrize(
    "props",
    [
        {"TIMER_DELIVER_MS": str(NOW + 259_200_001)},
        {"TIMER_DELAY_SEC": "abc"},
        {"__STARTDELIVERTIME": "1.5e12"},
        {"TIMER_DELIVER_MS": str(NOW - 5), "TIMER_DEL_UNIQKEY": "k"},
    ],
)
def test_refused_with_rocketmq_code_and_remark(props: dict[str, str]) -> None:
    answer = transform_timer_message(msg(props), CFG, NOW)
    assert answer is not None and answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert answer.remark is not None and "max delay 259200000ms" in answer.remark


def test_wheel_disabled_is_system_error() -> None:
    cfg = MessageStoreConfig(store_path_root_dir="/nonexistent", timer_wheel_enable=False)
    answer = transform_timer_message(msg({"TIMER_DELAY_SEC": "1"}), cfg, NOW)
    assert answer is not None and answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == "accurate timer message is not enabled, timerWheelEnable is false"


def test_client_message_fields() -> None:
    m = Message("T", b"x", delivery_time_ms=NOW, delay_ms=1500)
    assert m.properties == {"TIMER_DELIVER_MS": str(NOW), "TIMER_DELAY_MS": "1500"}
    assert (m.delivery_time_ms, m.delay_ms) == (NOW, 1500)
    m.delivery_time_ms = None
    m.delay_ms = None
    assert m.properties == {} and m.delivery_time_ms is None and m.delay_ms is None
    assert (
        MessageConst.PROPERTY_TIMER_DELIVER_MS
        not in Message("T", properties={"TIMER_DELIVER_MS": "1"}).user_properties()
    )


def test_a_client_batch_refuses_timer_messages() -> None:
    """The broker does not schedule batches (as RocketMQ 5): tidemq's client refuses them up front."""
    from tidemq.client.producer.producer import AsyncProducer
    from tidemq.errors import ClientError

    producer = AsyncProducer(producer_group="pg")
    for m in (Message("T", b"x", delay_ms=5), Message("T", b"x", properties={"__STARTDELIVERTIME": "1"})):
        with pytest.raises(ClientError, match="timer messages"):
            producer.prepare_batch([Message("T", b"a"), m])
    producer.prepare_batch([Message("T", b"a", properties={"DELAY": "0"})])  # level 0: not delayed


def test_checkpoint_not_rewritten_at_rest() -> None:
    old: dict[str, object] = {"readTimeMs": NOW, "enqueueOffset": 3, "pending": 0, "cancels": {}, "_done": 3}
    assert not _same_checkpoint(None, old)  # the first one is written
    assert _same_checkpoint(old, {**old, "readTimeMs": NOW + 10_000})  # only the read time moved
    assert not _same_checkpoint(old, {**old, "readTimeMs": NOW + READ_TIME_PERSIST_MS})  # moved far
    assert not _same_checkpoint(old, {**old, "_done": 4})  # a timer finished: its state is synced
    assert not _same_checkpoint(old, {**old, "enqueueOffset": 4})
