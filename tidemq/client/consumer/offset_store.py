"""Consumer offset stores. Mirrors RocketMQ's ``OffsetStore``, ``RemoteBrokerOffsetStore`` and
``LocalFileOffsetStore``.

Offsets are "next offset to consume" per ``MessageQueue``. CLUSTERING groups keep them on the
broker (:class:`RemoteBrokerOffsetStore`: in memory, piggy-backed on pulls, persisted every
5 s, on queue drop and on shutdown). BROADCASTING consumers keep them in a local file
(:class:`LocalFileOffsetStore`): ``<offset_store_dir>/<client id>/<group>/offsets.json``,
written atomically (temp file, fsync, rename) with the previous copy kept as ``.bak``. A
corrupt file falls back to ``.bak``; when both are unreadable loading raises ``ClientError``
naming the files -- never a silent reset to "no offsets".

File format (standard JSON; Java writes fastjson's object-keyed map instead)::

    {"offsetTable": [{"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 123}, ...]}
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from tidemq.client.consumer.failure_log import FailureLog
from tidemq.errors import BrokerError, ClientError, TideMQError
from tidemq.protocol.message import MessageQueue

__all__ = [
    "LocalFileOffsetStore",
    "OffsetBackend",
    "OffsetStore",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
]

log = logging.getLogger(__name__)


class ReadOffsetType(Enum):
    """Where :meth:`OffsetStore.read_offset` looks. Mirrors ``ReadOffsetType``."""

    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetBackend(Protocol):
    """What the remote store needs from the client instance (broker lookup + two request codes)."""

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET for ``mq``; raises ``BrokerError`` (e.g. QUERY_NOT_FOUND) or a transport error."""
        ...

    async def update_consumer_offset(
        self, group: str, mq: MessageQueue, offset: int, *, oneway: bool
    ) -> None:
        """UPDATE_CONSUMER_OFFSET for ``mq``."""
        ...


class OffsetStore(ABC):
    """In-memory offset table plus a backing store. Mirrors ``OffsetStore``."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.offset_table: dict[MessageQueue, int] = {}
        self._update_lock = threading.Lock()

    async def load(self) -> None:  # noqa: B027 - optional hook
        """Load persisted offsets (local store only)."""

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """Set the in-memory offset; with ``increase_only`` never move it backwards. Mirrors
        ``updateOffset`` (its compare-and-increase on an ``AtomicLong``): any thread may call it
        (queue lanes acknowledge on their own threads)."""
        with self._update_lock:
            old = self.offset_table.get(mq)
            if old is None or not increase_only or offset > old:
                self.offset_table[mq] = offset

    def read_offset_in_memory(self, mq: MessageQueue) -> int:
        """``read_offset(mq, READ_FROM_MEMORY)`` without a coroutine (for any thread): the
        in-memory offset, or -1 when there is none."""
        return self.offset_table.get(mq, -1)

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        """The offset for ``mq``: >= 0, -1 when none is stored, -2 on a transport error. Mirrors ``readOffset``."""
        if read_type is not ReadOffsetType.READ_FROM_STORE:
            offset = self.offset_table.get(mq)
            if offset is not None:
                return offset
            if read_type is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        stored = await self._read_from_store(mq)
        if stored >= 0:
            self.update_offset(mq, stored, False)
        return stored

    @abstractmethod
    async def _read_from_store(self, mq: MessageQueue) -> int: ...

    @abstractmethod
    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Persist the offsets of ``mqs`` (the owned queues). Mirrors ``persistAll``."""

    @abstractmethod
    async def persist(self, mq: MessageQueue) -> None:
        """Persist one queue's offset (called when the queue is dropped). Mirrors ``persist``."""

    def remove_offset(self, mq: MessageQueue) -> None:
        """Forget ``mq`` in memory. Mirrors ``removeOffset``."""
        self.offset_table.pop(mq, None)

    def clone_offset_table(self, topic: str) -> dict[MessageQueue, int]:
        """A copy of the offsets of ``topic``. Mirrors ``cloneOffsetTable``."""
        return {mq: off for mq, off in self.offset_table.items() if mq.topic == topic}


