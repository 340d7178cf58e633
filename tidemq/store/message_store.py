"""The message store: commit log + consume queues + recovery + retention.

Mirrors RocketMQ's ``DefaultMessageStore`` (with the dispatch of ``ReputMessageService`` done
synchronously inside the put, or just after it). Plain synchronous Python over files: no threads, no
asyncio. Puts are serialised by one lock; reads run concurrently; ``flush()`` may be called from
another thread while puts happen (the broker calls it periodically for ASYNC_FLUSH and before
answering a SYNC_FLUSH send).

The put path itself (encoding, size checks, the append, queue offsets: RocketMQ's
``CommitLog.putMessage(s)``) is :class:`~tidemq.store.put.CommitLogPut` in ``tidemq/store/put.py``;
this module keeps the lifecycle and recovery, the dispatch of scheduled puts, flushing, the reads and
lookups, and retention.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tidemq.errors import ProtocolError, StoreError
from tidemq.protocol.message import MessageExt
from tidemq.protocol.message_codec import MessageSysFlag, RecordInfo, decode_message
from tidemq.store.allocate import AllocateMappedFileService, discard_warm_files
from tidemq.store.checkpoint import StoreCheckpoint
from tidemq.store.commit_log import CommitLog
from tidemq.store.config import SYNC_FLUSH, MessageStoreConfig
from tidemq.store.consume_queue import ConsumeQueue
from tidemq.store.cq_prepare import ConsumeQueuePreparer
from tidemq.store.disk import NO_SPACE_ERRNOS, DiskSpaceGuard, DiskUsage, disk_usage
from tidemq.store.dispatcher import (
    CONSUMABLE,
    Arrival,
    CommitLogDispatcher,
    PutRecords,
    PutRun,
    TopicQueueKey,
)
from tidemq.store.dispatcher import SCHEDULE_TOPIC as SCHEDULE_TOPIC  # re-exported
from tidemq.store.dispatcher import tags_string_to_tags_code as tags_string_to_tags_code  # re-exported
from tidemq.store.filtered_scan import RecordFilter
from tidemq.store.index import IndexService, QueryMessageResult, query_message
from tidemq.store.lock import StoreLock
from tidemq.store.message_reader import MessageReader
from tidemq.store.put import CommitLogPut
from tidemq.store.repair import (
    check_consume_queue,
    load_manifest,
    missing_from_manifest,
    move_queue_aside,
    pad_short_segments,
    rebuild_consume_queues,
    save_manifest,
)
from tidemq.store.results import (
    GetMessageResult,
    MessageExtBatch,
    MessageExtBrokerInner,
    PutMessageResult,
)
from tidemq.store.retention import CommitLogRetention

log = logging.getLogger(__name__)

MessageArrivingListener = Callable[[str, int, int, int, int], None]
"""``(topic, queue_id, max_offset_after_put, tags_code, store_timestamp_ms)``, after every put."""

_CONSUMABLE = CONSUMABLE
FIRST_WARM_WAIT = 30.0
"""Seconds :meth:`MessageStore.load` waits for the first segment's warm (warm segments only)."""


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _open_commit_log(config: MessageStoreConfig, room: Callable[[int], bool]) -> CommitLog:
    """The commit log of ``config``: written with pwrite under SYNC_FLUSH, through the map otherwise;
    its next segment prepared ahead when ``warm_commit_log`` (``room(nbytes)``: whether the disk has room)."""
    commit_log = CommitLog(config.commit_log_dir, config.mapped_file_size_commit_log)
    # SYNC_FLUSH: pwrite. Each send's fdatasync cleans the page the next send writes, and a mapped
    # write then faults it writable again: measured 319 -> 364 us of broker CPU and 0.8 -> 1.5 ms
    # round trip per single send (bench.send_cpu --mode cpu); ASYNC_FLUSH: 88 -> 64 us, mapped.
    commit_log.queue.mapped = config.flush_disk_type != SYNC_FLUSH
    if config.warm_commit_log:
        commit_log.queue.allocator = AllocateMappedFileService(config.mapped_file_size_commit_log, room=room)
    return commit_log


