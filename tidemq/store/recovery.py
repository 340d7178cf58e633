"""Start-up of a message store: open its files and recover them after a clean stop or a crash.

:class:`StoreRecovery` is what RocketMQ's ``DefaultMessageStore.load`` + ``recover`` do (with
``CommitLog.recoverNormally`` / ``recoverAbnormally`` and the consume queues' ``recover``), plus
tidemq's own check of every consume queue against the commit log (``tidemq/store/repair.py``).
:class:`~tidemq.store.message_store.MessageStore` owns one and runs it from ``load``, under the store
lock; the HA slave re-dispatches what its master sends with the same :meth:`StoreRecovery.redispatch`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from tidemq.errors import StoreError
from tidemq.protocol.message_codec import MessageSysFlag, RecordInfo
from tidemq.store.allocate import discard_warm_files
from tidemq.store.dispatcher import CONSUMABLE, TopicQueueKey
from tidemq.store.repair import (
    check_consume_queue,
    load_manifest,
    missing_from_manifest,
    pad_short_segments,
    rebuild_consume_queues,
)

if TYPE_CHECKING:
    from tidemq.store.message_store import MessageStore

log = logging.getLogger(__name__)

_CONSUMABLE = CONSUMABLE


class StoreRecovery:
    """Recovers the files of one store at start-up.

    Args:
        store: the owning store; its commit log, checkpoint, consume queues, index, dispatcher and
            ``topic_queue_table`` are loaded and repaired in place.
    """

    def __init__(self, store: MessageStore) -> None:
        self._store = store

    def recover(self) -> int:
        """Open and recover the store's files; returns the commit log's end offset after recovery.

        Clean start (no ``abort`` file): trust the segments, re-validate the last one. After a crash:
        re-scan the commit log from the checkpoint, verify magic code and CRC, truncate the torn
        tail, and repair consume queues (drop entries past the end, re-dispatch missing ones).
        Sets ``store.recovered_abnormally``; writes the checkpoint at the end offset.

        Raises:
            StoreError: the directory cannot be used (segment of the wrong size, not writable...).
        """
        store = self._store
        abnormal = self._open_directories()
        store.recovered_abnormally = abnormal
        commit_log_dir = Path(store.config.commit_log_dir)
        store.commit_log.damaged_dir = store.root / "damaged"
        discard_warm_files(commit_log_dir)  # a warm segment the last run did not use
        padded = pad_short_segments(commit_log_dir, store.config.mapped_file_size_commit_log)
        store.commit_log.load()
        damaged = store.consume_queues.load()
        cp = store.checkpoint
        cp.load()
        for cq in store.consume_queue_table.values():
            cq.recover(thorough=abnormal)
        last = store.commit_log.queue.last()
        dispatch_from = cp.logics_offset if cp.valid else 0
        if abnormal:
            start = min(cp.physic_offset, cp.logics_offset) if cp.valid else 0
            log.warning("store %s was not shut down cleanly; recovering from offset %d", store.root, start)
        else:
            start = min(last.file_from_offset if last else 0, dispatch_from)
        if padded is not None:  # a truncated segment: re-check it and everything after it
            start = min(start, padded)
        index = store.index_service
        if index is not None:
            index.load(not abnormal, cp.index_msg_timestamp if cp.valid else 0)
            start = min(start, index.end_phy_offset)
        end = store.commit_log.recover(
            start,
            store.config.check_crc_on_recover or abnormal,
            lambda info: self.redispatch(info, dispatch_from),
        )
        if index is not None:
            index.truncate(end)
            cp.index_msg_timestamp = index.flush()
        self._truncate_consume_queues(end)
        self._check_consume_queues(damaged, end, thorough=abnormal)
        cp.physic_offset = cp.logics_offset = end
        cp.flush()
        return end

    def _open_directories(self) -> bool:
        """Make the store's directories and its ``abort`` file; returns whether ``abort`` was there
        already (the last run did not shut down cleanly)."""
        store = self._store
        try:
            store.root.mkdir(parents=True, exist_ok=True)
            Path(store.config.consume_queue_dir).mkdir(parents=True, exist_ok=True)
            Path(store.config.commit_log_dir).mkdir(parents=True, exist_ok=True)
            abort = store.root / "abort"
            abnormal = abort.exists()
            abort.touch()
        except OSError as exc:
            raise StoreError(f"cannot use store directory {store.root}: {exc}") from exc
        return abnormal

    def _truncate_consume_queues(self, end: int) -> None:
        """Drop consume-queue entries past the commit log's ``end``, move min offsets up to its min
        offset, and set each queue's next offset in ``topic_queue_table``."""
        store = self._store
        min_phy = store.commit_log.get_min_offset()
        for key, cq in store.consume_queue_table.items():
            cq.truncate_dirty_logic_files(end)
            cq.correct_min_offset(min_phy)
            store.topic_queue_table[key] = cq.get_max_offset_in_queue()

    def _check_consume_queues(self, damaged: dict[TopicQueueKey, str], end: int, *, thorough: bool) -> None:
        """Check every consume queue against the commit log and the manifest; rebuild the damaged
        ones from the commit log (``tidemq/store/repair.py``, one WARNING per queue)."""
        store = self._store
        queues = store.consume_queues
        for key, why in missing_from_manifest(load_manifest(store.root), queues.table).items():
            damaged.setdefault(key, why)
        for key, cq in queues.table.items():
            if key not in damaged:
                problem = check_consume_queue(cq, store.commit_log, end, thorough)
                if problem is not None:
                    damaged[key] = f"damaged ({problem})"
        if damaged:
            rebuild_consume_queues(store.commit_log, damaged, queues.reset, self._dispatch_rebuilt)
            for key in damaged:
                store.topic_queue_table[key] = queues.table[key].get_max_offset_in_queue()
        queues.save_manifest()

    def _dispatch_rebuilt(self, info: RecordInfo) -> None:
        self._store.dispatcher.dispatch_record(info, index=False)

    def redispatch(self, info: RecordInfo, dispatch_from: int) -> None:
        """Index the record ``info`` and, when it lies at or after commit-log offset ``dispatch_from``,
        give it its consume-queue entry (recovery; the HA slave with 0); a consumable record moves
        the store's last store timestamp forward (``DefaultMessageStore.doDispatch``)."""
        store = self._store
        consume_queue = info.commit_log_offset >= dispatch_from
        store.dispatcher.dispatch_record(info, consume_queue=consume_queue)
        if consume_queue and MessageSysFlag.get_transaction_value(info.sys_flag) in _CONSUMABLE:
            store.advance_store_timestamp(info.store_timestamp)
