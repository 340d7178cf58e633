"""The store's put path: encode messages as commit-log records and append them in one write.

Holds :class:`CommitLogPut`, the part of RocketMQ's ``CommitLog`` behind
``putMessage`` / ``putMessages`` (the delay-level rewrite, the size checks, the append, the queue
offsets of ``topicQueueTable``); :class:`~tidemq.store.message_store.MessageStore` (RocketMQ's
``DefaultMessageStore``) owns one and hands it every put. The records go to the files through
:class:`~tidemq.store.commit_log.CommitLog`, and to the consume queues and the index through the
store's :class:`~tidemq.store.dispatcher.CommitLogDispatcher`, under the store's put lock.

This is the hot path of every send: it works on whole runs of messages (:class:`MessageExtBatch`),
with no object or call frame per message.
"""

from __future__ import annotations

import logging
from itertools import accumulate
from operator import add
from typing import TYPE_CHECKING

from tidemq.errors import ProtocolError, StoreError
from tidemq.protocol.message import MessageConst, string_to_properties
from tidemq.protocol.message_codec import (
    MAX_PROPERTIES_BYTES,
    MessageSysFlag,
    RecordEncoder,
    create_offset_msg_id,
)
from tidemq.store.disk import NO_SPACE_ERRNOS
from tidemq.store.dispatcher import (
    CONSUMABLE,
    SCHEDULE_TOPIC,
    IndexRun,
    PutRecords,
    PutRun,
    TopicQueueKey,
    is_consumable,
)
from tidemq.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    MessageExtBatch,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
)

if TYPE_CHECKING:
    from tidemq.store.message_store import MessageStore

log = logging.getLogger(__name__)

_CONSUMABLE = CONSUMABLE
_HEX16 = "%016X"
_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
"""The bit set in the transaction value of records with no consume-queue entry (prepared: 4,
rolled back: 12; not: 0, committed: 8)."""


def _properties_of(inner: MessageExtBrokerInner) -> dict[str, str]:
    """The properties of ``inner`` as a dict: ``inner.properties``, which a caller setting
    ``properties_string`` fills with the same pairs (the broker's batch path does), so the hot path
    parses each string once; parsed here only when a caller gave the string alone."""
    if inner.properties_string and not inner.properties:
        return string_to_properties(inner.properties_string)
    return inner.properties


