"""The key index: lookups by UNIQ_KEY / KEYS token and time range, rolls, restart, crash, retention."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.store.conftest import StoreFactory, inner
from tidemq.protocol.message import MessageConst
from tidemq.protocol.message_codec import MessageSysFlag, decode_messages
from tidemq.store import MessageExtBrokerInner, MessageStore
from tidemq.store.index import IndexService, build_key, index_keys, key_hash, record_has_key

SMALL = {"max_hash_slot_num": 8, "max_index_num": 16}
FOREVER = (0, 2**62)


def keyed(i: int, topic: str = "T", keys: str | None = None, **kw: Any) -> MessageExtBrokerInner:
    props = {MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"UNIQ{i:04d}"}
    props[MessageConst.PROPERTY_KEYS] = keys if keys is not None else f"order-{i} user-{i % 3}"
    return inner(topic, f"body-{i}".encode(), properties=props, **kw)


def put(store: MessageStore, *msgs: MessageExtBrokerInner) -> None:
    for m in msgs:
        assert store.put_message(m).is_ok


def found(
    store: MessageStore, topic: str, key: str, max_num: int = 32, span: tuple[int, int] = FOREVER
) -> list[bytes]:
    res = store.lookup.query_message(topic, key, max_num, *span)
    return [m.body for m in decode_messages(b"".join(res.message_buffers))]


def crash(store: MessageStore) -> None:
    """Drop the store as a killed process would: files keep what was written, nothing is flushed."""
    store.running = False
    store.lock.release()  # the kernel drops a dead process's flock
    store.commit_log.close()
    for cq in store.consume_queue_table.values():
        cq.close()
    assert store.index_service is not None
    for f in store.index_service.files:
        f._unmap()  # no header write: the header on disk is the one of the last flush


def test_keys_of_a_message() -> None:
    props = {"UNIQ_KEY": "U1", "KEYS": "a  b c", "TAGS": "t"}
    assert index_keys(props) == ["U1", "a", "b", "c"]
    assert index_keys({}) == []
    assert build_key("T", "k") == "T#k"


@given(st.text(max_size=20), st.text(max_size=20))
def test_incremental_hash_matches_whole_key_hash(topic: str, key: str) -> None:
    import zlib

    prefix = zlib.crc32(f"{topic}#".encode("utf-8", "surrogatepass"))
    assert zlib.crc32(key.encode("utf-8", "surrogatepass"), prefix) == key_hash(build_key(topic, key))


def test_query_by_unique_key_and_by_each_key_token(open_store: StoreFactory) -> None:
    store = open_store()
    put(store, *(keyed(i) for i in range(10)))
    assert found(store, "T", "UNIQ0007") == [b"body-7"]
    assert found(store, "T", "order-3") == [b"body-3"]
    assert found(store, "T", "user-1") == [b"body-1", b"body-4", b"body-7"]  # commit-log order
    assert found(store, "T", "user-1", max_num=2) == [b"body-4", b"body-7"]  # the newest ones
    assert found(store, "T", "nope") == []
    assert found(store, "Other", "order-3") == []  # the topic is part of the key


def test_query_time_range_and_index_state(open_store: StoreFactory) -> None:
    store = open_store()
    now = [1_000_000]
    store.clock_ms = lambda: now[0]
    for i in range(6):
        now[0] = 1_000_000 + i * 1000
        put(store, keyed(i, keys="same"))
    assert found(store, "T", "same", span=(1_002_000, 1_004_000)) == [b"body-2", b"body-3", b"body-4"]
    assert found(store, "T", "same", span=(2_000_000, 3_000_000)) == []
    res = store.lookup.query_message("T", "same", 32, *FOREVER)
    assert res.index_last_update_timestamp == 1_005_000
    assert res.index_last_update_phyoffset == store.get_max_phy_offset()


def test_batches_rolled_back_and_records_without_keys(open_store: StoreFactory) -> None:
    store = open_store()
    batch = [keyed(i, queue_id=1) for i in range(5)]
    assert store.put_messages(batch).is_ok
    put(store, inner("T", b"plain"))
    put(store, keyed(9, sys_flag=MessageSysFlag.TRANSACTION_ROLLBACK_TYPE))
    assert found(store, "T", "order-2") == [b"body-2"]
    assert found(store, "T", "UNIQ0009") == []  # rolled back: not indexed (as RocketMQ)
    assert store.index_service is not None
    assert store.index_service.end_phy_offset == store.get_max_phy_offset()


def test_rolls_to_new_index_files_and_finds_across_them(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store(**SMALL)
    put(store, *(keyed(i) for i in range(40)))  # 3 keys each, 16 entries per file
    assert len(os.listdir(tmp_path / "store" / "index")) >= 7
    assert found(store, "T", "user-2", max_num=64) == [f"body-{i}".encode() for i in range(2, 40, 3)]
    assert all(found(store, "T", f"UNIQ{i:04d}") == [f"body-{i}".encode()] for i in range(40))


def test_hash_collisions_never_answer_another_key(open_store: StoreFactory) -> None:
    store = open_store(max_hash_slot_num=1, max_index_num=1000)  # one slot: every key collides
    put(store, *(keyed(i) for i in range(30)))
    assert found(store, "T", "order-17") == [b"body-17"]
    assert found(store, "T", "user-0", max_num=3) == [b"body-21", b"body-24", b"body-27"]


def test_survives_clean_restart(open_store: StoreFactory) -> None:
    store = open_store(**SMALL)
    put(store, *(keyed(i) for i in range(20)))
    store.shutdown()
    again = open_store(**SMALL)
    assert found(again, "T", "order-13") == [b"body-13"]
    put(again, keyed(20))
    assert found(again, "T", "UNIQ0020") == [b"body-20"]
    assert len(found(again, "T", "user-2", max_num=64)) == 7


def test_rebuilt_after_a_crash(open_store: StoreFactory) -> None:
    store = open_store(**SMALL)
    put(store, *(keyed(i) for i in range(10)))
    store.flush_consume_queue()  # checkpoint: index durable up to here
    put(store, *(keyed(i) for i in range(10, 25)))
    crash(store)
    again = open_store(**SMALL)
    assert again.recovered_abnormally
    for i in (3, 12, 24):
        assert found(again, "T", f"UNIQ{i:04d}") == [f"body-{i}".encode()]
    assert found(again, "T", "user-0", max_num=64) == [f"body-{i}".encode() for i in range(0, 25, 3)]
    put(again, keyed(25))
    assert found(again, "T", "order-25") == [b"body-25"]


def test_rebuilt_when_the_index_directory_is_lost(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    put(store, *(keyed(i) for i in range(12)))
    store.shutdown()
    for f in (tmp_path / "store" / "index").iterdir():
        f.unlink()
    again = open_store()
    assert found(again, "T", "order-11") == [b"body-11"]
    assert len(found(again, "T", "user-1")) == 4


def test_retention_drops_index_files_below_the_commit_log(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store(**SMALL)
    put(store, *(keyed(i) for i in range(120)))
    index_dir = tmp_path / "store" / "index"
    before = len(os.listdir(index_dir))
    store.retention.delete_expired_files(now_ms=store.clock_ms() + 73 * 3600 * 1000)
    after = len(os.listdir(index_dir))
    assert 1 <= after < before
    assert found(store, "T", "UNIQ0000") == []  # its segment is gone
    assert found(store, "T", "UNIQ0119") == [b"body-119"]


def test_disabled_index(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store(message_index_enable=False)
    put(store, keyed(1))
    assert store.index_service is None
    assert found(store, "T", "UNIQ0001") == []
    assert not (tmp_path / "store" / "index").exists()


def test_record_has_key() -> None:
    from tidemq.protocol.message_codec import encode_stored_message

    record = encode_stored_message(
        topic="T",
        body=b"x",
        properties="KEYS\x01a b\x02UNIQ_KEY\x01U\x02",
        queue_id=0,
        flag=0,
        sys_flag=0,
        born_timestamp=1,
        born_host="127.0.0.1:1",
        store_host="127.0.0.1:2",
        reconsume_times=0,
        prepared_transaction_offset=0,
    )
    assert record_has_key(record, "T", "b") and record_has_key(record, "T", "U")
    assert not record_has_key(record, "T", "c") and not record_has_key(record, "X", "a")
    assert not record_has_key(b"garbage", "T", "a")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=60))
def test_index_answers_like_a_dict(ops: list[tuple[int, int]]) -> None:
    """Property: for any sequence of puts, each key's hits are exactly the records carrying it."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        service = IndexService(Path(d), max_hash_slot_num=3, max_index_num=7, max_msgs_num_batch=1000)
        service.load(True, 0)
        expect: dict[str, list[int]] = {}
        for n, (k, t) in enumerate(ops):
            phy = n * 100
            service.build_index(phy, 100, "T", {"KEYS": f"k{k}"}, 0, 1000 + t + n)
            expect.setdefault(f"k{k}", []).append(phy)
        for key, phys in expect.items():
            hits = service.query_offset("T", key, 1000, 0, 2**62).phy_offsets
            # a colliding hash may add candidates; every real one must be there, newest first
            assert [p for p in hits if p in phys] == sorted(phys, reverse=True)
        service.shutdown()


