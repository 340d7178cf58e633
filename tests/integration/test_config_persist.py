"""topics.json (and its change journal) and subscriptionGroup.json are written off the broker's event
loop: a send that auto-creates a topic does not stall the broker on fsyncs; an admin change is on disk
when answered."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_for
from tidemq.broker import config_persist, topic_config
from tidemq.broker.config import BrokerConfig
from tidemq.broker.config_persist import ConfigPersister
from tidemq.protocol.body import SubscriptionGroupConfig
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.store import journaled_table
from tidemq.store.config_journal import ConfigJournal
from tidemq.testing import Cluster

from .conftest import Wire


def config_file(cluster: Cluster, name: str) -> dict[str, Any]:
    """The broker's ``config/<name>`` ({} before its first write)."""
    path = cluster.broker.config_dir / name
    return json.loads(path.read_text()) if path.exists() else {}


def topics_on_disk(cluster: Cluster) -> dict[str, Any]:
    """The topic table a restart would load: ``topics.json`` plus its change journal."""
    tcm = topic_config.TopicConfigManager(BrokerConfig(), cluster.broker.config_dir / "topics.json")
    tcm.load()
    return {name: tc.to_json() for name, tc in tcm.topic_config_table.items()}


@pytest.fixture
def writer_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the threads that wrote a config file or journal (whole writes and journal appends)."""
    names: list[str] = []
    real_write = config_persist.atomic_write_json
    real_append = ConfigJournal.append

    def spy(path: Any, obj: Any) -> None:
        names.append(threading.current_thread().name)
        real_write(path, obj)

    def spy_append(self: ConfigJournal, *args: Any) -> int:
        names.append(threading.current_thread().name)
        return real_append(self, *args)

    monkeypatch.setattr(config_persist, "atomic_write_json", spy)
    monkeypatch.setattr(journaled_table, "atomic_write_json", spy)
    monkeypatch.setattr(ConfigJournal, "append", spy_append)
    return names


async def test_a_send_auto_creating_a_topic_writes_topics_json_off_the_loop(
    wire: Wire, cluster: Cluster, writer_threads: list[str]
) -> None:
    r = await wire.send("AutoMade", b"x")
    assert r.code == ResponseCode.SUCCESS, r.remark
    await wait_for(
        lambda: "AutoMade" in topics_on_disk(cluster),
        10,
        "topics.json",
    )
    assert writer_threads and all(n.startswith("config-persist") for n in writer_threads)


async def test_admin_changes_are_on_disk_when_answered(
    wire: Wire, cluster: Cluster, writer_threads: list[str]
) -> None:
    await wire.create_topic("AdminMade", 3)
    assert topics_on_disk(cluster)["AdminMade"]["writeQueueNums"] == 3
    body = json.dumps(SubscriptionGroupConfig(group_name="GAdmin").to_json()).encode()
    r = await wire.invoke(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert "GAdmin" in config_file(cluster, "subscriptionGroup.json")["subscriptionGroupTable"]
    r = await wire.invoke(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "AdminMade"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert "AdminMade" not in topics_on_disk(cluster)
    assert writer_threads and all(n.startswith("config-persist") for n in writer_threads)


def test_writes_queued_together_are_one_and_a_change_during_a_write_gets_its_own() -> None:
    persister = ConfigPersister()
    started, release = threading.Event(), threading.Event()
    runs: list[str] = []

    def slow() -> None:
        runs.append("slow")
        started.set()
        assert release.wait(10)

    def write() -> None:
        runs.append("write")

    first = persister.request(slow)
    assert started.wait(10)  # slow runs now: a request for it queues a second run
    again = persister.request(slow)
    queued = [persister.request(write) for _ in range(3)]
    assert again is not first and queued[0] is queued[1] is queued[2]
    release.set()
    for future in (first, again, *queued):
        future.result(10)
    persister.shutdown()
    assert runs == ["slow", "slow", "write"] and persister.writes == 3


def test_a_failed_write_reaches_its_future_and_later_writes_run(caplog: pytest.LogCaptureFixture) -> None:
    persister = ConfigPersister()

    def broken() -> None:
        raise OSError("disk gone")

    failed: Future[None] = persister.request(broken)
    with pytest.raises(OSError, match="disk gone"):
        failed.result(10)
    done: list[int] = []
    persister.request(lambda: done.append(1)).result(10)
    persister.shutdown()
    assert done == [1] and "writing a config file failed" in caplog.text
    after = persister.request(lambda: done.append(2))  # after shutdown: on the caller's thread
    assert after.done() and done == [1, 2]


def test_a_manager_without_a_persister_writes_at_once(tmp_path: Path) -> None:
    from tidemq.broker.config import BrokerConfig
    from tidemq.broker.subscription_group import SubscriptionGroupManager

    sgm = SubscriptionGroupManager(BrokerConfig(broker_name="b"), tmp_path / "subscriptionGroup.json")
    sgm.update_subscription_group_config(SubscriptionGroupConfig(group_name="G1"))
    assert sgm.pending_write is None
    assert "G1" in json.loads((tmp_path / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
