"""Point lookups in a message store: by queue offset, by store time, by commit-log offset, by key.

:class:`MessageLookup` holds the queries of RocketMQ's ``DefaultMessageStore`` that are not the pull
read (``getMessage``, in :mod:`tidemq.store.message_reader`): ``getMessageStoreTimeStamp``,
``getEarliestMessageTime``, ``getOffsetInQueueByTime``, ``checkInDiskByConsumeOffset``,
``selectOneMessageByOffset``, ``lookMessageByOffset`` and ``queryMessage``. The store owns one as
``store.lookup``; the broker's offset, query, admin, transaction and schedule services call it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tidemq.errors import ProtocolError
from tidemq.protocol.message import MessageExt
from tidemq.protocol.message_codec import decode_message
from tidemq.store.commit_log import CommitLog
from tidemq.store.consume_queue import ConsumeQueue
from tidemq.store.index import IndexService, QueryMessageResult, query_message
from tidemq.store.message_reader import MessageReader

log = logging.getLogger(__name__)


class MessageLookup:
    """Lookups of single messages and offsets in one store.

    Args:
        commit_log: where the records are.
        find_queue: ``(topic, queue_id) -> ConsumeQueue | None`` with every acknowledged put in it
            (the store's ``find_consume_queue``).
        reader: the store's pull reader (its "in memory" limit answers
            :meth:`check_in_disk_by_consume_offset`).
        index_service: the message index (None when ``message_index_enable`` is off).
        settle: makes acknowledged puts visible in the index before :meth:`query_message`.
    """

    def __init__(
        self,
        commit_log: CommitLog,
        find_queue: Callable[[str, int], ConsumeQueue | None],
        reader: MessageReader,
        index_service: IndexService | None,
        settle: Callable[[], None],
    ) -> None:
        self.commit_log = commit_log
        self._find_queue = find_queue
        self._reader = reader
        self.index_service = index_service
        self._settle = settle

    # ------------------------------------------------------------------------------ by queue offset
    def _unit_store_time(self, cq: ConsumeQueue, index: int) -> int:
        unit = cq.get_unit(index)
        if unit is None or not unit.is_valid:
            return -1
        return self.commit_log.pickup_store_timestamp(unit.commit_log_offset, unit.size)

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        """STORETIMESTAMP (ms) of the message at a queue offset; -1 if there is none."""
        cq = self._find_queue(topic, queue_id)
        if (
            cq is None
            or not cq.get_min_offset_in_queue() <= consume_queue_offset < cq.get_max_offset_in_queue()
        ):
            return -1
        return self._unit_store_time(cq, consume_queue_offset)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time (ms) of the message at the queue's min offset, -1 if none (code 32)."""
        cq = self._find_queue(topic, queue_id)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.get_min_offset_in_queue())

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Queue offset for a store time in ms (SEARCH_OFFSET_BY_TIMESTAMP, protocol.md §3.5).

        Binary search on store time: an exact match, else the closer of the two neighbours (the
        earlier one on a tie); 0 if the queue is unknown or empty. Mirrors
        ``ConsumeQueue.getOffsetInQueueByTime``.
        """
        cq = self._find_queue(topic, queue_id)
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
        cq = self._find_queue(topic, queue_id)
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

    # ---------------------------------------------------------------------------------- by key
    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """Stored records of ``topic`` indexed under ``key`` (UNIQ_KEY or a KEYS token) and stored
        within ``[begin, end]`` ms, at most ``max_num`` (QUERY_MESSAGE). Mirrors
        ``DefaultMessageStore.queryMessage``; empty when ``message_index_enable`` is off."""
        self._settle()
        return query_message(self.index_service, self.commit_log.get_record, topic, key, max_num, begin, end)
