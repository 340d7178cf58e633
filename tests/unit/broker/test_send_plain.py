"""The send processor's plain path (no delay, timer, half-message property; not a retry topic)
answers and stores exactly what the general path does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.store.conftest import STORE_HOST, make_config
from tidemq.broker.processor import send as send_module
from tidemq.broker.processor.send import SendMessageProcessor
from tidemq.broker.stats import BrokerStatsManager
from tidemq.protocol.body import TopicConfig
from tidemq.protocol.command import RemotingCommand
from tidemq.store import MessageStore

_PAIR = st.tuples(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "TRAN_MSG", "DELAY", "TIMER_DELAY_SEC", "A"]),
    st.sampled_from(["", "x", "true", "false", "0", "3", "\u00e9t\u00e9"]),
)
_SEND = st.tuples(
    st.sampled_from(["T", "M", "%RETRY%g"]),  # M: a MULTI_TAG topic
    st.lists(_PAIR, max_size=4)
    .filter(lambda pairs: ("TRAN_MSG", "true") not in pairs)  # a half message: tested with transactions
    .map(lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs)),
    st.sampled_from([b"", b"body", b"x" * 700]),  # 700: past max_message_size
    st.integers(-1, 1),
)


def _processor(root: Path) -> SendMessageProcessor:
    store = MessageStore(make_config(root, max_message_size=600), store_host=STORE_HOST)
    store.retention.disk_used_ratio = lambda: 0.0  # type: ignore[method-assign]
    store.load()
    store.clock_ms = lambda: 1_700_000_000_000
    topics = {
        name: TopicConfig(topic_name=name, read_queue_nums=2, write_queue_nums=2)
        for name in ("T", "M", "%RETRY%g")
    }
    topics["M"].topic_filter_type = "MULTI_TAG"
    broker: Any = SimpleNamespace(
        addr=STORE_HOST,
        config=SimpleNamespace(
            is_writeable=True,
            is_slave=False,
            broker_cluster_name="DefaultCluster",
            region_id="DefaultRegion",
            broker_name="broker-a",
            trace_on=True,
        ),
        store_config=store.config,
        store=store,
        topic_config_manager=SimpleNamespace(select_topic_config=topics.get),
        subscription_group_manager=SimpleNamespace(
            find_subscription_group_config=lambda group: SimpleNamespace(retry_max_times=16)
        ),
        broker_stats=BrokerStatsManager(),
        group_commit_service=None,
        ha=None,
    )
    processor = SendMessageProcessor(broker)
    processor._rng.seed(7)
    return processor


def _request(topic: str, text: str, body: bytes, queue_id: int) -> RemotingCommand:
    ext = {
        "a": "pg",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": "1700000000123",
        "h": "0",
        "i": text,
        "j": "0",
    }
    return RemotingCommand(310, ext_fields=ext, body=body, opaque=1)


def _answer(processor: SendMessageProcessor, request: RemotingCommand) -> tuple[Any, ...]:
    channel: Any = SimpleNamespace(remote_addr="10.0.0.1:5000")
    response = asyncio.run(processor.process_request(channel, request))
    assert response is not None
    return response.code, response.remark, response.ext_fields, response.flag


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_SEND, min_size=1, max_size=8))
def test_plain_sends_answer_and_store_as_the_general_path(
    tmp_path_factory: pytest.TempPathFactory, sends: list[Any]
) -> None:
    root = tmp_path_factory.mktemp("send")
    plain, general = _processor(root / "plain"), _processor(root / "general")
    mp, clock = pytest.MonkeyPatch(), pytest.MonkeyPatch()
    clock.setattr(send_module, "now_ms", lambda: 1_700_000_000_000)  # timer messages: the same due time
    try:
        for send in sends:
            a = _answer(plain, _request(*send))
            mp.setattr(send_module, "_NOT_PLAIN", frozenset({"CLUSTER"}))  # every send: general path
            b = _answer(general, _request(*send))
            mp.undo()
            assert a == b
        stores = plain.broker.store, general.broker.store
        end = stores[0].commit_log.get_max_offset()
        assert end == stores[1].commit_log.get_max_offset()
        assert stores[0].commit_log.get_message(0, end) == stores[1].commit_log.get_message(0, end)
        stats = [s.broker.broker_stats.put_total for s in (plain, general)]
        assert stats[0] == stats[1]
    finally:
        mp.undo()
        clock.undo()
        for store in (plain.broker.store, general.broker.store):
            store.shutdown()
