"""An append-only change journal beside a whole-file JSON config (``topics.json.journal``).

Writing ``topics.json`` whole after every change costs O(table) bytes and three fsyncs, so N topics
created one at a time cost O(N²) bytes written, and each admin request waits for its own write.
Here a change appends one line per changed key to ``<file>.journal`` and fdatasyncs once; the
whole file (the *snapshot*) is rewritten only when the journal has grown past the snapshot's size
(or 1 MiB, whichever is larger) and at shutdown, so the bytes written per change stay O(1)
amortised and RocketMQ's tools still find a complete ``topics.json`` after a clean stop.

Line format (one change of one key)::

    <crc32 of the JSON, 8 hex digits> <JSON: {"v": version, "ts": ms, "k": key, "put": value}>\\n
    ... or {"v": version, "ts": ms, "k": key, "del": true}

``v`` is the table's data-version counter after the change. Loading applies, in order, the lines
whose ``v`` is above the snapshot's counter (a crash between a snapshot and the journal's truncation
leaves lines the snapshot already holds; they are skipped). A torn or corrupt line ends the replay
with one WARNING: it and anything after it were never acknowledged as a whole (a change is
acknowledged only after its fdatasync).
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tidemq.errors import StoreError

__all__ = ["ConfigJournal", "JournalEntry"]

log = logging.getLogger(__name__)

MIN_COMPACT_BYTES = 1 << 20
"""The journal is folded into the snapshot once it is larger than this and than the snapshot."""


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journalled change: ``value`` None means the key was deleted."""

    version: int
    timestamp: int
    key: str
    value: Any | None


class ConfigJournal:
    """The journal file of one config file (``<path>.journal``). Not thread-safe: its owner
    serialises calls (the config persister's thread).

    Args:
        path: the config file the journal belongs to (``.../config/topics.json``).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.config_path = Path(path)
        self.path = self.config_path.with_name(self.config_path.name + ".journal")
        self.snapshot_bytes = 0
        """Size of the last snapshot written or loaded (compaction threshold)."""

    def size(self) -> int:
        """Bytes in the journal now (0 when it does not exist)."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def needs_compaction(self) -> bool:
        """True once the journal outgrew ``max(1 MiB, snapshot size)``."""
        return self.size() > max(MIN_COMPACT_BYTES, self.snapshot_bytes)

    def append(self, version: int, timestamp: int, changes: Iterable[tuple[str, Any | None]]) -> int:
        """Append one line per ``(key, value)`` (value None: deleted) and fdatasync.

        Returns:
            Bytes appended.

        Raises:
            StoreError: the journal cannot be written (the message names it).
        """
        lines = []
        for key, value in changes:
            obj: dict[str, Any] = {"v": version, "ts": timestamp, "k": key}
            if value is None:
                obj["del"] = True
            else:
                obj["put"] = value
            payload = orjson.dumps(obj)
            lines.append(b"%08x %s\n" % (zlib.crc32(payload), payload))
        data = b"".join(lines)
        if not data:
            return 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, data)
                os.fdatasync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StoreError(f"cannot append to config journal {self.path}: {exc}") from exc
        return len(data)

    def truncate(self) -> None:
        """Empty the journal (after a snapshot holding every change was written).

        Raises:
            StoreError: the journal cannot be truncated.
        """
        try:
            with open(self.path, "wb") as f:
                os.fsync(f.fileno())
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"cannot truncate config journal {self.path}: {exc}") from exc

    def replay(self, after_version: int) -> Iterator[JournalEntry]:
        """The journalled changes with a version above ``after_version``, in order; stops at the
        first torn or corrupt line (one WARNING)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"cannot read config journal {self.path}: {exc}") from exc
        for number, line in enumerate(data.split(b"\n"), 1):
            if not line:
                continue
            entry = self._parse(line)
            if entry is None:
                log.warning(
                    "%s: line %d is torn or corrupt; ignoring it and what follows (never acknowledged)",
                    self.path,
                    number,
                )
                return
            if entry.version > after_version:
                yield entry

    @staticmethod
    def _parse(line: bytes) -> JournalEntry | None:
        crc_hex, _, payload = line.partition(b" ")
        try:
            if int(crc_hex, 16) != zlib.crc32(payload):
                return None
            obj = orjson.loads(payload)
            return JournalEntry(
                int(obj["v"]), int(obj["ts"]), str(obj["k"]), None if obj.get("del") else obj["put"]
            )
        except (ValueError, KeyError, TypeError):
            return None
