"""Broker building blocks on their own: broker.conf loading, managers, group commit, long-poll hold."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import wait_for
from tidemq.broker.config import BrokerConfig, camel_to_snake, load_broker_conf, parse_properties
from tidemq.broker.flush import GroupCommitService
from tidemq.broker.longpolling import HeldPullRequest, PullRequestHoldService
from tidemq.broker.offset_manager import ConsumerOffsetManager
from tidemq.broker.topic_config import TopicConfigManager
from tidemq.errors import ClientError, StoreError
from tidemq.protocol.command import RemotingCommand


def test_load_broker_conf_camel_case(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A RocketMQ broker.conf fills BrokerConfig and MessageStoreConfig; unknown keys are warned."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# RocketMQ sample\n"
        "brokerClusterName = DefaultCluster\n"
        "brokerName=broker-b\n"
        "brokerId=0\n"
        "deleteWhen=04\n"
        "fileReservedTime=48\n"
        "brokerRole=ASYNC_MASTER\n"
        "flushDiskType=SYNC_FLUSH\n"
        "listenPort: 10921\n"
        "namesrvAddr=10.0.0.1:9876;10.0.0.2:9876\n"
        "brokerIP1=10.0.0.7\n"
        "storePathRootDir=/data/rmq\n"
        "mappedFileSizeCommitLog=1048576\n"
        "autoCreateTopicEnable=false\n"
        "someFutureKey=1\n"
    )
    bc, sc = load_broker_conf(conf)
    assert (bc.broker_name, bc.listen_port, bc.broker_ip1) == ("broker-b", 10921, "10.0.0.7")
    assert bc.namesrv_addr_list() == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert bc.auto_create_topic_enable is False
    assert (sc.flush_disk_type, sc.file_reserved_time, sc.delete_when) == ("SYNC_FLUSH", 48, "04")
    assert sc.store_path_root_dir == "/data/rmq" and sc.mapped_file_size_commit_log == 1048576
    assert "someFutureKey" in caplog.text


def test_load_broker_conf_bad_value(tmp_path: Path) -> None:
    """A value that does not parse names the key."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=abc\n")
    with pytest.raises(ClientError, match="listenPort"):
        load_broker_conf(conf)


@pytest.mark.parametrize(
    ("camel", "snake"),
    [
        ("brokerIP1", "broker_ip1"),
        ("listenPort", "listen_port"),
        ("mappedFileSizeCommitLog", "mapped_file_size_commit_log"),
    ],
)
def test_camel_to_snake(camel: str, snake: str) -> None:
    """broker.conf keys map to RocketMQ's snake_case names."""
    assert camel_to_snake(camel) == snake


@given(
    st.dictionaries(
        st.from_regex(r"[a-zA-Z][a-zA-Z0-9.]{0,12}", fullmatch=True),
        st.from_regex(r"[a-zA-Z0-9;:./]{0,20}", fullmatch=True),
    )
)
def test_parse_properties_roundtrip(props: dict[str, str]) -> None:
    """key=value lines parse back to the same mapping."""
    text = "\n".join(f"{k}={v}" for k, v in props.items())
    assert parse_properties(text) == props


def test_topic_config_manager_builtins_and_auto_create(tmp_path: Path) -> None:
    """Built-in topics exist; auto-create from TBW102 caps the queues and strips INHERIT; persisted."""
    changes: list[int] = []
    tcm = TopicConfigManager(BrokerConfig(broker_name="b1"), tmp_path / "topics.json")
    tcm.on_change = lambda: changes.append(1)
    tbw = tcm.select_topic_config("TBW102")
    assert tbw is not None and tbw.perm == 7 and tbw.write_queue_nums == 8
    sched = tcm.select_topic_config("SCHEDULE_TOPIC_XXXX")
    assert sched is not None and sched.read_queue_nums == 18
    assert tcm.select_topic_config("b1") is not None and tcm.select_topic_config("DefaultCluster") is not None
    tc = tcm.create_topic_in_send_message_method("New", "TBW102", "1.2.3.4:5", 16, 0)
    assert tc is not None and (tc.write_queue_nums, tc.perm) == (8, 6)
    assert tcm.create_topic_in_send_message_method("Other", "New", "1.2.3.4:5", 4, 0) is None  # no INHERIT
    assert changes == [1]
    saved = orjson.loads((tmp_path / "topics.json").read_bytes())
    assert saved["topicConfigTable"]["New"]["writeQueueNums"] == 8
    assert saved["dataVersion"]["counter"] == 1
    again = TopicConfigManager(BrokerConfig(broker_name="b1"), tmp_path / "topics.json")
    again.load()
    assert again.select_topic_config("New") == tc


