"""The index skips the transaction service's half and op records (it finds them by offset): one
entry per transaction, the committed message's."""

from __future__ import annotations

from tests.unit.store.conftest import StoreFactory
from tests.unit.store.test_index import found, keyed, put


def test_half_and_op_records_are_not_indexed(open_store: StoreFactory) -> None:
    store = open_store()
    assert store.index_service is not None
    put(
        store,
        keyed(1, topic="RMQ_SYS_TRANS_HALF_TOPIC"),
        keyed(2, topic="RMQ_SYS_TRANS_OP_HALF_TOPIC"),
        keyed(3, topic="TRANS_CHECK_MAX_TIME_TOPIC"),  # discarded halves stay findable by key
        keyed(4, topic="T"),
    )
    files = store.index_service.files
    assert sum(f.index_count for f in files) == 2 * 3  # UNIQ_KEY + two KEYS tokens, twice
    assert found(store, "RMQ_SYS_TRANS_HALF_TOPIC", "UNIQ0001") == []
    assert found(store, "RMQ_SYS_TRANS_OP_HALF_TOPIC", "order-2") == []
    assert found(store, "TRANS_CHECK_MAX_TIME_TOPIC", "UNIQ0003") == [b"body-3"]
    assert found(store, "T", "UNIQ0004") == [b"body-4"]
    assert files[-1].end_phy_offset == store.get_max_phy_offset()  # skipped records still covered
