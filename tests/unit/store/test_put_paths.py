"""The single-message put (every single send) and the general put path store the same thing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.store.conftest import STORE_HOST, make_config
from tidemq.protocol.message_codec import MessageSysFlag
from tidemq.store import MessageStore
from tidemq.store.dispatcher import PutRecords
from tidemq.store.results import MessageExtBatch

_KEY = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "A", "\u00e9t\u00e9"])
_PROPS = st.lists(  # no lone surrogates: both paths raise the same UnicodeEncodeError on those
    st.tuples(
        _KEY,
        st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=8),
    ),
    max_size=4,
)
_MESSAGE = st.tuples(
    st.sampled_from(["T", "U", "x" * 128]),  # a topic longer than 127 bytes is refused
    st.integers(0, 2),
    st.sampled_from(
        [0, MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE, 0x10]
    ),
    st.binary(max_size=600),  # a record past max_message_size is refused
    _PROPS,
    st.integers(0, 3),
)


def _open(root: Path) -> tuple[MessageStore, list[Any]]:
    store = MessageStore(make_config(root, max_message_size=700), store_host=STORE_HOST)
    store.retention.disk_used_ratio = lambda: 0.0  # type: ignore[method-assign]
    store.load()
    store.clock_ms = lambda: 1_700_000_000_000
    heard: list[Any] = []
    store.message_put_listener = heard.append
    store.message_arriving_listener = lambda *arrival: heard.append(arrival)
    return store, heard


@settings(max_examples=27, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_MESSAGE, min_size=1, max_size=12))
def test_single_put_stores_what_the_general_path_stores(tmp_path_factory: Any, messages: list[Any]) -> None:
    """Commit-log bytes, results, consume queues, put and arrival listeners: all the same (the
    one-message batch, the message given field by field, and the general path)."""
    root = tmp_path_factory.mktemp("puts")
    one, heard_one = _open(root / "one")
    general, heard_general = _open(root / "general")
    single, heard_single = _open(root / "single")
    drains: list[Any] = []
    single.dispatcher.schedule = drains.append  # dispatched after the puts, as the broker does
    try:
        for topic, queue_id, sys_flag, body, pairs, flag in messages:
            text = "\x02".join(f"{k}\x01{v}" for k, v in pairs)

            args = (topic, queue_id, sys_flag, 1234, "10.0.0.1:5000", 1)

            a = one.put_message_batch(MessageExtBatch(*args, flags=[flag], bodies=[body], properties=[text]))
            b = general._put._put_batches(  # the general path, as a put of several batches takes
                [MessageExtBatch(*args, flags=[flag], bodies=[body], properties=[text])]
            )
            assert a == b  # status, remark and every field of the append result
            assert single.put_message_single(*args, flag, body, text) == b
        single.dispatch_pending()
        assert len(drains) <= 1
        end = one.commit_log.get_max_offset()
        assert end == general.commit_log.get_max_offset()
        assert one.commit_log.get_message(0, end) == general.commit_log.get_message(0, end)
        assert heard_one == heard_general
        for kind in (tuple, PutRecords):  # arrivals are told after the dispatch: compared by kind
            assert [h for h in heard_single if type(h) is kind] == [h for h in heard_one if type(h) is kind]
        assert single.commit_log.get_message(0, end) == general.commit_log.get_message(0, end)
        assert [type(h) for h in heard_one] == [type(h) for h in heard_general]  # PutRecords or arrivals
        for key in set(one.consume_queue_table) | set(general.consume_queue_table):
            assert one.get_max_offset_in_queue(*key) == general.get_max_offset_in_queue(*key)
            cq_a, cq_b = one.find_consume_queue(*key), general.find_consume_queue(*key)
            assert cq_a is not None and cq_b is not None
            n = cq_a.get_max_offset_in_queue()
            assert [cq_a.get_unit(i) for i in range(n)] == [cq_b.get_unit(i) for i in range(n)]
        _same_index(one, general, messages)
        _same_index(single, general, messages)
    finally:
        one.shutdown()
        general.shutdown()
        single.shutdown()


def _same_index(a: MessageStore, b: MessageStore, messages: list[Any]) -> None:
    """Every key of the messages finds the same records in both stores' indexes."""
    assert a.index_service is not None and b.index_service is not None
    for topic, _, _, _, pairs, _ in messages:
        for key in {v for k, v in pairs if k in ("UNIQ_KEY", "KEYS")}:
            found = [s.index_service.query_offset(topic, key, 64, 0, 2**62).phy_offsets for s in (a, b)]
            assert found[0] == found[1]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.sampled_from(["T", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer"]), _PROPS), max_size=6
    )
)
def test_one_record_dispatch_gives_each_entry_its_tags_code(tmp_path_factory: Any, puts: list[Any]) -> None:
    """The one-record dispatch (every single send) writes the tag code the dispatcher's rule gives:
    TAGS's hash, 0 without TAGS, a due time for the schedule and timer topics."""
    store, _ = _open(tmp_path_factory.mktemp("tags"))
    try:
        for topic, pairs in puts:
            text = "\x02".join(f"{k}\x01{v}" for k, v in pairs)
            result = store.put_message_single(topic, 0, 0, 1234, "10.0.0.1:5000", 0, 0, b"b", text)
            assert result.append_result is not None
            store.dispatch_pending()
            cq = store.find_consume_queue(topic, 0)
            assert cq is not None
            unit = cq.get_unit(result.append_result.logics_offset)
            assert unit is not None
            assert unit.tags_code == store.dispatcher.tags_code(topic, text, 1_700_000_000_000)
    finally:
        store.shutdown()
