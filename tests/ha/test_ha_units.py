"""Pure parts of replication: GroupTransferService waiters, the slave's append + dispatch."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.unit.store.conftest import STORE_HOST, inner, make_config
from tidemq.store import MessageStore
from tidemq.store.ha import GroupTransferService, SlaveCommitLogAppender


async def test_group_transfer_releases_waiters_in_offset_order() -> None:
    gts = GroupTransferService()
    low = asyncio.create_task(gts.wait(100, 5.0))
    high = asyncio.create_task(gts.wait(300, 5.0))
    gts.notify_transfer_some(150)
    assert await low is True
    assert not high.done()
    gts.notify_transfer_some(300)
    assert await high is True
    assert await gts.wait(200, 0.01) is True  # already acknowledged: no wait
    assert await gts.wait(400, 0.05) is False  # never acknowledged: timed out


def open_store(root: Path) -> MessageStore:
    store = MessageStore(make_config(root, mapped_file_size_commit_log=64 * 1024), store_host=STORE_HOST)
    store.load()
    return store


def test_slave_appender_dispatches_complete_records_only(tmp_path: Path) -> None:
    master, slave = open_store(tmp_path / "m"), open_store(tmp_path / "s")
    try:
        for i in range(3):
            master.put_message(inner("T", f"body-{i}".encode(), queue_id=1, tags="a"))
        data = master.commit_log.get_message(0, master.get_max_phy_offset())
        assert data is not None
        appender = SlaveCommitLogAppender(slave)
        arrived: list[tuple[str, int, int]] = []
        slave.message_arriving_listener = lambda topic, qid, max_q, tags, ts: arrived.append(
            (topic, qid, max_q)
        )
        cut = len(data) - 10  # the third record arrives in two pieces
        assert appender.append(0, data[:cut])
        assert slave.get_max_offset_in_queue("T", 1) == 2
        assert arrived == [("T", 1, 2)]
        assert not appender.append(cut + 1, data[cut + 1 :])  # a gap: refused, nothing written
        assert slave.get_max_phy_offset() == cut
        assert appender.append(cut, data[cut:])
        assert slave.get_max_offset_in_queue("T", 1) == 3
        assert arrived[-1] == ("T", 1, 3)
        mine = slave.get_message("g", "T", 1, 0, 32, None).message_buffers
        assert mine == master.get_message("g", "T", 1, 0, 32, None).message_buffers
    finally:
        master.shutdown()
        slave.shutdown()


def test_slave_mode_store_refuses_puts(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    try:
        store.slave_mode = True
        assert store.put_message(inner("T", b"x")).status.name == "SERVICE_NOT_AVAILABLE"
        assert store.get_max_phy_offset() == 0
    finally:
        store.shutdown()