def _index_service(root: Path, config: MessageStoreConfig) -> IndexService | None:
    """The message index under ``root/index`` (None when ``message_index_enable`` is off)."""
    if not config.message_index_enable:
        return None
    return IndexService(
        root / "index",
        max_hash_slot_num=config.max_hash_slot_num,
        max_index_num=config.max_index_num,
        max_msgs_num_batch=config.max_msgs_num_batch,
    )


class MessageStore:
    """RocketMQ's ``DefaultMessageStore`` for one broker.

    Args:
        config: store options (paths, segment sizes, limits).
        store_host: ``"ip:port"`` (IPv4) of the broker as clients reach it; written into every record
            and into offset msg ids.

    Call :meth:`load` before use and :meth:`shutdown` at the end.
    """

    def __init__(self, config: MessageStoreConfig, *, store_host: str) -> None:
        self.config = config
        self.store_host = store_host
        self.root = Path(config.store_path_root_dir)
        self.commit_log = _open_commit_log(config, self._room_for)
        self.checkpoint = StoreCheckpoint(self.root / "checkpoint")
        self.consume_queue_table: dict[TopicQueueKey, ConsumeQueue] = {}
        self.topic_queue_table: dict[TopicQueueKey, int] = {}
        """Next queue offset of each queue (``CommitLog.topicQueueTable``)."""
        self.message_arriving_listener: MessageArrivingListener | None = None
        self.message_put_listener: Callable[[PutRecords], None] | None = None
        """Told of every put with its consumable records, on the putting thread, after the put lock
        is released (the broker answers a long-polling pull waiting for exactly these records)."""
        self.index_service = _index_service(self.root, config)
        self._put_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._commit_log_flush_lock = threading.Lock()
        self._delay_table = config.delay_level_table()
        self._memory_limit = _total_physical_memory() * config.access_message_in_memory_max_ratio // 100
        self._reader = MessageReader(self.commit_log, config, self._memory_limit)
        self._last_store_timestamp = 0
        self._flushed_offset = 0
        self._last_cq_flush = 0.0
        self._running = False
        self.clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)
        """Wall clock in ms used for store timestamps (tests may replace it)."""
        self.slave_mode = False
        """Refuse puts (SERVICE_NOT_AVAILABLE): a slave only appends what its master sends (store/ha)."""
        self.recovered_abnormally = False
        """Whether :meth:`load` found an ``abort`` file (the last run did not shut down cleanly)."""
        self._manifest: dict[TopicQueueKey, int] = {}
        self.dispatcher = CommitLogDispatcher(self._consume_queue_for, self.index_service, self._delay_table)
        """Consume-queue + index dispatch for puts, recovery, rebuilds and the HA slave."""
        self.lock = StoreLock(self.root)
        """The exclusive lock on ``<root>/lock``, taken by :meth:`load`, dropped by :meth:`shutdown`."""
        self._put = CommitLogPut(self)
        """Every put goes through it (under :attr:`_put_lock`)."""
        self.disk_guard = DiskSpaceGuard(
            config.commit_log_dir,
            lambda: config.disk_space_warning_level_ratio,  # updateBrokerConfig: at the next check
            min_free_bytes=config.max_message_size,
        )
        """Refuses puts while the disk is full (PutMessageStatus.DISK_FULL, ``disk.py``)."""
        self.disk_guard.listeners.append(self._on_disk_state)
        self.retention = CommitLogRetention(self)
        """Which segments may go, given consumers' progress (``retention.py``)."""
        self.consume_queue_preparer = ConsumeQueuePreparer(
            config.consume_queue_dir, config.mapped_file_size_consume_queue
        )
        """Makes the first file of a queue a pull waits on, off the put path (``cq_prepare.py``)."""

    @property
    def running(self) -> bool:
        return self._running

    # ------------------------------------------------------------------------------- lifecycle
    def load(self) -> None:
        """Open the store and recover it (``DefaultMessageStore.load`` + ``recover``).

        Clean start (no ``abort`` file): trust the segments, re-validate the last one. After a crash:
        re-scan the commit log from the checkpoint, verify magic code and CRC, truncate the torn
        tail, and repair consume queues (drop entries past the end, re-dispatch missing ones).

        Raises:
            StoreLockedError: another process (or store object) holds ``<root>/lock``.
            StoreError: the directory cannot be used (segment of the wrong size, not writable...).
        """
        self.lock.acquire()  # before the abort file: it belongs to the lock holder only
        try:
            self._load_locked()
        except BaseException:
            self.lock.release()
            raise

    def _load_locked(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            Path(self.config.consume_queue_dir).mkdir(parents=True, exist_ok=True)
            Path(self.config.commit_log_dir).mkdir(parents=True, exist_ok=True)
            abort = self.root / "abort"
            abnormal = abort.exists()
            abort.touch()
        except OSError as exc:
            raise StoreError(f"cannot use store directory {self.root}: {exc}") from exc
        self.recovered_abnormally = abnormal
        self.commit_log.damaged_dir = self.root / "damaged"
        discard_warm_files(Path(self.config.commit_log_dir))  # a warm segment the last run did not use
        padded = pad_short_segments(Path(self.config.commit_log_dir), self.config.mapped_file_size_commit_log)
        self.commit_log.load()
        damaged = self._load_consume_queues()
        cp = self.checkpoint
        cp.load()
        for cq in self.consume_queue_table.values():
            cq.recover(thorough=abnormal)
        last = self.commit_log.queue.last()
        dispatch_from = cp.logics_offset if cp.valid else 0
        if abnormal:
            start = min(cp.physic_offset, cp.logics_offset) if cp.valid else 0
            log.warning("store %s was not shut down cleanly; recovering from offset %d", self.root, start)
        else:
            start = min(last.file_from_offset if last else 0, dispatch_from)
        if padded is not None:  # a truncated segment: re-check it and everything after it
            start = min(start, padded)
        index = self.index_service
        if index is not None:
            index.load(not abnormal, cp.index_msg_timestamp if cp.valid else 0)
            start = min(start, index.end_phy_offset)
        end = self.commit_log.recover(
            start,
            self.config.check_crc_on_recover or abnormal,
            lambda info: self._redispatch(info, dispatch_from),
        )
        if index is not None:
            index.truncate(end)
            cp.index_msg_timestamp = index.flush()
        min_phy = self.commit_log.get_min_offset()
        for key, cq in self.consume_queue_table.items():
            cq.truncate_dirty_logic_files(end)
            cq.correct_min_offset(min_phy)
            self.topic_queue_table[key] = cq.get_max_offset_in_queue()
        self._check_consume_queues(damaged, end, thorough=abnormal)
        self._flushed_offset = end
        cp.physic_offset = cp.logics_offset = end
        self.checkpoint.flush()
        self._last_cq_flush = time.monotonic()
        self.disk_guard.check(end)  # a store opened on a full disk refuses puts from the start
        queue = self.commit_log.queue
        queue.request_next()  # with warm segments: the next one gets ready now
        if queue.allocator is not None and queue.last() is None:
            queue.allocator.wait_ready(FIRST_WARM_WAIT)  # the first put does not wait on the disk
        self._running = True

    def _load_consume_queues(self) -> dict[TopicQueueKey, str]:
        """Open every consume queue; one that cannot be opened is moved aside and reported for rebuild."""
        root = Path(self.config.consume_queue_dir)
        damaged: dict[TopicQueueKey, str] = {}
        for topic_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            for qdir in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
                if not qdir.name.isdigit():
                    log.warning("ignoring %s: not a queue id", qdir)
                    continue
                key = (topic_dir.name, int(qdir.name))
                discard_warm_files(qdir)  # a first file being prepared when the last run stopped
                cq = ConsumeQueue(key[0], key[1], root, self.config.mapped_file_size_consume_queue)
                try:
                    cq.load()
                except StoreError as exc:
                    aside = move_queue_aside(qdir, self.root / "damaged")
                    damaged[key] = f"unreadable ({exc}; its files are kept in {aside})"
                    cq = ConsumeQueue(key[0], key[1], root, self.config.mapped_file_size_consume_queue)
                self.consume_queue_table[key] = cq
        return damaged

    def _check_consume_queues(self, damaged: dict[TopicQueueKey, str], end: int, *, thorough: bool) -> None:
        """Check every consume queue against the commit log and the manifest; rebuild the damaged
        ones from the commit log (``tidemq/store/repair.py``, one WARNING per queue)."""
        for key, why in missing_from_manifest(load_manifest(self.root), self.consume_queue_table).items():
            damaged.setdefault(key, why)
        for key, cq in self.consume_queue_table.items():
            if key not in damaged:
                problem = check_consume_queue(cq, self.commit_log, end, thorough)
                if problem is not None:
                    damaged[key] = f"damaged ({problem})"
        if damaged:
            rebuild_consume_queues(
                self.commit_log, damaged, self._reset_consume_queue, self._dispatch_rebuilt
            )
            for key in damaged:
                self.topic_queue_table[key] = self.consume_queue_table[key].get_max_offset_in_queue()
        self._save_manifest()

    def _reset_consume_queue(self, key: TopicQueueKey) -> ConsumeQueue:
        old = self.consume_queue_table.pop(key, None)
        if old is not None:
            old.destroy()
        return self._consume_queue_for(key[0], key[1])

    def _dispatch_rebuilt(self, info: RecordInfo) -> None:
        self.dispatcher.dispatch_record(info, index=False)

    def _save_manifest(self) -> None:
        table = {k: cq.get_max_offset_in_queue() for k, cq in list(self.consume_queue_table.items())}
        if table != self._manifest:
            try:
                save_manifest(self.root, table)
                self._manifest = table
            except StoreError as exc:
                log.warning("cannot write %s: %s", self.root / "consumequeue.json", exc)

    def _redispatch(self, info: RecordInfo, dispatch_from: int) -> None:
        """Recovery / HA: index ``info`` and, from ``dispatch_from`` on, give it its consume-queue entry."""
        consume_queue = info.commit_log_offset >= dispatch_from
        self.dispatcher.dispatch_record(info, consume_queue=consume_queue)
        if consume_queue and MessageSysFlag.get_transaction_value(info.sys_flag) in _CONSUMABLE:
            self._last_store_timestamp = max(self._last_store_timestamp, info.store_timestamp)

    def shutdown(self) -> None:
        """Flush everything, write the checkpoint, remove ``abort`` and close the files."""
        if not self._running:
            return
        self.flush()
        self.flush_consume_queue()
        self._running = False
        self.consume_queue_preparer.shutdown()
        allocator = self.commit_log.queue.allocator
        if allocator is not None:
            allocator.shutdown()
        with self._put_lock:
            self.commit_log.close()
            for cq in self.consume_queue_table.values():
                cq.close()
            if self.index_service is not None:
                self.index_service.shutdown()
        try:
            (self.root / "abort").unlink()
        except FileNotFoundError:
            pass
        self.lock.release()

    # ------------------------------------------------------------------------------------- put
    def find_consume_queue(self, topic: str, queue_id: int, create: bool = False) -> ConsumeQueue | None:
        """The consume queue of (topic, queue_id), with every acknowledged put in it; created (empty)
        when ``create``."""
        self._settle()
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None and create:
            cq = self._consume_queue_for(topic, queue_id)
        return cq

    def _consume_queue_for(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue of (topic, queue_id), created when missing (the dispatcher's lookup: no
        settling, it runs under the put lock)."""
        key = (topic, queue_id)
        cq = self.consume_queue_table.get(key)
        if cq is None:
            cq = ConsumeQueue(
                topic, queue_id, self.config.consume_queue_dir, self.config.mapped_file_size_consume_queue
            )
            self.consume_queue_table[key] = cq
        return cq

    def _tags_code(self, topic: str, properties: str, store_timestamp: int) -> int:
        return self.dispatcher.tags_code(topic, properties, store_timestamp)

    def put_message(self, inner: MessageExtBrokerInner) -> PutMessageResult:
        """Append one message; assigns queue and commit-log offsets and the store timestamp.

        Mirrors ``DefaultMessageStore.putMessage`` (done by :class:`CommitLogPut`). The consume-queue
        entry is written before this returns (or, with ``dispatcher.schedule`` set, before any read
        of it); durability needs :meth:`flush` (the broker awaits it for SYNC_FLUSH). Fills in
        ``inner.queue_offset``, ``store_timestamp``, ``store_host`` and ``offset_msg_id``.

        Returns:
            ``PUT_OK`` with ``append_result``, or MESSAGE_ILLEGAL (topic > 127 bytes, record larger
            than ``max_message_size``), PROPERTIES_SIZE_EXCEEDED, SERVICE_NOT_AVAILABLE (not loaded
            or shut down), UNKNOWN_ERROR (I/O failure) with a ``remark``.
        """
        return self._put.put_messages([inner])

    def put_messages(self, inners: list[MessageExtBrokerInner]) -> PutMessageResult:
        """Append messages as contiguous records, each after the delay-level rewrite (contiguous queue
        offsets per queue; :meth:`CommitLogPut.put_messages`). Statuses as :meth:`put_message`."""
        return self._put.put_messages(inners)

    def put_message_batches(self, batches: list[MessageExtBatch]) -> PutMessageResult:
        """Append several batches (each one queue, any topics) as one contiguous write, ``DELAY`` not
        looked at: a transaction's commit puts its real message and op record so, and a crash
        cannot keep the first without the second's bytes being written in the same write."""
        return self._put.put_message_batches(batches)

    def put_message_batch(self, batch: MessageExtBatch) -> PutMessageResult:
        """Append the messages of ``batch`` (one queue, shared header fields) as contiguous records.

        Mirrors ``DefaultMessageStore.putMessages(MessageExtBatch)``: the broker's SEND_BATCH_MESSAGE
        path, with no per-message object (:meth:`CommitLogPut.put_message_batch`).
        """
        return self._put.put_message_batch(batch)

    def put_message_single(
        self,
        topic: str,
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: str,
        reconsume_times: int,
        flag: int,
        body: bytes,
        properties: str,
    ) -> PutMessageResult:
        """:meth:`put_message_batch` of one message given field by field (``born_timestamp`` ms,
        ``born_host`` ``"ip:port"``, ``properties`` the stored text): the broker's plain single send,
        with no :class:`MessageExtBatch` to build (:meth:`CommitLogPut.put_message_single`)."""
        return self._put.put_message_single(
            topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times, flag, body, properties
        )

    def dispatch_pending(self) -> None:
        """Dispatch the puts that wait for it, then tell the message arriving listener.

        With ``dispatcher.schedule`` set, a put returns before its consume-queue and index entries are
        written; the broker's loop runs this just after (RocketMQ's ReputMessageService behind the
        commit log). Anything that reads a consume queue or the index drains first (:meth:`_settle`),
        so a reader never misses an acknowledged message.
        """
        with self._put_lock:
            self._drain_locked()
            arrivals = self.dispatcher.take_arrivals()
        self._notify_arrivals(arrivals)

    def _settle(self) -> None:
        """Dispatch pending puts before a read (their arrivals are told by :meth:`dispatch_pending`)."""
        if self.dispatcher.pending:
            with self._put_lock:
                self._drain_locked()

    def _drain_locked(self) -> bool:
        """``dispatcher.dispatch_pending()`` (caller holds the put lock); False when the disk ran out
        of space writing a consume queue: the puts stay pending (acknowledged, in the commit log,
        not yet visible), the disk guard turns full (one WARNING, no traceback), and they are
        dispatched once it is writable again (:meth:`_on_disk_state`) or by the next read.

        Raises:
            OSError: any other I/O error (the puts stay pending too).
        """
        try:
            self.dispatcher.dispatch_pending()
            return True
        except OSError as exc:
            if exc.errno not in NO_SPACE_ERRNOS:
                raise
            self.disk_guard.no_space(exc)
            return False

    def _on_disk_state(self, full: bool) -> None:
        """Disk guard listener: writable again, dispatch what a full disk held back."""
        if full or not self.dispatcher.pending:
            return
        schedule = self.dispatcher.schedule
        if schedule is not None:
            schedule(self.dispatch_pending)
        else:
            self.dispatch_pending()

    def _notify_arrivals(self, arrivals: list[Arrival]) -> None:
        listener = self.message_arriving_listener
        if listener is None:
            return
        for arrival in arrivals:
            try:
                listener(*arrival)
            except Exception:
                log.exception("message arriving listener failed")

    # ------------------------------------------------------------------------------------ flush
    def flush(self) -> int:
        """fsync the commit log; returns the flushed commit-log offset. Thread-safe.

        At most every ``flush_interval_consume_queue`` ms it also fsyncs the consume queues and
        writes the checkpoint (``FlushConsumeQueueService``). SYNC_FLUSH's group commit calls
        :meth:`flush_commit_log` instead, so a send never waits behind that.
        """
        with self._flush_lock:
            flushed = self.flush_commit_log()
            if (time.monotonic() - self._last_cq_flush) * 1000 >= self.config.flush_interval_consume_queue:
                self._flush_consume_queue_locked(force_index=False)  # the index: every 10 s
            return flushed

    def flush_commit_log(self) -> int:
        """fsync the commit log only (``GroupCommitService.doCommit``); returns the flushed offset.

        Thread-safe; concurrent callers are serialised (a later caller returns at once if an earlier
        flush already covered its data: group commit). The offset returned is never past what is on
        disk: each segment's position is read before its ``fdatasync``.
        """
        with self._commit_log_flush_lock:
            if self.commit_log.get_max_offset() > self._flushed_offset:
                self._flushed_offset = max(self._flushed_offset, self.commit_log.flush())
            return self._flushed_offset

    def flush_consume_queue(self) -> None:
        """fsync every consume queue and write the checkpoint (``FlushConsumeQueueService``)."""
        with self._flush_lock:
            self._flush_consume_queue_locked()

    def _flush_consume_queue_locked(self, *, force_index: bool = True) -> None:
        with self._put_lock:
            self._drain_locked()  # the checkpoint must not claim entries not yet written
            pending_from = self.dispatcher.pending_from()
            logics_offset = self.commit_log.get_max_offset() if pending_from is None else pending_from
            timestamp = self._last_store_timestamp
        for cq in list(self.consume_queue_table.values()):
            cq.flush()
        self.flush_commit_log()
        cp = self.checkpoint
        cp.logics_offset = logics_offset
        cp.physic_offset = self._flushed_offset
        cp.physic_msg_timestamp = cp.logics_msg_timestamp = timestamp
        if self.index_service is not None:
            cp.index_msg_timestamp = self.index_service.flush(force_index)
        cp.flush()
        self._save_manifest()
        self._last_cq_flush = time.monotonic()

    # ------------------------------------------------------------------------------------- get
    # ----------------------------------------------------------------------------- offsets/time
    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        tag_codes: set[int] | None,
        record_filter: RecordFilter | None = None,
    ) -> GetMessageResult:
        """Read up to ``max_msg_nums`` records of a queue from logical ``offset``.

        Mirrors ``DefaultMessageStore.getMessage`` (status table of protocol.md §3.4). ``tag_codes``
        None means all tags; otherwise an entry matches when its tag code is in the set.
        ``record_filter(buffer, position)`` (SQL92), when given, must also accept the stored record
        (:mod:`tidemq.store.filtered_scan`). Stops at
        ``max_msg_nums``, 256 KiB / 32 records (64 KiB / 8 when far behind), and scans at most
        ``max(16000, max_msg_nums * 20)`` bytes of consume queue. ``group`` is informational.
        A read of a queue never written starts making its consume queue's first file in the
        background (:class:`~tidemq.store.cq_prepare.ConsumeQueuePreparer`).
        """
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None and self._running and not self.topic_queue_table.get((topic, queue_id)):
            self.consume_queue_preparer.prepare(topic, queue_id)
        return self._reader.get_message(cq, offset, max_msg_nums, tag_codes, record_filter)

    def get_message_from_put(
        self, put: PutRecords, run: PutRun, max_msg_nums: int, tag_codes: frozenset[int] | None
    ) -> GetMessageResult | None:
        """:meth:`get_message` at the first queue offset of ``run`` (one queue's records of ``put``,
        told to ``message_put_listener``), read from the put's bytes before its consume-queue entries
        may be written; None when it cannot be answered so (a record the tag filter rejects): the
        caller then waits for the dispatch as usual.

        A queue's first put (no consume queue yet, the run starts at offset 0) is answered too, with
        min offset 0: the dispatch creates the consume queue's first file after the put's response,
        and waiting for it cost the first message of each new queue 0.5 to 5 ms (file creation on
        ext4) before its held pull was answered."""
        topic, queue_id, first, _starts, _sizes, properties = run
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None and first != 0:
            return None
        if tag_codes is not None:
            tags_code, now = self.dispatcher.tags_code, put.store_timestamp
            if not all(tags_code(topic, p, now) in tag_codes for p in properties[:max_msg_nums]):
                return None
        min_offset = cq.get_min_offset_in_queue() if cq is not None else 0
        return self._reader.get_message_from_put(put, run, min_offset, max_msg_nums)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next logical offset to be written (number of entries); 0 for an unknown queue."""
        cq = self.find_consume_queue(topic, queue_id)
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """First logical offset whose message still exists; 0 for an unknown queue."""
        cq = self.find_consume_queue(topic, queue_id)
        return cq.get_min_offset_in_queue() if cq is not None else 0

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def _unit_store_time(self, cq: ConsumeQueue, index: int) -> int:
        unit = cq.get_unit(index)
        if unit is None or not unit.is_valid:
            return -1
        return self.commit_log.pickup_store_timestamp(unit.commit_log_offset, unit.size)

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        """STORETIMESTAMP (ms) of the message at a queue offset; -1 if there is none."""
        cq = self.find_consume_queue(topic, queue_id)
        if (
            cq is None
            or not cq.get_min_offset_in_queue() <= consume_queue_offset < cq.get_max_offset_in_queue()
        ):
            return -1
        return self._unit_store_time(cq, consume_queue_offset)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time (ms) of the message at the queue's min offset, -1 if none (code 32)."""
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.get_min_offset_in_queue())

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Queue offset for a store time in ms (SEARCH_OFFSET_BY_TIMESTAMP, protocol.md §3.5).

        Binary search on store time: an exact match, else the closer of the two neighbours (the
        earlier one on a tie); 0 if the queue is unknown or empty. Mirrors
        ``ConsumeQueue.getOffsetInQueueByTime``.
        """
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None:
            return 0
        low, high = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue() - 1
        left = right = -1
        left_value = right_value = -1
        while low <= high:
            mid = (low + high) // 2
            store_time = self._unit_store_time(cq, mid)
            if store_time < 0:
                low, left = mid + 1, mid
                continue
            if store_time == timestamp:
                return mid
            if store_time > timestamp:
                high, right, right_value = mid - 1, mid, store_time
            else:
                low, left, left_value = mid + 1, mid, store_time
        if left_value == -1:
            return max(right, 0)
        if right_value == -1:
            return max(left, 0)
        return right if abs(timestamp - left_value) > abs(timestamp - right_value) else left

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """Whether the message at a queue offset lies further than the in-memory ratio of RAM from the end."""
        cq = self.find_consume_queue(topic, queue_id)
        unit = cq.get_unit(consume_offset) if cq is not None else None
        if unit is None:
            return False
        return self._reader.is_in_disk(unit.commit_log_offset, self.commit_log.get_max_offset())

    # ------------------------------------------------------------------------- by commit offset
    def select_one_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> bytes | None:
        """The raw record at a commit-log offset (VIEW_MESSAGE_BY_ID); None if absent."""
        if size is not None:
            return self.commit_log.get_message(commit_log_offset, size)
        return self.commit_log.get_record(commit_log_offset)

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        """The decoded message at a commit-log offset (body left compressed); None if absent."""
        record = self.commit_log.get_record(commit_log_offset)
        if record is None:
            return None
        try:
            return decode_message(record, decompress=False)[0]
        except ProtocolError:
            log.warning("no valid record at commit-log offset %d", commit_log_offset)
            return None

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """Stored records of ``topic`` indexed under ``key`` (UNIQ_KEY or a KEYS token) and stored
        within ``[begin, end]`` ms, at most ``max_num`` (QUERY_MESSAGE). Mirrors
        ``DefaultMessageStore.queryMessage``; empty when ``message_index_enable`` is off."""
        self._settle()
        return query_message(self.index_service, self.commit_log.get_record, topic, key, max_num, begin, end)

    # ----------------------------------------------------------------------- topics / retention
    def topics_and_queues(self) -> dict[str, list[int]]:
        """``{topic: sorted queue ids}`` of every consume queue in the store."""
        self._settle()
        out: dict[str, list[int]] = {}
        for topic, qid in sorted(self.consume_queue_table):
            out.setdefault(topic, []).append(qid)
        return out

    def delete_topics(self, topics: set[str]) -> int:
        """Delete the consume queues of ``topics`` (``DefaultMessageStore.deleteTopics``); returns count."""
        count = 0
        self.consume_queue_preparer.cancel(topics)
        with self._put_lock:
            self._drain_locked()
            for key in [k for k in self.consume_queue_table if k[0] in topics]:
                self.consume_queue_table.pop(key).destroy()
                self.topic_queue_table.pop(key, None)
                count += 1
            for topic in topics:
                shutil.rmtree(Path(self.config.consume_queue_dir) / topic, ignore_errors=True)
        return count

    def disk_usage(self) -> DiskUsage | None:
        """df's figures for the file system of the commit log (None if ``statvfs`` fails)."""
        try:
            return disk_usage(self.config.commit_log_dir)
        except OSError:
            return None

    def _room_for(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more (a warm segment) keep the disk at or below
        ``disk_space_warning_level_ratio`` with one largest message to spare."""
        usage = self.disk_usage()
        if usage is None:
            return False
        spare = usage.available - nbytes
        return (
            usage.percent_after(nbytes) <= self.config.disk_space_warning_level_ratio
            and spare >= self.config.max_message_size
        )

    def disk_used_ratio(self) -> float:
        """Percent used of the commit log's file system, as ``df`` computes it (``used = blocks -
        bfree``, ``used / (used + bavail)``: ``tidemq/store/disk.py``); 0.0 if unknown. Retention
        reads it here (tests may replace it); the put path's :attr:`disk_guard` reads statvfs itself."""
        usage = self.disk_usage()
        return usage.percent if usage is not None else 0.0

    def delete_expired_files(
        self, force: bool = False, *, scheduled: bool = True, now_ms: int | None = None
    ) -> int:
        """One retention pass (:class:`~tidemq.store.retention.CommitLogRetention`); returns the
        number of commit-log segments deleted (never the one being written), then moves the consume
        queues' min offsets (:meth:`clean_expired_consume_queue`).

        Unforced, a segment goes only when it is older than ``file_reserved_time`` hours at
        ``now_ms`` (default: now) and every consumer known to :attr:`retention` has consumed it.
        ``force`` (or ``clean_file_forcibly_enable``) lets expired segments go whoever still needs
        them and unexpired ones while the disk is above ``disk_space_clean_forcibly_ratio``; a loss
        is one ERROR line. ``scheduled`` False: only when the disk is above
        ``disk_max_used_space_ratio`` (the broker's periodic check outside ``delete_when``).
        """
        deleted = self.retention.run(scheduled=scheduled, force=force, now_ms=now_ms)
        if deleted:
            self.clean_expired_consume_queue()
            self.disk_guard.check(self.commit_log.get_max_offset())
        return deleted

    def clean_expired_consume_queue(self) -> None:
        """Drop consume-queue files pointing only below the commit log's min offset; move min offsets."""
        self._settle()
        min_phy = self.commit_log.get_min_offset()
        for cq in list(self.consume_queue_table.values()):
            cq.delete_expired_file(min_phy)
        if self.index_service is not None:
            self.index_service.delete_expired_file(min_phy)
