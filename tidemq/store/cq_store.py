"""The consume queues of one store: RocketMQ 5's ``ConsumeQueueStore``.

:class:`ConsumeQueueStore` owns the table ``{(topic, queue_id): ConsumeQueue}`` of a
:class:`~tidemq.store.message_store.MessageStore`: it opens every queue on disk at start-up (moving an
unreadable one aside to be rebuilt), makes a queue the first time the dispatcher writes to it, drops
the queues of deleted topics, and writes the manifest (``<root>/consumequeue.json``, the max offset of
every queue) that the next start checks the queues against (``tidemq/store/repair.py``).

It does no locking of its own: the store calls the changing methods under its put lock, as
RocketMQ's ``DefaultMessageStore`` does around its ``consumeQueueTable``.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from tidemq.errors import StoreError
from tidemq.store.allocate import discard_warm_files
from tidemq.store.config import MessageStoreConfig
from tidemq.store.consume_queue import ConsumeQueue
from tidemq.store.dispatcher import TopicQueueKey
from tidemq.store.repair import move_queue_aside, save_manifest

log = logging.getLogger(__name__)


class ConsumeQueueStore:
    """The consume-queue table of a store, its files and its manifest.

    Args:
        config: where the queues live (``consume_queue_dir``) and their file size.
        root: the store's root directory (``damaged/`` and ``consumequeue.json`` are under it).
        settle: makes every acknowledged put visible in the queues before a read (the store's
            dispatch of pending puts); called by :meth:`settled_queues` and :meth:`topics_and_queues`.

    Attributes:
        table: ``{(topic, queue_id): ConsumeQueue}`` (``DefaultMessageStore.consumeQueueTable``);
            the store exposes the same dict as ``consume_queue_table``.
    """

    def __init__(self, config: MessageStoreConfig, root: Path, settle: Callable[[], None]) -> None:
        self.config = config
        self._root = root
        self._settle = settle
        self.table: dict[TopicQueueKey, ConsumeQueue] = {}
        self._manifest: dict[TopicQueueKey, int] = {}

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(
            topic, queue_id, self.config.consume_queue_dir, self.config.mapped_file_size_consume_queue
        )

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue of (topic, queue_id), created (empty) when missing: the dispatcher's
        lookup (``findConsumeQueue``), run under the store's put lock, without settling."""
        key = (topic, queue_id)
        cq = self.table.get(key)
        if cq is None:
            cq = self._new_queue(topic, queue_id)
            self.table[key] = cq
        return cq

    def load(self) -> dict[TopicQueueKey, str]:
        """Open every queue under ``consume_queue_dir`` (``DefaultMessageStore.loadConsumeQueue``).

        Returns:
            ``{key: why}`` of the queues that could not be opened: their files are moved aside to
            ``<root>/damaged`` and each is in the table empty, to be rebuilt from the commit log.
        """
        root = Path(self.config.consume_queue_dir)
        damaged: dict[TopicQueueKey, str] = {}
        for topic_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            for qdir in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
                if not qdir.name.isdigit():
                    log.warning("ignoring %s: not a queue id", qdir)
                    continue
                key = (topic_dir.name, int(qdir.name))
                discard_warm_files(qdir)  # a first file being prepared when the last run stopped
                cq = self._new_queue(*key)
                try:
                    cq.load()
                except StoreError as exc:
                    aside = move_queue_aside(qdir, self._root / "damaged")
                    damaged[key] = f"unreadable ({exc}; its files are kept in {aside})"
                    cq = self._new_queue(*key)
                self.table[key] = cq
        return damaged

    def reset(self, key: TopicQueueKey) -> ConsumeQueue:
        """Destroy the queue of ``key`` (its files too) and put an empty one in its place (a rebuild)."""
        old = self.table.pop(key, None)
        if old is not None:
            old.destroy()
        return self.find_or_create(*key)

    def remove_topics(self, topics: set[str]) -> list[TopicQueueKey]:
        """Destroy every queue of ``topics`` and their directories; returns the keys removed.
        The caller holds the store's put lock with nothing pending dispatch."""
        removed = [k for k in self.table if k[0] in topics]
        for key in removed:
            self.table.pop(key).destroy()
        for topic in topics:
            shutil.rmtree(Path(self.config.consume_queue_dir) / topic, ignore_errors=True)
        return removed

    def settled_queues(self) -> list[ConsumeQueue]:
        """Every consume queue, acknowledged puts dispatched first (a copy of the table's values)."""
        self._settle()
        return list(self.table.values())

    def topics_and_queues(self) -> dict[str, list[int]]:
        """``{topic: sorted queue ids}`` of every consume queue, acknowledged puts included."""
        self._settle()
        out: dict[str, list[int]] = {}
        for topic, qid in sorted(self.table):
            out.setdefault(topic, []).append(qid)
        return out

    def save_manifest(self) -> None:
        """Write ``consumequeue.json`` when a queue's max offset changed since the last write; a
        failure is one WARNING (the next start then checks the queues without it)."""
        table = {k: cq.get_max_offset_in_queue() for k, cq in list(self.table.items())}
        if table != self._manifest:
            try:
                save_manifest(self._root, table)
                self._manifest = table
            except StoreError as exc:
                log.warning("cannot write %s: %s", self._root / "consumequeue.json", exc)
