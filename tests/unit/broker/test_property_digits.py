"""Numeric properties a client sets (``DELAY``, ``TIMER_OUT_MS``, ``TRANSACTION_CHECK_TIMES``,
``TRAN_PREPARED_QUEUE_OFFSET``): a non-ASCII digit such as ``"²"`` passes ``str.isdigit`` but not
``int()``; it must be read as "not a number", never raise (a raise failed the send with a traceback,
stopped the store's dispatch, and failed every transaction check pass from that record on)."""

from __future__ import annotations

import pytest

from tidemq.broker.timer_service import transform_timer_message
from tidemq.broker.transaction.bridge import check_times, origin_of
from tidemq.protocol.message import MessageExt
from tidemq.protocol.topic import TIMER_TOPIC
from tidemq.store import MessageStoreConfig
from tidemq.store.dispatcher import CommitLogDispatcher
from tidemq.store.results import MessageExtBrokerInner

ODD = ["²", "٣", "1²"]


@pytest.mark.parametrize("value", ODD)
def test_a_delay_level_that_is_no_number_is_no_level(value: str) -> None:
    inner = MessageExtBrokerInner("Real", b"x", properties={"DELAY": value})
    cfg = MessageStoreConfig(store_path_root_dir="/nonexistent")
    assert transform_timer_message(inner, cfg, 1_800_000_000_000) is None
    assert inner.topic == "Real"


@pytest.mark.parametrize("value", ODD)
def test_transaction_numbers_that_are_no_numbers(value: str) -> None:
    half = MessageExt("T", b"x", queue_offset=7)
    half.properties.update(TRANSACTION_CHECK_TIMES=value, TRAN_PREPARED_QUEUE_OFFSET=value)
    assert (check_times(half), origin_of(half)) == (0, 7)
    half.properties.update(TRANSACTION_CHECK_TIMES="3", TRAN_PREPARED_QUEUE_OFFSET="5")
    assert (check_times(half), origin_of(half)) == (3, 5)


@pytest.mark.parametrize("value", ODD)
def test_a_timer_topic_record_with_an_odd_due_time_is_due_at_once(value: str) -> None:
    dispatcher = CommitLogDispatcher(lambda topic, qid: None, None, {})  # type: ignore[arg-type,return-value]
    assert dispatcher.tags_code(TIMER_TOPIC, f"TIMER_OUT_MS\x01{value}\x02", 123) == 123


def test_a_half_record_drops_the_producers_prepared_queue_offset() -> None:
    """TRAN_PREPARED_QUEUE_OFFSET names the transaction a half record belongs to: kept from the
    producer, it made this record's END decide (and drop) the transaction at that half offset."""
    from tidemq.broker.transaction.bridge import half_properties_text
    from tidemq.protocol.message import string_to_properties

    for text in (
        "TRAN_PREPARED_QUEUE_OFFSET\x010\x02a\x01b\x02",
        "a\x01b\x02TRAN_PREPARED_QUEUE_OFFSET\x010",
    ):
        props = string_to_properties(half_properties_text(text, "Real", 2))
        assert props == {"a": "b", "REAL_TOPIC": "Real", "REAL_QID": "2"}
        half = MessageExt("RMQ_SYS_TRANS_HALF_TOPIC", b"x", properties=props, queue_offset=9)
        assert origin_of(half) == 9
    assert half_properties_text("a\x01b\x02", "Real", 2) == "a\x01b\x02REAL_TOPIC\x01Real\x02REAL_QID\x012"