def test_offset_manager_persist_load_and_bak(tmp_path: Path) -> None:
    """Offsets round-trip through consumerOffset.json; fastjson's unquoted keys load; both corrupt -> error."""
    path = tmp_path / "consumerOffset.json"
    m = ConsumerOffsetManager(path)
    assert m.query_offset("G", "T", 0) == -1
    m.commit_offset("c", "G", "T", 0, 5)
    m.commit_offset("c", "G", "T", 3, 9)
    assert m.persist(force=False) is True
    assert m.persist(force=False) is False  # nothing changed
    assert orjson.loads(path.read_bytes())["offsetTable"] == {"T@G": {"0": 5, "3": 9}}
    m.commit_offset("c", "G", "T", 0, 7)  # the next persist appends T@G to the journal
    assert m.persist(force=False) is True
    assert orjson.loads(path.read_bytes())["offsetTable"]["T@G"]["0"] == 5
    again = ConsumerOffsetManager(path)
    again.load()
    assert again.query_offset("G", "T", 0) == 7 and again.query_offset("G", "T", 3) == 9
    m.persist()  # whole file, journal emptied
    assert orjson.loads(path.read_bytes())["offsetTable"]["T@G"]["0"] == 7 and m.journal.size() == 0
    path.write_text('{"offsetTable":{"T@G":{0:6,3:9},"%RETRY%G@G":{0:0}}}')  # as Java writes it
    m2 = ConsumerOffsetManager(path)
    m2.load()
    assert m2.query_offset("G", "T", 0) == 6 and m2.which_topic_by_consumer("G") == {"T", "%RETRY%G"}
    path.write_text("{broken")
    Path(str(path) + ".bak").write_text("{broken too")
    with pytest.raises(StoreError):
        ConsumerOffsetManager(path).load()


async def test_group_commit_one_fsync_serves_many_waiters() -> None:
    """Sends waiting while a flush runs are all covered by the next single flush."""
    flushed = 0
    written = 0
    calls = 0
    gate = threading.Event()

    def flush() -> int:
        nonlocal calls, flushed
        calls += 1
        gate.wait(5)
        flushed = written
        return flushed

    gcs = GroupCommitService(flush, sync_flush_timeout=5.0)
    written = 100
    first = asyncio.ensure_future(gcs.wait_for_flush(100))
    await asyncio.sleep(0)
    waiters = []
    for end in (150, 200, 250):
        written = end
        waiters.append(asyncio.ensure_future(gcs.wait_for_flush(end)))
    gate.set()
    assert await first is True
    assert await asyncio.gather(*waiters) == [True, True, True]
    assert calls <= 2
    assert await gcs.wait_for_flush(50) is True  # already durable: no new flush
    assert calls <= 2
    await gcs.shutdown()


async def test_group_commit_flushes_on_the_loop_while_fast_then_in_a_thread() -> None:
    """A fast fsync runs on the event loop (one per loop turn, covering every waiter of that turn);
    once its average passes inline_fsync_max the next flushes run in a thread."""
    threads: list[int] = []
    written = 0
    delay = 0.0

    def flush() -> int:
        threads.append(threading.get_ident())
        time.sleep(delay)  # stands in for a slow disk, inside the flush itself
        return written

    gcs = GroupCommitService(flush, sync_flush_timeout=5.0, inline_fsync_max=0.005)
    written = 300
    assert await asyncio.gather(*(gcs.wait_for_flush(end) for end in (100, 200, 300))) == [True] * 3
    assert threads == [threading.get_ident()]  # one flush, on the loop thread
    delay, written = 0.05, 400
    assert await gcs.wait_for_flush(400) is True  # still inline: the average was fast
    delay, written = 0.0, 500
    assert await gcs.wait_for_flush(500) is True
    assert threads[-1] != threading.get_ident()  # the slow fsync moved flushing to a thread
    await gcs.shutdown()


