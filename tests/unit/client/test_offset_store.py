"""Offset stores: remote error mapping and persistence; local file atomicity, .bak fallback, no silent reset."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidemq.client.consumer.offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from tidemq.errors import BrokerError, ClientError, RemotingTimeoutError
from tidemq.protocol.message import MessageQueue

MQ0, MQ1 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)


class FakeBackend:
    def __init__(self) -> None:
        self.stored: dict[MessageQueue, int] = {MQ0: 5}
        self.updates: list[tuple[MessageQueue, int, bool]] = []
        self.fail_with: Exception | None = None

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int:
        if self.fail_with:
            raise self.fail_with
        if mq not in self.stored:
            raise BrokerError.for_code(22, "Not found")
        return self.stored[mq]

    async def update_consumer_offset(
        self, group: str, mq: MessageQueue, offset: int, *, oneway: bool
    ) -> None:
        self.updates.append((mq, offset, oneway))


async def test_remote_store_maps_errors_and_persists_owned_queues() -> None:
    """Stored -> offset, QUERY_NOT_FOUND -> -1, transport error -> -2; persist_all sends owned, forgets others."""
    backend = FakeBackend()
    store = RemoteBrokerOffsetStore(backend, "G")
    assert await store.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE) == 5
    assert await store.read_offset(MQ1, ReadOffsetType.READ_FROM_STORE) == -1
    backend.fail_with = RemotingTimeoutError("slow")
    assert await store.read_offset(MQ1, ReadOffsetType.READ_FROM_STORE) == -2
    assert await store.read_offset(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 5
    store.update_offset(MQ0, 9, increase_only=True)
    store.update_offset(MQ0, 7, increase_only=True)
    store.update_offset(MQ1, 3, increase_only=False)
    await store.persist_all([MQ0])
    assert backend.updates == [(MQ0, 9, True)]
    assert MQ1 not in store.offset_table
    await store.persist(MQ0)
    assert backend.updates[-1] == (MQ0, 9, False)


async def test_local_store_round_trip_and_bak(tmp_path: Path) -> None:
    """Offsets survive a reload; a corrupt main file falls back to the .bak copy."""
    store = LocalFileOffsetStore(tmp_path, "1.2.3.4@DEFAULT", "G")
    store.update_offset(MQ0, 10, False)
    await store.persist_all([MQ0])
    store.update_offset(MQ0, 20, False)
    store.update_offset(MQ1, 2, False)
    await store.persist_all([MQ0, MQ1])
    assert store.path == tmp_path / "1.2.3.4@DEFAULT" / "G" / "offsets.json"
    fresh = LocalFileOffsetStore(tmp_path, "1.2.3.4@DEFAULT", "G")
    await fresh.load()
    assert fresh.offset_table == {MQ0: 20, MQ1: 2}
    store.path.write_text("{not json")
    fallback = LocalFileOffsetStore(tmp_path, "1.2.3.4@DEFAULT", "G")
    await fallback.load()
    assert fallback.offset_table == {MQ0: 10}


async def test_local_store_both_corrupt_is_a_clear_error(tmp_path: Path) -> None:
    """Both files unreadable -> ClientError naming them, never an empty table."""
    store = LocalFileOffsetStore(tmp_path, "cid", "G")
    store.path.parent.mkdir(parents=True)
    store.path.write_text("garbage")
    store.path.with_name("offsets.json.bak").write_text("garbage too")
    with pytest.raises(ClientError, match=r"offsets\.json"):
        await store.load()
    empty = LocalFileOffsetStore(tmp_path, "other", "G")
    await empty.load()
    assert empty.offset_table == {}
    assert await empty.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE) == -1
