"""Recovery loses nothing it can still read and says what it could not: each damaged store file,
broker restarted on the damaged copy, compared with the undamaged copy (bench.chaos.files)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.chaos import files
from tidemq.protocol.message_codec import decode_messages
from tidemq.store import GetMessageStatus, MessageStore
from tidemq.store.config import MessageStoreConfig
from tidemq.store.results import MessageExtBrokerInner

CASES = dict(files.cases())
EXPECT = {
    # every config file recovers from its .bak: nothing differs
    **{
        f"{n} {d}": ("intact", None)
        for n in ("consumerOffset.json", "topics.json", "subscriptionGroup.json", "delayOffset.json")
        for d in ("truncated", "corrupted")
    },
    "consumerOffset.json and .bak deleted": ("warned", "committed offsets of groups ga, gb are lost"),
    "topics.json and .bak deleted": ("intact", "re-created"),
    "consume queue deleted": ("intact", "consume queue FA/1 was missing"),
    "consume queue deleted+abort": ("intact", "consume queue FA/1 was missing"),
    "consume queue truncated": ("intact", "consume queue FA/1 was unreadable"),
    "consume queue corrupted": ("intact", "consume queue FA/1 was damaged"),
    "commit-log tail truncated": ("warned", "truncating the tail"),
    "commit-log tail corrupted": ("warned", "truncating the tail"),
    "commit-log segment file truncated": ("warned", "zero-padded"),
    "commit-log middle corrupted": ("warned", "resynchronised on the next valid record"),
    "checkpoint truncated": ("intact", None),
    "checkpoint corrupted": ("intact", None),
}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, files.Snapshot]:
    work = tmp_path_factory.mktemp("recovery")
    base_dir, snap = files.build_baseline(work)
    assert len(snap.messages) == 403 and snap.offsets and snap.delay
    return work, base_dir, snap


def test_every_case_is_covered() -> None:
    assert set(EXPECT) == set(CASES)


@pytest.mark.parametrize("case", sorted(EXPECT))
def test_damaged_store_recovers_or_says_what_was_lost(
    baseline: tuple[Path, Path, files.Snapshot], case: str
) -> None:
    work, base_dir, snap = baseline
    row = files.run_case(base_dir, snap, work, case, CASES[case], seed=7)
    verdict, needle = EXPECT[case]
    assert row["verdict"] == verdict, row
    if needle is not None:
        assert needle in row["first_warning"] or row["warnings"] > 1, row
    if verdict == "warned" and "commit-log" in case:
        lost = int(row["detail"].split()[0])
        assert 1 <= lost <= 3, row  # only the records in the damaged bytes; never everything after
        assert "delay level" not in row["detail"], row  # the delay offsets survive


def test_garbage_consume_queue_entry_does_not_make_a_running_consumer_skip(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Garbage over 3 entries of a live consume queue: a pull over them returns the intact
    messages after them (one WARNING per damaged entry), never nextBeginOffset at the queue's end."""
    cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path / "s"), mapped_file_size_commit_log=1 << 20)
    store = MessageStore(cfg, store_host="127.0.0.1:1")
    store.load()
    try:
        for i in range(90):
            assert store.put_message(MessageExtBrokerInner("T", f"m{i}".encode(), queue_id=0)).is_ok
        cq = store.find_consume_queue("T", 0)
        assert cq is not None
        (cq_path,) = cq.queue.store_path.iterdir()
        with open(cq_path, "r+b") as f:  # what the fault run did: 60 bytes over entries 10..12
            f.seek(10 * 20)
            f.write(random.Random(3).randbytes(60))
        got: list[bytes] = []
        offset = 0
        while offset < 90:
            res = store.get_message("g", "T", 0, offset, 32, None)
            assert res.next_begin_offset > offset
            if res.status is GetMessageStatus.FOUND:
                got += [m.body for m in decode_messages(b"".join(res.message_buffers))]
            offset = res.next_begin_offset
        assert got == [f"m{i}".encode() for i in range(90) if i not in (10, 11, 12)]
        assert sum("is damaged" in r.getMessage() for r in caplog.records) == 3
    finally:
        store.shutdown()
