"""The message store: commit log + consume queues + recovery + lookups + retention.

Mirrors RocketMQ's ``DefaultMessageStore`` (with the dispatch of ``ReputMessageService`` done
synchronously inside the put, or just after it). Plain synchronous Python over files: no threads, no
asyncio. Puts are serialised by one lock; reads run concurrently; ``flush()`` may be called from
another thread while puts happen (the broker calls it periodically for ASYNC_FLUSH and before
answering a SYNC_FLUSH send).

:class:`MessageStore` keeps the lifecycle, the dispatch of scheduled puts, flushing and the pull
read, and delegates the rest to components it owns, as RocketMQ's store does to its services:

* the put path (encoding, size checks, the append, queue offsets: RocketMQ's
  ``CommitLog.putMessage(s)``): :class:`~tidemq.store.put.CommitLogPut` (``put.py``);
* the consume-queue table, its files and manifest: ``store.consume_queues``,
  :class:`~tidemq.store.cq_store.ConsumeQueueStore` (``cq_store.py``);
* start-up and recovery: ``store.recovery``, :class:`~tidemq.store.recovery.StoreRecovery`;
* lookups by store time, commit-log offset and key: ``store.lookup``,
  :class:`~tidemq.store.lookup.MessageLookup` (``lookup.py``);
* retention and cleaning (``CleanCommitLogService``, ``CleanConsumeQueueService``):
  ``store.retention``, :class:`~tidemq.store.retention.CommitLogRetention` (``retention.py``).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sized
from pathlib import Path

from tidemq.store.allocate import AllocateMappedFileService
from tidemq.store.checkpoint import StoreCheckpoint
from tidemq.store.commit_log import CommitLog
from tidemq.store.config import SYNC_FLUSH, MessageStoreConfig
from tidemq.store.consume_queue import ConsumeQueue
from tidemq.store.cq_prepare import ConsumeQueuePreparer
from tidemq.store.cq_store import ConsumeQueueStore
from tidemq.store.disk import NO_SPACE_ERRNOS, DiskSpaceGuard, disk_usage
from tidemq.store.dispatcher import SCHEDULE_TOPIC as SCHEDULE_TOPIC  # re-exported
from tidemq.store.dispatcher import (
    Arrival,
    CommitLogDispatcher,
    PutRecords,
    PutRun,
    TopicQueueKey,
)
from tidemq.store.dispatcher import tags_string_to_tags_code as tags_string_to_tags_code  # re-exported
from tidemq.store.filtered_scan import RecordFilter
from tidemq.store.index import IndexService
from tidemq.store.lock import StoreLock
from tidemq.store.lookup import MessageLookup
from tidemq.store.message_reader import MessageReader
from tidemq.store.put import CommitLogPut
from tidemq.store.recovery import StoreRecovery
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


def _room_for(config: MessageStoreConfig, nbytes: int) -> bool:
    """Whether ``nbytes`` more (a warm segment) keep the commit log's disk at or below
    ``disk_space_warning_level_ratio`` with one largest message to spare."""
    try:
        usage = disk_usage(config.commit_log_dir)
    except OSError:
        return False
    spare = usage.available - nbytes
    return (
        usage.percent_after(nbytes) <= config.disk_space_warning_level_ratio
        and spare >= config.max_message_size
    )


def _disk_guard(config: MessageStoreConfig) -> DiskSpaceGuard:
    """The guard that refuses puts while the commit log's disk is full (``disk.py``)."""
    return DiskSpaceGuard(
        config.commit_log_dir,
        lambda: config.disk_space_warning_level_ratio,  # updateBrokerConfig: at the next check
        min_free_bytes=config.max_message_size,
    )


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
        self.commit_log = _open_commit_log(config, functools.partial(_room_for, config))
        self.checkpoint = StoreCheckpoint(self.root / "checkpoint")
        self.consume_queues = ConsumeQueueStore(config, self.root, self._settle)
        """The consume queues, their files and manifest (``cq_store.py``)."""
        self.consume_queue_table = self.consume_queues.table
        """``{(topic, queue_id): ConsumeQueue}`` (``consumeQueueTable``; the dict of :attr:`consume_queues`)."""
        self.topic_queue_table: dict[TopicQueueKey, int] = {}
        """Next queue offset of each queue (``CommitLog.topicQueueTable``)."""
        self.message_arriving_listener: MessageArrivingListener | None = None
        self.message_put_listener: Callable[[PutRecords], None] | None = None
        """Told of every put with its consumable records, on the putting thread, after the put lock
        is released (the broker answers a long-polling pull waiting for exactly these records)."""
        self.message_put_waiters: Sized = (True,)
        """The put listener is told only while this is non-empty (the broker hands it its table of
        held pulls: no pull held, no :class:`PutRecords` made); default: always."""
        self.index_service = _index_service(self.root, config)
        self.put_lock = threading.Lock()
        """The lock every write to the commit log holds (puts, the HA slave's appends, topic
        deletion, the checkpoint's flush): ``DefaultMessageStore``'s putMessageLock. A plain
        attribute, not a property: :class:`CommitLogPut` takes it on every send."""
        self._flush_lock = threading.Lock()
        self._commit_log_flush_lock = threading.Lock()
        self._delay_table = config.delay_level_table()
        memory_limit = _total_physical_memory() * config.access_message_in_memory_max_ratio // 100
        self._reader = MessageReader(self.commit_log, config, memory_limit)
        self.last_store_timestamp = 0
        """Store timestamp (ms since the epoch) of the last record written or dispatched; a put's own
        time never goes below it. Written under :attr:`put_lock` by :class:`CommitLogPut` and
        :meth:`advance_store_timestamp`, read by the checkpoint (logicsMsgTimestamp)."""
        self._flushed_offset = 0
        self._last_cq_flush = 0.0
        self._cq_flush_mark: tuple[int, int] | None = None
        """(commit-log end, consume queues) at the last complete consume-queue flush: while both are
        the same nothing new is in the queues, the index or the checkpoint, and the periodic flush
        skips them (no fsync at rest)."""
        self.running = False
        """Between :meth:`load` (once it has succeeded) and :meth:`shutdown`; set by those two only
        (a plain attribute: every put reads it)."""
        self.clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)
        """Wall clock in ms used for store timestamps (tests may replace it)."""
        self.slave_mode = False
        """Refuse puts (SERVICE_NOT_AVAILABLE): a slave only appends what its master sends (store/ha)."""
        self.recovered_abnormally = False
        """Whether :meth:`load` found an ``abort`` file (the last run did not shut down cleanly)."""
        self.dispatcher = CommitLogDispatcher(
            self.consume_queues.find_or_create, self.index_service, self._delay_table
        )
        """Consume-queue + index dispatch for puts, recovery, rebuilds and the HA slave."""
        self.lock = StoreLock(self.root)
        """The exclusive lock on ``<root>/lock``, taken by :meth:`load`, dropped by :meth:`shutdown`."""
        self._put = CommitLogPut(self)
        """Every put goes through it (under :attr:`put_lock`)."""
        self.disk_guard = _disk_guard(config)
        """Refuses puts while the disk is full (PutMessageStatus.DISK_FULL, ``disk.py``)."""
        self.disk_guard.listeners.append(self._on_disk_state)
        self.retention = CommitLogRetention(self)
        """Which segments may go, given consumers' progress; deletes them and cleans the consume
        queues and the index after them (``retention.py``)."""
        self.recovery = StoreRecovery(self)
        """Opens and recovers the files in :meth:`load` (``recovery.py``)."""
        self.lookup = MessageLookup(
            self.commit_log, self.find_consume_queue, self._reader, self.index_service, self._settle
        )
        """Lookups by queue offset, store time, commit-log offset and key (``lookup.py``)."""
        self.consume_queue_preparer = ConsumeQueuePreparer(
            config.consume_queue_dir, config.mapped_file_size_consume_queue
        )
        """Makes the first file of a queue a pull waits on, off the put path (``cq_prepare.py``)."""

    def advance_store_timestamp(self, store_timestamp: int) -> None:
        """Raise the last store timestamp (ms since the epoch) to ``store_timestamp`` when it is later:
        a record dispatched by recovery or the HA slave (``doDispatch``; the checkpoint's
        logicsMsgTimestamp). A put's own time never goes below it."""
        if store_timestamp > self.last_store_timestamp:
            self.last_store_timestamp = store_timestamp

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
            end = self.recovery.recover()
            self._flushed_offset = end
            self._last_cq_flush = time.monotonic()
            self.disk_guard.check(end)  # a store opened on a full disk refuses puts from the start
            queue = self.commit_log.queue
            queue.request_next()  # with warm segments: the next one gets ready now
            if queue.allocator is not None and queue.last() is None:
                queue.allocator.wait_ready(FIRST_WARM_WAIT)  # the first put does not wait on the disk
        except BaseException:
            self.lock.release()
            raise
        self.running = True

    def shutdown(self) -> None:
        """Flush everything, write the checkpoint, remove ``abort`` and close the files."""
        if not self.running:
            return
        self.flush()
        self.flush_consume_queue()
        self.running = False
        self.consume_queue_preparer.shutdown()
        allocator = self.commit_log.queue.allocator
        if allocator is not None:
            allocator.shutdown()
        with self.put_lock:
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
            cq = self.consume_queues.find_or_create(topic, queue_id)
        return cq

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
        with self.put_lock:
            self._drain_locked()
            arrivals = self.dispatcher.take_arrivals()
        self.notify_arrivals(arrivals)

    def _settle(self) -> None:
        """Dispatch pending puts before a read (their arrivals are told by :meth:`dispatch_pending`)."""
        if self.dispatcher.pending:
            with self.put_lock:
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

    def notify_arrivals(self, arrivals: list[Arrival]) -> None:
        """Tell :attr:`message_arriving_listener` of each :data:`~tidemq.store.dispatcher.Arrival` the
        dispatcher took (``NotifyMessageArrivingListener.arriving``); called outside the put lock (by
        :class:`CommitLogPut` and :meth:`dispatch_pending`). A listener that raises is logged and the
        rest are still told; raises nothing."""
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
            if self._consume_queue_flush_due():
                self._flush_consume_queue_locked(force_index=False)  # the index: every 10 s
            return flushed

    def flush_needed(self) -> bool:
        """Whether :meth:`flush` has anything to do now (cheap, any thread): commit-log bytes not
        fsynced, or a consume-queue flush due with something new since the last one. The broker's
        periodic flush asks first, so an idle store costs no thread hop and no fsync."""
        return self.commit_log.get_max_offset() > self._flushed_offset or self._consume_queue_flush_due()

    def _consume_queue_flush_due(self) -> bool:
        if (time.monotonic() - self._last_cq_flush) * 1000 < self.config.flush_interval_consume_queue:
            return False
        return self._cq_flush_mark != (self.commit_log.get_max_offset(), len(self.consume_queue_table))

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
        with self.put_lock:
            self._drain_locked()  # the checkpoint must not claim entries not yet written
            pending_from = self.dispatcher.pending_from()
            logics_offset = self.commit_log.get_max_offset() if pending_from is None else pending_from
            timestamp = self.last_store_timestamp
            mark = None if pending_from is not None else (logics_offset, len(self.consume_queue_table))
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
        self.consume_queues.save_manifest()
        self._last_cq_flush = time.monotonic()
        self._cq_flush_mark = mark

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
        if cq is None and self.running and not self.topic_queue_table.get((topic, queue_id)):
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

    # ---------------------------------------------------------------------------------- topics
    def delete_topics(self, topics: set[str]) -> int:
        """Delete the consume queues of ``topics`` (``DefaultMessageStore.deleteTopics``); returns count."""
        self.consume_queue_preparer.cancel(topics)
        with self.put_lock:
            self._drain_locked()
            removed = self.consume_queues.remove_topics(topics)
            for key in removed:
                self.topic_queue_table.pop(key, None)
        return len(removed)
