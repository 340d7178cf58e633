"""topics.json with its change journal: a change costs one appended line, a restart sees every
acknowledged change, a torn tail loses only what was never acknowledged, and the journal is folded
into topics.json once it outgrows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidemq.broker.config import BrokerConfig
from tidemq.broker.topic_config import TopicConfigManager, make_topic_config
from tidemq.store import config_journal
from tidemq.store.config_file import load_json
from tidemq.store.config_journal import ConfigJournal


def manager(path: Path) -> TopicConfigManager:
    tcm = TopicConfigManager(BrokerConfig(broker_name="b1"), path)
    tcm.load()
    return tcm


def test_changes_append_to_the_journal_and_a_restart_sees_them_all(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    tcm = manager(path)
    tcm.update_topic_config(make_topic_config("T0", 4))  # first write: the snapshot
    snapshot = path.read_bytes()
    for i in range(1, 200):
        tcm.update_topic_config(make_topic_config(f"T{i}", 4))
    tcm.update_topic_config(make_topic_config("T5", 2))
    assert tcm.delete_topic_config("T7")
    assert path.read_bytes() == snapshot  # 201 changes, topics.json untouched
    journal = tcm.journal.path.stat().st_size
    assert 0 < journal < 201 * 300  # about one short line per change

    again = manager(path)
    assert again.topic_config_table == tcm.topic_config_table
    assert again.data_version == tcm.data_version
    assert again.topic_config_table["T5"].write_queue_nums == 2 and "T7" not in again.topic_config_table


def test_a_torn_last_line_loses_only_that_change(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "topics.json"
    tcm = manager(path)
    for i in range(5):
        tcm.update_topic_config(make_topic_config(f"T{i}", 4))
    journal = tcm.journal.path
    data = journal.read_bytes()
    journal.write_bytes(data[: len(data) - 7])  # the last append was cut by a crash
    again = manager(path)
    assert {"T0", "T1", "T2", "T3"} <= set(again.topic_config_table)
    assert "T4" not in again.topic_config_table
    assert "torn or corrupt" in caplog.text


def test_lines_the_snapshot_already_holds_are_skipped(tmp_path: Path) -> None:
    """A crash between a snapshot and the journal's truncation replays nothing twice."""
    path = tmp_path / "topics.json"
    tcm = manager(path)
    for i in range(3):
        tcm.update_topic_config(make_topic_config(f"T{i}", 4))
    stale = tcm.journal.path.read_bytes()
    tcm.delete_topic_config("T1")
    tcm.persist()  # snapshot holds everything, journal emptied
    assert tcm.journal.size() == 0
    tcm.journal.path.write_bytes(stale)  # as if the truncation never happened
    again = manager(path)
    assert "T1" not in again.topic_config_table and {"T0", "T2"} <= set(again.topic_config_table)


def test_the_journal_is_folded_into_topics_json_once_it_outgrows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_journal, "MIN_COMPACT_BYTES", 2_000)
    path = tmp_path / "topics.json"
    tcm = manager(path)
    for i in range(100):
        tcm.update_topic_config(make_topic_config(f"T{i}", 4))
        assert tcm.journal.size() <= max(2_000, tcm.journal.snapshot_bytes) + 300
    on_disk = load_json(path)
    assert on_disk is not None and len(on_disk["topicConfigTable"]) > 20  # compacted at least once
    assert manager(path).topic_config_table == tcm.topic_config_table


def test_a_batch_is_one_version_and_one_append(tmp_path: Path) -> None:
    tcm = manager(tmp_path / "topics.json")
    tcm.update_topic_config(make_topic_config("First", 1))
    before = tcm.data_version.counter
    names = tcm.update_topic_config_list([make_topic_config(f"B{i}", 8) for i in range(50)])
    assert len(names) == 50 and tcm.data_version.counter == before + 1
    lines = tcm.journal.path.read_bytes().splitlines()
    assert len(lines) == 50 and len({line.split(b'"v":')[1][:4] for line in lines}) == 1
    assert tcm.update_topic_config_list([make_topic_config("B0", 8)]) == []  # unchanged: no new version
    assert set(tcm.take_unregistered()) >= {f"B{i}" for i in range(50)}
    assert tcm.take_unregistered() == {}


def test_a_garbage_journal_line_stops_the_replay(tmp_path: Path) -> None:
    journal = ConfigJournal(tmp_path / "x.json")
    journal.append(1, 10, [("a", {"k": 1})])
    with open(journal.path, "ab") as f:
        f.write(b'deadbeef {"v": 2}\n')
    journal.append(3, 30, [("b", {"k": 2})])
    assert [e.key for e in journal.replay(0)] == ["a"]