class CommitLogPut:
    """The puts of one :class:`MessageStore`: RocketMQ's ``CommitLog.putMessage`` / ``putMessages``.

    Args:
        store: the owning store. Its state is read at every put, never copied: its put lock, running
            and slave flags, clock, commit log, ``topic_queue_table``, dispatcher and listeners.

    Every method returns a :class:`PutMessageResult` and raises nothing for a refused or failed put;
    the statuses are listed on :meth:`put_messages`.
    """

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._msg_id_prefix = create_offset_msg_id(store.store_host, 0)[:-16]
        """Offset msg ids are this (store host in hex) + the commit-log offset as 16 hex digits."""
        self._encoders: dict[tuple[str, str], RecordEncoder] = {}
        self._max_delay_level = max(store.config.delay_level_table(), default=0)
        self._end = -1
        """The commit log's end after the last put (-1: not read yet): the disk guard's written offset."""

    def _apply_delay(self, inner: MessageExtBrokerInner) -> None:
        """A message with ``DELAY`` goes to SCHEDULE_TOPIC_XXXX (as RocketMQ's ``CommitLog.putMessage``)."""
        if (
            MessageSysFlag.get_transaction_value(inner.sys_flag) not in _CONSUMABLE
            or inner.topic == SCHEDULE_TOPIC
        ):
            return
        props = _properties_of(inner)
        try:
            level = int(props.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL, "0") or 0)
        except ValueError:
            return
        if level <= 0 or not self._max_delay_level:
            return
        level = min(level, self._max_delay_level)
        props = dict(props)
        props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props[MessageConst.PROPERTY_REAL_TOPIC] = inner.topic
        props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(inner.queue_id)
        inner.properties = props
        inner.properties_string = None
        inner.topic = SCHEDULE_TOPIC
        inner.queue_id = level - 1

    def put_messages(self, inners: list[MessageExtBrokerInner]) -> PutMessageResult:
        """Append messages as contiguous records (contiguous queue offsets per queue), each after
        the delay-level rewrite; consecutive messages sharing a queue and header fields are encoded
        as one :class:`MessageExtBatch`. More than one record must fit in ``max_message_size``
        together. ``append_result.msg_id`` joins the ids with ``,``. Fills in each message's
        ``queue_offset``, ``store_timestamp``, ``store_host`` and ``offset_msg_id``.

        Returns:
            ``PUT_OK`` with ``append_result``, or MESSAGE_ILLEGAL (topic > 127 bytes, record larger
            than ``max_message_size``, no message), PROPERTIES_SIZE_EXCEEDED, SERVICE_NOT_AVAILABLE
            (not loaded, shut down, or a slave), DISK_FULL (disk above
            ``disk_space_warning_level_ratio`` or out of space: nothing written), UNKNOWN_ERROR (other
            I/O failure) with a ``remark``.
        """
        refused = self._refuse_put()
        if refused is not None:
            return refused
        if not inners:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark="empty batch")
        batches: list[MessageExtBatch] = []
        last_key: tuple[str, int, int, int, str, int, int] | None = None
        for inner in inners:  # runs of messages that share a queue and header fields
            self._apply_delay(inner)
            key = (
                inner.topic,
                inner.queue_id,
                inner.sys_flag,
                inner.born_timestamp,
                inner.born_host or "0.0.0.0:0",
                inner.reconsume_times,
                inner.prepared_transaction_offset,
            )
            if key != last_key:
                batches.append(MessageExtBatch(*key))
                last_key = key
            last = batches[-1]
            last.flags.append(inner.flag)
            last.bodies.append(inner.body)
            last.properties.append(inner.stored_properties_string())
        result = self._put_batches(batches)
        append = result.append_result
        if append is not None:
            store_host = self._store.store_host
            for inner, q, msg_id in zip(inners, append.queue_offsets, append.msg_ids, strict=True):
                inner.queue_offset = q
                inner.store_timestamp = append.store_timestamp
                inner.store_host = store_host
                inner.offset_msg_id = msg_id
        return result

    def put_message_batch(self, batch: MessageExtBatch) -> PutMessageResult:
        """Append the messages of ``batch`` (one queue, shared header fields) as contiguous records.

        Mirrors ``CommitLog.putMessages(MessageExtBatch)``: no per-message object; the ``DELAY``
        property of its messages is not looked at. Statuses as :meth:`put_messages`.
        """
        refused = self._refuse_put()
        if refused is not None:
            return refused
        if len(batch.bodies) == 1 and len(batch.flags) == 1 and len(batch.properties) == 1:
            return self._put_one(
                batch.topic,
                batch.queue_id,
                batch.sys_flag,
                batch.born_timestamp,
                batch.born_host,
                batch.reconsume_times,
                batch.prepared_transaction_offset,
                batch.flags[0],
                batch.bodies[0],
                batch.properties[0],
            )
        if not batch.bodies:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark="empty batch")
        return self._put_batches([batch])

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
        """:meth:`put_message_batch` of a one-message batch given field by field (every plain single
        send: no :class:`MessageExtBatch` to build), ``prepared_transaction_offset`` 0. Same records,
        results and statuses."""
        store = self._store
        end = self._end
        if not store.running or store.slave_mode or end < 0:
            refused = self._refuse_put()
            if refused is not None:
                return refused
        elif store.disk_guard.poll(end):  # _refuse_put's last check, inline (every other put)
            return self._disk_full()
        return self._put_one(
            topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times, 0, flag, body, properties
        )

    def put_message_batches(self, batches: list[MessageExtBatch]) -> PutMessageResult:
        """:meth:`put_message_batch` for several batches in one contiguous write (statuses as
        :meth:`put_messages`)."""
        refused = self._refuse_put()
        if refused is not None:
            return refused
        if not batches or not all(b.bodies for b in batches):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark="empty batch")
        return self._put_batches(batches)

    def _encoder(self, topic: str, born_host: str) -> RecordEncoder:
        """The record encoder of (topic, born host), kept for the next puts (at most 4096).

        Raises:
            ProtocolError: topic longer than 127 bytes, or a born host that is not ``"ip:port"``.
        """
        key = (topic, born_host)
        encoder = self._encoders.get(key)
        if encoder is None:
            encoder = RecordEncoder(topic, born_host, self._store.store_host)
            if len(self._encoders) >= 4096:
                self._encoders.clear()
            self._encoders[key] = encoder
        return encoder

    def _refuse_put(self) -> PutMessageResult | None:
        store = self._store
        if not store.running:
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="message store is not running"
            )
        if store.slave_mode:  # a slave's log is the master's, byte for byte (store/ha)
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE,
                remark="message store is slave mode, so putMessage is forbidden",
            )
        end = self._end
        if end < 0:  # the first put: where recovery left the commit log
            end = self._end = store.commit_log.get_max_offset()
        if store.disk_guard.poll(end):
            return self._disk_full()
        return None

    def _disk_full(self) -> PutMessageResult:
        """The result of a put refused for a full disk (:class:`~tidemq.store.disk.DiskSpaceGuard`)."""
        guard = self._store.disk_guard
        usage = guard.last
        figures = f"{usage.percent:.1f}% used, " if usage is not None else ""
        return PutMessageResult(
            PutMessageStatus.DISK_FULL,
            remark=(
                f"disk full: the store's file system is {figures}above diskSpaceWarningLevelRatio "
                f"{guard.warning_ratio:g}% (or out of space); sends are accepted again once space is freed"
            ),
        )

    def _write_failed(self, exc: OSError | StoreError) -> PutMessageResult:
        """A put whose write raised: DISK_FULL without a traceback when the disk is out of space
        (an expected condition), else UNKNOWN_ERROR with one."""
        store = self._store
        cause = exc if isinstance(exc, OSError) else exc.__cause__
        if isinstance(cause, OSError) and cause.errno in NO_SPACE_ERRNOS:
            store.disk_guard.no_space(cause)
            return self._disk_full()
        log.exception("put failed in %s", store.root)
        return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, remark=f"store write failed: {exc}")

    def _put_one(
        self,
        topic: str,
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: str,
        reconsume_times: int,
        prepared_transaction_offset: int,
        flag: int,
        body: bytes,
        text: str,
    ) -> PutMessageResult:
        """:meth:`_put_batches` for one batch of one message (every single send), its fields given
        one by one: the same checks, records, dispatch, listeners and results, written for one record
        (no per-batch lists, maps or loops)."""
        store = self._store
        encoder = self._encoders.get((topic, born_host))
        if encoder is None:
            try:
                encoder = self._encoder(topic, born_host)
            except ProtocolError as exc:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=str(exc))
        raw = text.encode()
        if len(raw) > MAX_PROPERTIES_BYTES:
            return PutMessageResult(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                remark=f"properties longer than {MAX_PROPERTIES_BYTES} bytes",
            )
        size = encoder.fixed_size + len(body) + len(raw)
        max_size = store.config.max_message_size
        if size > max_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"message of {size} bytes exceeds max_message_size {max_size}",
            )
        consumable = not sys_flag & _PREPARED  # is_consumable: not a prepared or rolled-back half
        dispatcher = store.dispatcher
        try:
            with store.put_lock:
                if not store.running:
                    return PutMessageResult(
                        PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="message store is shut down"
                    )
                now = store.clock_ms()
                if now < store.last_store_timestamp:
                    now = store.last_store_timestamp
                mf, pos = store.commit_log.reserve(size)
                phy = mf.file_from_offset + pos
                q = store.topic_queue_table.get((topic, queue_id), 0) if consumable else 0
                data = encoder.encode_one(
                    flag,
                    body,
                    raw,
                    size,
                    queue_id,
                    sys_flag,
                    born_timestamp,
                    reconsume_times,
                    prepared_transaction_offset,
                    q,
                    phy,
                    now,
                )
                mf.write(pos, data)
                if consumable:
                    store.topic_queue_table[topic, queue_id] = q + 1
                store.last_store_timestamp = now
                drain_needed = dispatcher.dispatch_one(
                    topic, queue_id, q, phy, size, text, sys_flag, now, consumable
                )
                arrivals = dispatcher.take_arrivals() if dispatcher.schedule is None else None
        except (OSError, StoreError) as exc:
            return self._write_failed(exc)
        self._end = phy + size
        if drain_needed and dispatcher.schedule is not None:
            dispatcher.schedule(store.dispatch_pending)
        msg_id = self._msg_id_prefix + _HEX16 % phy
        put_listener = store.message_put_listener
        if put_listener is not None and consumable and store.message_put_waiters:  # a pull is held
            try:
                put_listener(
                    PutRecords(
                        [(topic, queue_id, q, [phy], [size], [text])],
                        data,
                        phy,
                        {(topic, queue_id): q + 1},
                        now,
                    )
                )
            except Exception:
                log.exception("message put listener failed")
        if arrivals:
            store.notify_arrivals(arrivals)
        return PutMessageResult(
            PutMessageStatus.PUT_OK,
            AppendMessageResult(AppendMessageStatus.PUT_OK, phy, size, msg_id, now, q, 1, [msg_id], [q]),
        )

    def _put_batches(self, batches: list[MessageExtBatch]) -> PutMessageResult:
        """Encode and append ``batches`` as one contiguous write, then dispatch them (consume queues,
        index) and tell the listeners: the one put path (``CommitLog.putMessages``)."""
        store = self._store
        max_size = store.config.max_message_size
        prepared: list[tuple[MessageExtBatch, RecordEncoder, list[bytes], list[int]]] = []
        total = count = 0
        for batch in batches:
            try:
                encoder = self._encoder(batch.topic, batch.born_host)
            except ProtocolError as exc:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=str(exc))
            raws = list(map(str.encode, batch.properties))  # map: no frame per call (hot path)
            if max(map(len, raws)) > MAX_PROPERTIES_BYTES:
                return PutMessageResult(
                    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                    remark=f"properties longer than {MAX_PROPERTIES_BYTES} bytes",
                )
            fixed = encoder.fixed_size
            sizes = list(map(fixed.__add__, map(add, map(len, batch.bodies), map(len, raws))))
            biggest = max(sizes)
            if biggest > max_size:
                return PutMessageResult(
                    PutMessageStatus.MESSAGE_ILLEGAL,
                    remark=f"message of {biggest} bytes exceeds max_message_size {max_size}",
                )
            prepared.append((batch, encoder, raws, sizes))
            total += sum(sizes)
            count += len(sizes)
        if count > 1 and total > max_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"batch of {total} bytes exceeds max_message_size {max_size}",
            )
        dispatcher = store.dispatcher
        try:
            with store.put_lock:
                if not store.running:
                    return PutMessageResult(
                        PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="message store is shut down"
                    )
                now = max(store.clock_ms(), store.last_store_timestamp)
                mf, pos = store.commit_log.reserve(total)
                phy = mf.file_from_offset + pos
                parts: list[bytes] = []
                next_offsets: dict[TopicQueueKey, int] = {}
                queues: list[PutRun] = []
                queue_offsets: list[int] = []
                offsets: list[int] = []
                runs: list[IndexRun] = []
                topic_queue_table = store.topic_queue_table
                off = phy
                for batch, encoder, raws, sizes in prepared:
                    n = len(sizes)
                    starts = list(accumulate(sizes, initial=off))
                    off = starts.pop()
                    offsets += starts
                    consumable = is_consumable(batch.sys_flag)
                    q0 = 0
                    if consumable:
                        key = (batch.topic, batch.queue_id)
                        q0 = next_offsets.get(key, -1)
                        if q0 < 0:
                            q0 = topic_queue_table.get(key, 0)
                        next_offsets[key] = q0 + n
                        queue_offsets += range(q0, q0 + n)
                        queues.append((batch.topic, batch.queue_id, q0, starts, sizes, batch.properties))
                    else:
                        queue_offsets += [0] * n
                    encoder.encode(
                        parts,
                        batch.flags,
                        batch.bodies,
                        raws,
                        sizes,
                        queue_id=batch.queue_id,
                        sys_flag=batch.sys_flag,
                        born_timestamp=batch.born_timestamp,
                        reconsume_times=batch.reconsume_times,
                        prepared_transaction_offset=batch.prepared_transaction_offset,
                        queue_offset=q0,
                        queue_offset_step=1 if consumable else 0,
                        commit_log_offset=starts[0],
                        store_timestamp=now,
                    )
                    runs.append((batch.topic, batch.sys_flag, sizes, batch.properties))
                data = b"".join(parts)
                mf.write(pos, data)
                topic_queue_table.update(next_offsets)
                store.last_store_timestamp = now
                drain_needed = dispatcher.dispatch_put(queues, phy, runs, now)
                arrivals = dispatcher.take_arrivals() if dispatcher.schedule is None else None
        except (OSError, StoreError) as exc:
            return self._write_failed(exc)
        if drain_needed and dispatcher.schedule is not None:
            dispatcher.schedule(store.dispatch_pending)
        self._end = phy + total
        msg_ids = list(map(self._msg_id_prefix.__add__, map(_HEX16.__mod__, offsets)))
        result = AppendMessageResult(
            AppendMessageStatus.PUT_OK,
            wrote_offset=phy,
            wrote_bytes=total,
            msg_id=",".join(msg_ids),
            store_timestamp=now,
            logics_offset=queue_offsets[0],
            msg_num=count,
            msg_ids=msg_ids,
            queue_offsets=queue_offsets,
        )
        put_listener = store.message_put_listener
        if put_listener is not None and queues and store.message_put_waiters:  # a pull is held
            try:
                put_listener(PutRecords(queues, data, phy, next_offsets, now))
            except Exception:
                log.exception("message put listener failed")
        if arrivals:
            store.notify_arrivals(arrivals)
        return PutMessageResult(PutMessageStatus.PUT_OK, result)
