"""JournaledTable: changes go to the journal, a restart sees snapshot + journal, and a failed append
(which may leave a torn line that would hide every later line) makes the next write a snapshot."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from tidemq.errors import StoreError
from tidemq.store.config_journal import ConfigJournal, JournalEntry
from tidemq.store.journaled_table import JournaledTable


class Owner:
    """The smallest owner: ``{key: int}`` in ``{"table": ..., "dataVersion": {"counter": n}}``,
    one version per write (as the consumer offsets count)."""

    def __init__(self, path: Path) -> None:
        self.table: dict[str, int] = {}
        self.version = 0
        self.lock = threading.Lock()
        self.file = JournaledTable(
            path, self.lock, encode=self.encode, journal_value=self.table.get, version=self.next_version
        )

    def encode(self) -> dict[str, Any]:
        with self.lock:
            return {"table": dict(self.table), "dataVersion": {"counter": self.version, "timestamp": 0}}

    def next_version(self) -> tuple[int, int]:
        self.version += 1
        return self.version, 0

    def set(self, key: str, value: int | None) -> None:
        with self.lock:
            if value is None:
                self.table.pop(key, None)
            else:
                self.table[key] = value
            self.file.mark_changed(key)

    def read_snapshot(self, obj: Any) -> int:
        self.table.update(obj["table"])
        self.version = obj["dataVersion"]["counter"]
        return self.version

    def apply(self, entry: JournalEntry) -> None:
        if entry.value is None:
            self.table.pop(entry.key, None)
        else:
            self.table[entry.key] = entry.value
        self.version = entry.version

    @classmethod
    def reloaded(cls, path: Path) -> Owner:
        again = cls(path)
        again.file.load(again.read_snapshot, again.apply)
        return again


def test_snapshot_then_journal_then_restart(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    owner = Owner(path)
    owner.set("a", 1)
    assert owner.file.write() and path.exists()  # no file yet: a snapshot
    assert owner.file.write() is False  # nothing changed
    owner.set("a", 2)
    owner.set("b", 3)
    owner.set("c", 4)
    owner.set("c", None)
    assert owner.file.write()
    assert orjson.loads(path.read_bytes())["table"] == {"a": 1}  # the change is in the journal only
    assert len(owner.file.journal.path.read_bytes().splitlines()) == 3  # one line per changed key
    again = Owner.reloaded(path)
    assert again.table == {"a": 2, "b": 3} and again.version == 2


def test_a_failed_append_makes_the_next_write_a_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.json"
    owner = Owner(path)
    owner.set("a", 1)
    owner.file.write()
    real_append = ConfigJournal.append

    def torn(self: ConfigJournal, *args: Any) -> int:
        with open(self.path, "ab") as f:
            f.write(b'0badc0de {"v"')  # half a line, then the disk failed
        raise StoreError("disk failed")

    monkeypatch.setattr(ConfigJournal, "append", torn)
    owner.set("b", 2)
    with pytest.raises(StoreError):
        owner.file.write()
    monkeypatch.setattr(ConfigJournal, "append", real_append)
    owner.set("c", 3)
    assert owner.file.write()  # a snapshot, not an append behind the torn line
    assert owner.file.journal.size() == 0
    assert Owner.reloaded(path).table == {"a": 1, "b": 2, "c": 3}
