"""One dispatcher from commit-log records to consume queues and the index.

Mirrors RocketMQ's ``CommitLogDispatcherBuildConsumeQueue`` + ``CommitLogDispatcherBuildIndex`` as
``ReputMessageService`` drives them: every path that makes a stored record visible goes through
:class:`CommitLogDispatcher`: the put (a batch of contiguous records, one call), crash recovery and
consume-queue rebuilds (one record at a time, from :class:`RecordInfo`), and the HA slave's append.

A put is dispatched either at once (the default) or, once :attr:`CommitLogDispatcher.schedule` is set
(the broker runs the drain right after the request's answer is written), just after the put has
returned, so a producer's answer does not wait for consume-queue and index work, as
ReputMessageService runs behind the commit log. The store drains what is pending before anything
reads a consume queue or the index.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from tidemq.protocol.filter import tags_hash
from tidemq.protocol.message import NAME_VALUE_SEPARATOR, MessageConst, property_value
from tidemq.protocol.message_codec import MessageSysFlag, RecordInfo
from tidemq.protocol.topic import TIMER_CANCEL_FLAG, TIMER_TOPIC
from tidemq.store.consume_queue import ConsumeQueue, CqUnit
from tidemq.store.index import IndexService

__all__ = [
    "CONSUMABLE",
    "SCHEDULE_TOPIC",
    "Arrival",
    "CommitLogDispatcher",
    "IndexRun",
    "PutRecords",
    "PutRun",
    "TopicQueueKey",
    "is_consumable",
    "tags_string_to_tags_code",
]

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TopicQueueKey = tuple[str, int]
PutRun = tuple[str, int, int, Sequence[int], Sequence[int], Sequence[str]]
"""``(topic, queue_id, first queue offset, commit-log offsets, sizes, properties texts)``: consecutive
consumable records of one put, for one queue."""
Arrival = tuple[str, int, int, int, int]
"""``(topic, queue_id, max offset in queue, last tag code, store timestamp)``: what the message
arriving listener is told once a queue got new entries."""
IndexRun = tuple[str, int, Sequence[int], Sequence[str]]
"""``(topic, sys_flag, record sizes, properties texts)``: consecutive records of one put."""
_Put = (
    tuple[Sequence[PutRun], int, Sequence[IndexRun], int]
    | tuple[str, int, int, int, int, str, int, int, bool]
)
"""A pending put: ``dispatch_put``'s (queues, commit-log offset, runs, store timestamp), or
``dispatch_one``'s (topic, commit-log offset, queue id, queue offset, size, properties, sys flag,
store timestamp, consumable): the commit-log offset second in both."""
_TAGS_PAIR = f"{MessageConst.PROPERTY_TAGS}{NAME_VALUE_SEPARATOR}"
"""In every properties text with a TAGS property (the converse need not hold)."""
_TIMER_DEL = f"{MessageConst.PROPERTY_TIMER_DEL_UNIQKEY}{NAME_VALUE_SEPARATOR}"
"""In the properties text of a timer cancellation (its tags code gets ``TIMER_CANCEL_FLAG``)."""


class PutRecords(NamedTuple):
    """One put as it went into the commit log, told to the store's ``message_put_listener`` right
    after the put, before (or whether or not) its consume-queue entries are written: a long-polling
    pull waiting at exactly ``first queue offset`` of a run can be answered from ``data`` at once.
    (A named tuple: one is made for every put, most of which nobody waits for.)

    Attributes:
        queues: the consumable records of the put, one :data:`PutRun` per queue run, in order.
        data: every record of the put back to back, as written at ``commit_log_offset``.
        commit_log_offset: where ``data`` starts in the commit log.
        max_offsets: each put queue's next queue offset after the put.
        store_timestamp: the records' store time (ms).
    """

    queues: Sequence[PutRun]
    data: bytes
    commit_log_offset: int
    max_offsets: Mapping[TopicQueueKey, int]
    store_timestamp: int

    def records(self, start: int, end: int) -> bytes:
        """The bytes of the records stored from commit-log offset ``start`` to ``end``."""
        base = self.commit_log_offset
        return self.data[start - base : end - base]


CONSUMABLE = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
"""Transaction states that get a consume-queue entry (prepared and rolled-back records do not)."""


def is_consumable(sys_flag: int) -> bool:
    """Whether a record with ``sys_flag`` gets a consume-queue entry (not a prepared/rolled-back half)."""
    return MessageSysFlag.get_transaction_value(sys_flag) in CONSUMABLE


_TAGS_CODES: dict[str, int] = {}
_TAGS_CODES_MAX = 4096


def tags_string_to_tags_code(tags: str | None) -> int:
    """Consume-queue tag code: Java ``String.hashCode`` of the tag (signed 32 bit), 0 for none.

    Codes of the last few thousand distinct tags are remembered (the put path asks once per record)."""
    if not tags:
        return 0
    code = _TAGS_CODES.get(tags)
    if code is None:
        if len(_TAGS_CODES) >= _TAGS_CODES_MAX:
            _TAGS_CODES.clear()
        code = _TAGS_CODES[tags] = tags_hash(tags)
    return code


class CommitLogDispatcher:
    """Builds consume-queue and index entries for stored records.

    Args:
        find_consume_queue: ``(topic, queue_id) -> ConsumeQueue``, creating the queue when missing
            (``MessageStore.find_consume_queue(..., create=True)``).
        index_service: the key index, or None when ``message_index_enable`` is off.
        delay_table: delay level -> delay in ms (``MessageStoreConfig.delay_level_table()``): the tag
            code of a ``SCHEDULE_TOPIC_XXXX`` entry is its delivery time, as in RocketMQ.
    """

    def __init__(
        self,
        find_consume_queue: Callable[[str, int], ConsumeQueue],
        index_service: IndexService | None,
        delay_table: Mapping[int, int],
    ) -> None:
        self._find = find_consume_queue
        self.index_service = index_service
        self._delay_table = delay_table
        self.schedule: Callable[[Callable[[], None]], object] | None = None
        """None: a put is dispatched inside it. Else called with the store's ``dispatch_pending`` by a
        put that finds no drain asked for since the last one ran."""
        self._pending: list[_Put] = []
        self._drain_scheduled = False
        self._arrivals: list[Arrival] = []

    def tags_code(self, topic: str, properties: str, store_timestamp: int) -> int:
        """The consume-queue tag code of a record (``CommitLog.checkMessageAndReturnSize``'s tagsCode)
        from its stored properties text: the delivery time in ms for a scheduled message (a delay
        level's, or a timer message's ``TIMER_OUT_MS``), else the hash of its TAGS."""
        if topic == SCHEDULE_TOPIC:
            level = int(property_value(properties, MessageConst.PROPERTY_DELAY_TIME_LEVEL) or 0)
            if level > 0:
                return store_timestamp + self._delay_table.get(level, 1000)
        elif topic == TIMER_TOPIC:
            due = property_value(properties, MessageConst.PROPERTY_TIMER_OUT_MS)
            # (isascii: "²".isdigit() is True; a client may send to the timer topic itself)
            code = int(due) if due and due.isascii() and due.isdigit() else store_timestamp
            return code | TIMER_CANCEL_FLAG if _TIMER_DEL in properties else code
        return tags_string_to_tags_code(property_value(properties, MessageConst.PROPERTY_TAGS))

    @property
    def pending(self) -> bool:
        """Whether puts wait for their dispatch (only with :attr:`schedule` set)."""
        return bool(self._pending)

    def pending_from(self) -> int | None:
        """The commit-log offset of the first put not dispatched yet (None: none is pending)."""
        return self._pending[0][1] if self._pending else None

    def dispatch_put(
        self, queues: Sequence[PutRun], commit_log_offset: int, runs: Sequence[IndexRun], store_timestamp: int
    ) -> bool:
        """Dispatch one put of contiguous records starting at ``commit_log_offset``, now or (with
        :attr:`schedule` set) at the next :meth:`dispatch_pending`. ``queues`` are the consume-queue
        entries to write (one write per queue), ``runs`` the records for the index
        (:meth:`IndexService.build_index_batch`). The caller holds the store's put lock.

        Returns:
            True when no drain is scheduled since the last one: the caller must ``schedule`` it.
        """
        if self.schedule is None:
            self._dispatch(queues, commit_log_offset, runs, store_timestamp)
            return False
        self._pending.append((queues, commit_log_offset, runs, store_timestamp))
        if self._drain_scheduled:
            return False
        self._drain_scheduled = True
        return True

    def dispatch_one(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        commit_log_offset: int,
        size: int,
        properties: str,
        sys_flag: int,
        store_timestamp: int,
        consumable: bool,
    ) -> bool:
        """:meth:`dispatch_put` of a put of one record (every single send), given field by field: its
        consume-queue entry at ``queue_offset`` when ``consumable``, its index entries. Same returns."""
        record = (
            topic,
            commit_log_offset,
            queue_id,
            queue_offset,
            size,
            properties,
            sys_flag,
            store_timestamp,
            consumable,
        )
        if self.schedule is None:
            self._dispatch_one(*record)
            return False
        self._pending.append(record)
        if self._drain_scheduled:
            return False
        self._drain_scheduled = True
        return True

    def dispatch_pending(self) -> None:
        """Dispatch every pending put, in put order. The caller holds the store's put lock.

        A put leaves the pending list only once dispatched: after a failure (an I/O error writing
        a consume queue) it stays first, the error goes to the caller, and the next drain tries it
        again (consume-queue and index writes skip what is already there), as ReputMessageService
        retries from its last dispatched offset."""
        self._drain_scheduled = False  # a put from now on asks for another drain
        pending = self._pending
        while pending:
            put = pending[0]
            if len(put) == 4:
                self._dispatch(*put)
            else:  # dispatch_one's
                self._dispatch_one(*put)
            del pending[0]

    def take_arrivals(self) -> list[Arrival]:
        """The arrivals since the last call (the caller holds the store's put lock)."""
        arrivals, self._arrivals = self._arrivals, []
        return arrivals

    def _tags_codes(self, topic: str, properties: Sequence[str], now: int) -> list[int]:
        """:meth:`tags_code` of each record of a run; 0 without a TAGS pair (no call for those)."""
        tags_code = self.tags_code
        if topic in (SCHEDULE_TOPIC, TIMER_TOPIC):
            return [tags_code(topic, text, now) for text in properties]
        return [tags_code(topic, text, now) if _TAGS_PAIR in text else 0 for text in properties]

    def _dispatch(
        self, queues: Sequence[PutRun], commit_log_offset: int, runs: Sequence[IndexRun], now: int
    ) -> None:
        arrivals = self._arrivals
        if len(queues) == 1:  # the usual: a put to one queue
            topic, queue_id, first, offsets, sizes, properties = queues[0]
            if len(properties) == 1 and topic != SCHEDULE_TOPIC and topic != TIMER_TOPIC:
                text = properties[0]  # one record (every single send): _tags_codes without its calls
                tags = [self.tags_code(topic, text, now) if _TAGS_PAIR in text else 0]
            else:
                tags = self._tags_codes(topic, properties, now)
            self._find(topic, queue_id).put_entries(first, offsets, sizes, tags)
            arrivals.append((topic, queue_id, first + len(tags), tags[-1], now))
        else:
            grouped: dict[TopicQueueKey, tuple[int, list[CqUnit]]] = {}
            for topic, queue_id, first, offsets, sizes, properties in queues:
                units = list(map(CqUnit, offsets, sizes, self._tags_codes(topic, properties, now)))
                entry = grouped.get((topic, queue_id))
                if entry is None:
                    grouped[topic, queue_id] = (first, units)
                else:
                    entry[1].extend(units)
            for (topic, queue_id), (first, units) in grouped.items():
                self._find(topic, queue_id).put_message_position_info(units, first)
                arrivals.append((topic, queue_id, first + len(units), units[-1].tags_code, now))
        if self.index_service is not None:
            self.index_service.build_index_batch(commit_log_offset, runs, now)

    def _dispatch_one(
        self,
        topic: str,
        commit_log_offset: int,
        queue_id: int,
        queue_offset: int,
        size: int,
        text: str,
        sys_flag: int,
        now: int,
        consumable: bool,
    ) -> None:
        """:meth:`_dispatch` of one record (:meth:`dispatch_one`), without its lists."""
        if consumable:
            if _TAGS_PAIR in text or topic in (SCHEDULE_TOPIC, TIMER_TOPIC):
                tags = self.tags_code(topic, text, now)
            else:
                tags = 0
            self._find(topic, queue_id).put_entry(queue_offset, commit_log_offset, size, tags)
            self._arrivals.append((topic, queue_id, queue_offset + 1, tags, now))
        if self.index_service is not None:
            self.index_service.build_index_one(commit_log_offset, size, topic, sys_flag, text, now)

    def dispatch_record(self, info: RecordInfo, *, consume_queue: bool = True, index: bool = True) -> None:
        """Dispatch one record read back from the commit log (recovery, rebuild, HA slave).

        ``consume_queue=False`` skips the consume-queue entry (already there), ``index=False`` the index
        (the index itself skips records it already covers). Non-consumable records get no entry.
        """
        if index and self.index_service is not None:
            self.index_service.dispatch_record(info)
        if not consume_queue or not is_consumable(info.sys_flag):
            return
        tags_code = self.tags_code(info.topic, info.properties, info.store_timestamp)
        self._find(info.topic, info.queue_id).put_message_position_info(
            [CqUnit(info.commit_log_offset, info.total_size, tags_code)], info.queue_offset
        )
