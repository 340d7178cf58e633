"""One process per store: a second broker on the same store directory refuses to start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tidemq.serve_process import serve_command
from tidemq.store import MessageStore
from tidemq.store.config import MessageStoreConfig
from tidemq.store.lock import StoreLock, StoreLockedError
from tidemq.testing import ServeProcess, run_cluster


def test_second_serve_on_the_same_store_exits_with_one_line(tmp_path: Path) -> None:
    """`tidemq serve` twice on one store: the second exits 1 at once, one stderr line naming the
    store and the first one's pid; the first keeps its abort file and keeps serving."""
    store = tmp_path / "store"
    with ServeProcess(store) as first:
        second = subprocess.run(
            serve_command(store, host="127.0.0.1"), capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 1
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert str(store) in lines[0] and f"pid {first.pid}" in lines[0], lines[0]
        assert second.stdout == ""  # never printed a ready line
        assert (store / "abort").exists()  # the holder's abort file is untouched
        assert first.proc is not None and first.proc.poll() is None
        assert first.stop() == 0
    assert not (store / "abort").exists()
    # and once the holder has stopped, the store can be used again
    with ServeProcess(store):
        pass


async def test_second_broker_in_process_is_refused(tmp_path: Path) -> None:
    """Two brokers of one process on one store: the second start raises StoreLockedError."""
    from tidemq.broker.broker import Broker
    from tidemq.testing import make_broker_configs

    async with run_cluster(tmp_path) as cluster:
        bc, sc = make_broker_configs(tmp_path / "store", cluster.namesrv_addr)
        other = Broker(bc, sc)
        with pytest.raises(StoreLockedError, match="in use"):
            await other.start()
        await other.shutdown()
        assert (tmp_path / "store" / "abort").exists()
        assert cluster.broker.store.running


def test_lock_is_dropped_when_the_holder_dies(tmp_path: Path) -> None:
    """A SIGKILLed holder leaves no stale lock (the kernel drops flocks of dead processes)."""
    root = tmp_path / "store"
    code = (
        "import sys, time; from tidemq.store.lock import StoreLock; "
        f"StoreLock({str(root)!r}).acquire(); print('locked', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLockedError, match=f"pid {proc.pid}"):
            StoreLock(root).acquire()
    finally:
        proc.kill()
        proc.wait()
    lock = StoreLock(root)
    lock.acquire()
    assert lock.holder_pid() == os.getpid()
    lock.release()


def test_message_store_holds_the_lock_until_shutdown(tmp_path: Path) -> None:
    cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path / "s"), mapped_file_size_commit_log=1 << 16)
    store = MessageStore(cfg, store_host="127.0.0.1:1")
    store.load()
    with pytest.raises(StoreLockedError):
        MessageStore(cfg, store_host="127.0.0.1:1").load()
    store.shutdown()
    again = MessageStore(cfg, store_host="127.0.0.1:1")
    again.load()
    again.shutdown()
