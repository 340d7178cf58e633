"""First consume-queue files made ahead of need: a pull on a never-written queue makes its first
file in the background; puts then use it, restarts load it, a crash mid-way leaves nothing."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from tests.helpers import wait_for_sync
from tests.unit.store.conftest import StoreFactory, inner
from tidemq.protocol.message_codec import decode_messages
from tidemq.store import GetMessageStatus
from tidemq.store.cq_prepare import ConsumeQueuePreparer, make_first_segment

CQ_FILE = "00000000000000000000"


def queue_dir(tmp_path: Path, topic: str, queue_id: int) -> Path:
    return tmp_path / "store" / "consumequeue" / topic / str(queue_id)


def test_pull_on_a_new_queue_makes_its_first_file_then_puts_and_restarts_use_it(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store()
    res = store.get_message("g", "New", 1, 0, 32, None)
    assert res.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    first = queue_dir(tmp_path, "New", 1) / CQ_FILE
    wait_for_sync(first.exists, 5, "the prepared first file")
    assert first.stat().st_size == 200  # the configured segment size
    assert store.consume_queue_preparer.made == 1
    assert store.find_consume_queue("New", 1) is None  # only the file: the dispatch opens it

    store.put_message(inner("New", b"one", queue_id=1))
    got = store.get_message("g", "New", 1, 0, 32, None)
    assert got.status is GetMessageStatus.FOUND
    assert [m.body for m in decode_messages(b"".join(got.message_buffers))] == [b"one"]
    store.get_message("g", "Idle", 0, 0, 32, None)  # prepared and never written
    wait_for_sync((queue_dir(tmp_path, "Idle", 0) / CQ_FILE).exists, 5, "the idle queue's file")
    store.shutdown()

    with caplog.at_level(logging.WARNING):
        again = open_store()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    got = again.get_message("g", "New", 1, 0, 32, None)
    assert [m.body for m in decode_messages(b"".join(got.message_buffers))] == [b"one"]
    idle = again.get_message("g", "Idle", 0, 0, 32, None)
    assert (idle.status, idle.max_offset) == (GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0)
    again.put_message(inner("Idle", b"later"))
    assert again.get_max_offset_in_queue("Idle", 0) == 1


def test_a_queue_written_before_is_not_prepared(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    store.put_message(inner("T", b"x"))
    store.get_message("g", "T", 0, 1, 32, None)
    store.consume_queue_preparer.shutdown()  # waits for anything asked
    assert store.consume_queue_preparer.made == 0


def test_make_first_segment_never_replaces_a_file(tmp_path: Path) -> None:
    qdir = tmp_path / "T" / "0"
    assert make_first_segment(qdir, 40)
    (qdir / CQ_FILE).write_bytes(b"d" * 40)  # the dispatch wrote entries
    assert not make_first_segment(qdir, 40)
    assert (qdir / CQ_FILE).read_bytes() == b"d" * 40
    assert sorted(p.name for p in qdir.iterdir()) == [CQ_FILE]  # no .tmp left


def test_load_deletes_a_file_left_half_made(open_store: StoreFactory, tmp_path: Path) -> None:
    qdir = queue_dir(tmp_path, "Half", 0)
    qdir.mkdir(parents=True)
    (qdir / (CQ_FILE + ".tmp")).write_bytes(b"")  # a crash between create and link
    store = open_store()
    assert list(qdir.iterdir()) == []
    store.put_message(inner("Half", b"x"))
    assert store.get_max_offset_in_queue("Half", 0) == 1


def test_preparer_after_shutdown_makes_nothing(tmp_path: Path) -> None:
    preparer = ConsumeQueuePreparer(tmp_path, 40)
    preparer.shutdown()
    preparer.prepare("T", 0)
    assert not (tmp_path / "T").exists() and preparer.made == 0


def test_cancel_waits_for_the_file_being_made_and_drops_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic deleted while its first files are being made: what is under way finishes before
    ``cancel`` returns (the store deletes the directory next), nothing asked after it is made."""
    import threading

    from tidemq.store import cq_prepare

    entered, release = threading.Event(), threading.Event()
    real = cq_prepare.make_first_segment

    def slow(queue_dir: Path, size: int) -> bool:
        entered.set()
        assert release.wait(10)
        return real(queue_dir, size)

    monkeypatch.setattr(cq_prepare, "make_first_segment", slow)
    preparer = ConsumeQueuePreparer(tmp_path, 40)
    preparer.prepare("Del", 0)
    preparer.prepare("Del", 1)
    preparer.prepare("Kept", 0)
    assert entered.wait(10)
    cancelled = threading.Event()

    def cancel() -> None:
        preparer.cancel({"Del"})
        cancelled.set()

    canceller = threading.Thread(target=cancel)
    canceller.start()
    assert not cancelled.wait(0.05)  # waits for Del/0 being made
    release.set()
    canceller.join(10)
    assert cancelled.is_set() and (tmp_path / "Del" / "0" / CQ_FILE).exists()
    shutil.rmtree(tmp_path / "Del")  # as the store does right after
    wait_for_sync((tmp_path / "Kept" / "0" / CQ_FILE).exists, 10, "Kept/0, asked after Del/1")
    preparer.shutdown()
    assert not (tmp_path / "Del").exists()  # Del/1 (one worker, in order) was not made after cancel


def test_a_deleted_topic_does_not_come_back_with_a_prepared_file(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.get_message("g", "Gone", 0, 0, 32, None)
    store.delete_topics({"Gone"})
    store.shutdown()
    assert "Gone" not in open_store().consume_queues.topics_and_queues()
    assert not (tmp_path / "store" / "consumequeue" / "Gone").exists()
