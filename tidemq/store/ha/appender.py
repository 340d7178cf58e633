"""Slave side storage of replicated bytes: append at the master's offsets, then dispatch.

Mirrors ``DefaultMessageStore.appendToCommitLog`` plus the slave's ``ReputMessageService``: the bytes
of a transfer rarely end on a record boundary, so appending and dispatching are separate; dispatch
walks every *complete* record past ``reput_from_offset`` and hands it to the store's dispatch (the
one recovery uses: consume queue + index), then wakes held pulls through the store's
``message_arriving_listener``.
"""

from __future__ import annotations

import logging
import struct

from tidemq.errors import ProtocolError, StoreError
from tidemq.protocol.message_codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MessageSysFlag,
    read_record_info,
)
from tidemq.store.message_store import MessageStore

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">ii")
_CONSUMABLE = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)


class SlaveCommitLogAppender:
    """Writes the master's commit-log bytes into a slave's store and dispatches them.

    Args:
        store: the slave's loaded :class:`MessageStore` (after recovery every record up to its max
            offset is dispatched, so dispatch resumes from there).

    Thread-safety: one caller at a time (the HA client); reads of the store run concurrently.
    """

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.reput_from_offset = store.get_max_phy_offset()

    def append(self, start_offset: int, data: bytes) -> bool:
        """Append ``data`` at global ``start_offset`` and dispatch the records it completes.

        ``start_offset`` must equal the store's max commit-log offset (or, for an empty commit log,
        anything: the first segment is created where the master's data starts). Returns False when
        the offsets do not line up or the store is not running (the caller drops the connection).

        Raises:
            StoreError: the write failed (disk full...).
        """
        store = self.store
        if not store.running or not data:
            return store.running
        cl = store.commit_log
        size = cl.mapped_file_size
        with store.put_lock:
            empty = cl.queue.last() is None
            if not empty and start_offset != cl.get_max_offset():
                log.error(
                    "HA append at %d but the slave's commit log ends at %d", start_offset, cl.get_max_offset()
                )
                return False
            if start_offset % size + len(data) > size:
                raise StoreError(f"HA data [{start_offset}, +{len(data)}) crosses a {size}-byte segment")
            mf = cl.queue.get_last_mapped_file(start_offset)
            if mf is None:  # pragma: no cover - need_create=True always returns one
                return False
            if empty:
                self.reput_from_offset = start_offset
            mf.write(start_offset - mf.file_from_offset, data)
        self.dispatch()
        return True

    def dispatch(self) -> int:
        """Dispatch every complete record in ``[reput_from_offset, max offset)``; returns how many."""
        store = self.store
        cl = store.commit_log
        max_offset = cl.get_max_offset()
        arrived: dict[tuple[str, int], tuple[int, int, int]] = {}
        count = 0
        while self.reput_from_offset + 8 <= max_offset:
            offset = self.reput_from_offset
            head = cl.get_message(offset, 8)
            if head is None:
                break
            total, magic = _HEAD.unpack(head)
            if magic == BLANK_MAGIC_CODE:
                self.reput_from_offset = cl.roll_next_file(offset)
                continue
            if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) or total <= 8:
                log.error(
                    "HA: no record at commit-log offset %d (magic %#x); dispatch stopped", offset, magic
                )
                break
            if offset + total > max_offset:
                break  # the rest of this record comes with the next transfer
            record = cl.get_message(offset, total)
            if record is None:
                break
            try:
                info = read_record_info(record)
            except ProtocolError as exc:
                log.error("HA: bad record at commit-log offset %d: %s", offset, exc)
                break
            store.recovery.redispatch(info, 0)
            self.reput_from_offset = offset + total
            count += 1
            if MessageSysFlag.get_transaction_value(info.sys_flag) not in _CONSUMABLE:
                continue
            key = (info.topic, info.queue_id)
            store.topic_queue_table[key] = max(store.topic_queue_table.get(key, 0), info.queue_offset + 1)
            tags = store.dispatcher.tags_code(info.topic, info.properties, info.store_timestamp)
            arrived[key] = (info.queue_offset + 1, tags, info.store_timestamp)
        listener = store.message_arriving_listener
        if listener is not None:
            for (topic, qid), (max_q, tags, ts) in arrived.items():
                try:
                    listener(topic, qid, max_q, tags, ts)
                except Exception:
                    log.exception("message arriving listener failed")
        return count
