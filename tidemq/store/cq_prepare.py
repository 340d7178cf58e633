"""First consume-queue files made ahead of need, off the put path.

A queue's consume queue gets its first file when the first record of the queue is dispatched. On
the broker that dispatch runs on the event loop, right after the put's response; creating the
directory and the sparse segment there costs 0.4 to 0.7 ms on this machine's ext4 (several ms on a
busy stretch), and every request behind it waits, the first message of each new queue included.

A pull on a queue that has no consume queue yet says that a consumer waits there, so the store asks
:class:`ConsumeQueuePreparer` to create that queue's first file in a thread of its own; the dispatch
then opens an existing file (about 20 us). No RocketMQ counterpart is needed there: its dispatch
(``ReputMessageService``) is a thread of its own already.

Only the first file of a queue that has none is made: a next segment made early would be taken by
recovery for the queue's end. The file appears whole or not at all (written as ``<name>.tmp`` and
linked into place; ``link`` never replaces a file the dispatch created meanwhile), so a crash leaves
at most a ``.tmp`` file, which the store's load deletes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tidemq.store.allocate import segment_tmp_path
from tidemq.store.mapped_file import offset_to_file_name

__all__ = ["ConsumeQueuePreparer", "make_first_segment"]

log = logging.getLogger(__name__)


def make_first_segment(queue_dir: Path, file_size: int) -> bool:
    """Create ``queue_dir`` and its first segment (``00000000000000000000``, sparse, ``file_size``
    bytes of zeros) unless the directory holds a segment already. True when it made the file.

    Raises:
        OSError: the directory or the file cannot be made (the caller logs it; the dispatch then
            makes the file itself, as without preparing).
    """
    queue_dir.mkdir(parents=True, exist_ok=True)
    if any(p.name.isdigit() for p in queue_dir.iterdir()):
        return False
    final = queue_dir / offset_to_file_name(0)
    tmp = segment_tmp_path(final)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, file_size)
    finally:
        os.close(fd)
    try:
        os.link(tmp, final)
        return True
    except FileExistsError:  # the dispatch made it meanwhile: keep its file
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


class ConsumeQueuePreparer:
    """Makes the first file of consume queues in one daemon thread (:func:`make_first_segment`).

    Args:
        root_dir: the ``consumequeue`` directory.
        file_size: consume-queue segment size in bytes.
    """

    def __init__(self, root_dir: str | Path, file_size: int) -> None:
        self.root_dir = Path(root_dir)
        self.file_size = file_size
        self._lock = threading.Lock()
        self._making = threading.Lock()
        """Held while a file is made: :meth:`cancel` waits for it."""
        self._pending: set[tuple[str, int]] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self.made = 0
        """Files made so far (for tests and stats)."""

    def prepare(self, topic: str, queue_id: int) -> None:
        """Make the first file of (``topic``, ``queue_id``) in the background, unless it is under
        way or the preparer is shut down. Returns at once."""
        key = (topic, queue_id)
        with self._lock:
            if self._closed or key in self._pending:
                return
            self._pending.add(key)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="consume-queue-prepare")
            self._executor.submit(self._make, key)

    def cancel(self, topics: set[str]) -> None:
        """Drop what is asked for ``topics`` and wait for a file of theirs being made: after this, no
        file of theirs appears (the store deletes a topic's directory next; a file made after
        that would bring the topic back at the broker's next start)."""
        with self._making, self._lock:
            self._pending = {key for key in self._pending if key[0] not in topics}

    def shutdown(self) -> None:
        """Wait for the file being made; the others asked for are dropped."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def _make(self, key: tuple[str, int]) -> None:
        with self._making:
            with self._lock:
                if self._closed or key not in self._pending:  # shut down, or cancelled
                    return
            try:
                if make_first_segment(self.root_dir / key[0] / str(key[1]), self.file_size):
                    self.made += 1
            except OSError as exc:
                log.warning("cannot prepare the consume queue of %s:%d: %s", key[0], key[1], exc)
            finally:
                with self._lock:
                    self._pending.discard(key)