async def test_group_commit_timeout_reports_false() -> None:
    """A flush that never reaches the offset makes the waiter return False after the timeout."""
    gcs = GroupCommitService(lambda: 10, sync_flush_timeout=0.2)
    start = time.monotonic()
    assert await gcs.wait_for_flush(100) is False
    assert time.monotonic() - start >= 0.15
    await gcs.shutdown()


class _Chan:
    remote_addr = "1.2.3.4:5"
    is_active = True


async def test_hold_service_wakes_on_arrival_and_expires() -> None:
    """notify_message_arriving re-executes only satisfied requests; others answer at their deadline."""
    woken: list[tuple[Any, float]] = []
    loop = asyncio.get_running_loop()
    done = asyncio.Event()

    def wakeup(held: HeldPullRequest) -> None:
        woken.append((held.request.opaque, loop.time()))
        if len(woken) == 3:
            done.set()

    svc = PullRequestHoldService(lambda t, q: 0, wakeup, check_interval=60)
    svc.start()
    start = loop.time()

    def held(opaque: int, offset: int, codes: frozenset[int] | None, timeout: float) -> HeldPullRequest:
        req = RemotingCommand(code=11, opaque=opaque)
        return HeldPullRequest(_Chan(), req, "T", 0, offset, codes, timeout)

    svc.suspend_pull_request("T", 0, held(1, 5, None, 30))
    svc.suspend_pull_request("T", 0, held(2, 5, frozenset({42}), 30))
    svc.suspend_pull_request("T", 0, held(3, 9, None, 0.2))
    svc.notify_message_arriving("T", 0, 6, tags_code=7)  # wakes 1 only (2 filters on tag 42, 3 wants > 9)
    svc.notify_message_arriving("T", 0, 7, tags_code=42)  # wakes 2
    await asyncio.wait_for(done.wait(), 5)
    assert [o for o, _ in woken][:2] == [1, 2]
    expired = dict(woken)[3]
    assert expired - start >= 0.15
    assert svc.held_count == 0
    await svc.shutdown()


def test_retention_runs_at_delete_when_hour(tmp_path: Path) -> None:
    """is_time_to_delete follows deleteWhen ("04" or "04;05")."""
    import datetime

    from tidemq.broker.broker import Broker
    from tidemq.testing import make_broker_configs

    bc, sc = make_broker_configs(tmp_path, None, delete_when="04;05")
    broker = Broker(bc, sc)
    assert broker.is_time_to_delete(datetime.datetime(2024, 1, 1, 4, 30))
    assert broker.is_time_to_delete(datetime.datetime(2024, 1, 1, 5, 0))
    assert not broker.is_time_to_delete(datetime.datetime(2024, 1, 1, 6, 0))


async def test_group_commit_in_a_thread_pauses_the_loop_poller() -> None:
    """While a flush runs in a thread the broker's loop stops polling (so the thread gets the GIL
    back as soon as its fsync returns), and polls again after the next read once it is done."""
    from tidemq.remoting.busy_poll import IdlePoller

    poller = IdlePoller(10_000_000)  # polls until paused or closed
    seen: list[bool] = []
    written = 0

    def flush() -> int:
        seen.append(poller.paused)
        return written

    gcs = GroupCommitService(flush, sync_flush_timeout=5.0)  # inline_fsync_max 0: always a thread
    gcs.idle_poller = poller
    for _ in range(12):  # reads in quick succession: the loop polls
        poller.touch()
    assert poller.polling
    written = 100
    assert await gcs.wait_for_flush(100) is True
    assert seen and all(seen)  # polling paused while the thread flushed
    assert not poller.paused
    await wait_for(lambda: not poller.polling, 5.0, "the pause to end the polling")
    poller.touch()
    assert poller.polling  # resumed: the next read polls again
    poller.close()
    await gcs.shutdown()