class RemoteBrokerOffsetStore(OffsetStore):
    """Offsets kept by the broker of each queue (CLUSTERING). Mirrors ``RemoteBrokerOffsetStore``.

    Args:
        backend: resolves brokers and sends QUERY_/UPDATE_CONSUMER_OFFSET.
        group: the consumer group.
    """

    def __init__(self, backend: OffsetBackend, group: str) -> None:
        super().__init__(group)
        self.backend = backend
        self.failure_log = FailureLog(log, f"persisting offsets of {group}")

    async def _read_from_store(self, mq: MessageQueue) -> int:
        try:
            return await self.backend.query_consumer_offset(self.group, mq)
        except BrokerError as exc:
            log.debug("no stored offset for %s in %s: %s", mq, self.group, exc)
            return -1
        except TideMQError as exc:
            log.warning("reading the offset of %s for %s failed: %s", mq, self.group, exc)
            return -2

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        owned = set(mqs)
        for mq, offset in list(self.offset_table.items()):
            if mq in owned:
                await self._update(mq, offset, oneway=True)
            else:
                # Java removes offsets of queues no longer owned from the table here.
                del self.offset_table[mq]

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.offset_table.get(mq)
        if offset is not None:
            await self._update(mq, offset, oneway=False)

    async def update_consume_offset_to_broker(
        self, mq: MessageQueue, offset: int, *, oneway: bool = True
    ) -> bool:
        """Send ``offset`` for ``mq`` now; False when it failed (logged). Mirrors ``updateConsumeOffsetToBroker``."""
        return await self._update(mq, offset, oneway=oneway)

    async def _update(self, mq: MessageQueue, offset: int, *, oneway: bool) -> bool:
        try:
            await self.backend.update_consumer_offset(self.group, mq, offset, oneway=oneway)
        except TideMQError as exc:
            if not self.failure_log.failed(mq.broker_name, exc):
                log.debug("persisting offset %d of %s for %s failed: %s", offset, mq, self.group, exc)
            return False
        self.failure_log.succeeded(mq.broker_name)
        return True


class LocalFileOffsetStore(OffsetStore):
    """Offsets in a local JSON file (BROADCASTING). Mirrors ``LocalFileOffsetStore``.

    Args:
        store_dir: root directory (``~/.tidemq_offsets`` by default in the consumer config).
        client_id: the client id (a path component; ``:`` is kept, ``/`` replaced).
        group: the consumer group.
    """

    def __init__(self, store_dir: Path | str, client_id: str, group: str) -> None:
        super().__init__(group)
        safe_cid = client_id.replace(os.sep, "_")
        self.path = Path(store_dir).expanduser() / safe_cid / group / "offsets.json"

    async def load(self) -> None:
        """Read the file (or its ``.bak``) into memory.

        Raises:
            ClientError: both the file and its ``.bak`` exist but cannot be parsed.
        """
        self.offset_table.update(self.read_file())

    def read_file(self) -> dict[MessageQueue, int]:
        """Parse the offsets file, falling back to ``.bak``; {} when neither exists.

        Raises:
            ClientError: naming both files, when neither can be parsed.
        """
        bak = self.path.with_name(self.path.name + ".bak")
        errors: list[str] = []
        for candidate in (self.path, bak):
            if not candidate.exists():
                continue
            try:
                table = _parse_offsets(candidate.read_bytes())
            except (OSError, ValueError, KeyError, TypeError) as exc:
                errors.append(f"{candidate}: {exc}")
                log.warning("offsets file %s is unreadable (%s); trying the backup", candidate, exc)
                continue
            if candidate is bak:
                log.warning("offsets file %s was unreadable; loaded the backup %s", self.path, bak)
            return table
        if errors:
            raise ClientError(
                "cannot load local consumer offsets (refusing to start from scratch): " + "; ".join(errors)
            )
        return {}

    async def _read_from_store(self, mq: MessageQueue) -> int:
        offset = self.read_file().get(mq)
        return -1 if offset is None else offset

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        owned = set(mqs)
        if not owned:
            return
        table = {mq: off for mq, off in self.offset_table.items() if mq in owned}
        self.write_file(table)

    async def persist(self, mq: MessageQueue) -> None:
        """Local offsets are persisted with the whole table; nothing to do per queue (as in Java)."""

    def write_file(self, table: dict[MessageQueue, int]) -> None:
        """Atomically write ``table``: temp file + fsync + rename, previous file kept as ``.bak``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(
            {"offsetTable": [{**mq.to_json(), "offset": off} for mq, off in sorted(table.items())]}, indent=2
        ).encode()
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if self.path.exists():
            bak = self.path.with_name(self.path.name + ".bak")
            with contextlib.suppress(OSError):
                os.replace(self.path, bak)
        os.replace(tmp, self.path)
        with contextlib.suppress(OSError):
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


def _parse_offsets(raw: bytes) -> dict[MessageQueue, int]:
    obj: Any = json.loads(raw)
    entries = obj["offsetTable"]
    if not isinstance(entries, list):
        raise ValueError("offsetTable must be a list")
    table: dict[MessageQueue, int] = {}
    for entry in entries:
        table[MessageQueue.from_json(entry)] = int(entry["offset"])
    return table