def _mapped_rss_kb(path: Path) -> int:
    """Resident KiB of this process's mappings of ``path`` (``/proc/self/smaps``)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
            inside = head[-1] == str(path)
        elif inside and head[0] == "Rss:":
            total += int(head[1])
    return total


def test_written_slot_and_entry_pages_leave_rss_after_write_back(tmp_path: Path) -> None:
    """Random keys touch every page of the hash-slot table; after a write-back (flush) those pages
    leave the process's resident set, and every key is still found (data in the page cache/file)."""
    import mmap as _mmap

    import pytest

    if not Path("/proc/self/smaps").exists() or not hasattr(_mmap, "MADV_DONTNEED"):
        pytest.skip("needs Linux /proc/self/smaps and MADV_DONTNEED")
    service = IndexService(tmp_path, max_hash_slot_num=262_144, max_index_num=40_000, max_msgs_num_batch=64)
    service.load(True, 0)
    for n in range(20_000):
        service.build_index(n * 100, 100, "T", {"KEYS": f"key-{n}"}, 0, 1000 + n)
    path = service.files[-1].path
    before = _mapped_rss_kb(path)
    assert before >= 900  # most of the 1 MiB slot table and the 480 KB of entries are resident
    service.flush(force=True)
    after = _mapped_rss_kb(path)
    assert after <= 16, (before, after)
    for n in (0, 7_777, 19_999):
        assert n * 100 in service.query_offset("T", f"key-{n}", 64, 0, 2**62).phy_offsets
    service.shutdown()
