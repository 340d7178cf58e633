"""The broker's config files written off the event loop.

``topics.json`` and ``subscriptionGroup.json`` change when a send auto-creates a topic, when a new
consumer group (or its retry topic) shows up, and on admin requests. Writing one is three
``fsync`` calls (``atomic_write_json``): 2 to 4 ms on this machine's disk, during which the event
loop, and so every client of the broker, used to wait. RocketMQ writes them in the request's
processor thread (``ConfigManager.persist``), which blocks only that request.

Here :class:`ConfigPersister` writes them in one thread of its own: a manager's change queues a
write (:meth:`PersistedConfig.persist_soon`) and returns. Writes queued while an earlier one waits
are one write (``persist`` encodes the table when it runs); a change made while a write runs queues
the next. Admin requests that change a file answer only once it is written
(``Broker.config_files_written``); a change a send or a heartbeat makes is on disk within
milliseconds, and should the broker die first, the start after it re-creates a topic from its
consume queues (``config_recovery.py``) and a group on its first heartbeat.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tidemq.store.config_file import atomic_write_json as atomic_write_json  # tests spy on it

__all__ = ["ConfigPersister", "PersistedConfig"]

log = logging.getLogger(__name__)

Write = Callable[[], None]


class ConfigPersister:
    """Runs config-file writes in one daemon thread, in order, merging a write with the same one
    still queued. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: dict[Write, Future[None]] = {}
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="config-persist")
        self._closed = False
        self.writes = 0
        """Writes run so far (for tests and stats)."""

    def request(self, write: Write) -> Future[None]:
        """Queue ``write`` (a manager's ``persist``) unless the same one is queued and not started;
        the future is done when it has run (its exception: the write's). After :meth:`shutdown`
        the write runs at once, on the caller's thread."""
        with self._lock:
            future = self._queued.get(write)
            if future is not None:
                return future
            future = Future()
            if not self._closed:
                self._queued[write] = future
                self._executor.submit(self._run, write, future)
                return future
        self._run(write, future)
        return future

    def shutdown(self) -> None:
        """Run what is queued, then stop the thread."""
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=True)

    def _run(self, write: Write, future: Future[None]) -> None:
        with self._lock:
            self._queued.pop(write, None)  # a change from now on needs a write of its own
        try:
            write()
        except Exception as exc:
            log.exception("writing a config file failed")
            future.set_exception(exc)
        else:
            self.writes += 1
            future.set_result(None)


class PersistedConfig:
    """A config manager whose file is written whole (``topics.json``, ``subscriptionGroup.json``).

    Subclasses set :attr:`path` and define :meth:`encode`, and call :meth:`persist_soon` after a
    change. Until the broker sets :attr:`persist_later`, a change writes at once (tools, tests).
    """

    path: Path

    def __init__(self) -> None:
        self.persist_later: Callable[[Write], Future[None]] | None = None
        """Queues a write off the caller's thread (``ConfigPersister.request``); None: write now."""
        self.pending_write: Future[None] | None = None
        """The last write queued (done once the file holds every change made before it)."""
        self._write_lock = threading.Lock()

    def encode(self) -> dict[str, Any]:
        raise NotImplementedError

    def persist(self) -> None:
        """Write the file atomically (previous copy kept as ``.bak``); one writer at a time.

        Raises:
            StoreError: the file cannot be written.
        """
        with self._write_lock:
            atomic_write_json(self.path, self.encode())

    def persist_soon(self) -> None:
        """Write the file after a change: queued with :attr:`persist_later` when set, else now."""
        if self.persist_later is None:
            self.persist()
        else:
            self.pending_write = self.persist_later(self.persist)
