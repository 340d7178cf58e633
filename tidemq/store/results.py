"""What goes into and comes out of the store: ``MessageExtBrokerInner``, put and get results.

Mirrors RocketMQ's ``MessageExtBrokerInner``, ``PutMessageStatus``, ``AppendMessageStatus``,
``AppendMessageResult``, ``PutMessageResult``, ``GetMessageStatus`` and ``GetMessageResult``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from tidemq.protocol.filter import tags_hash
from tidemq.protocol.message import MessageConst, MessageExt, properties_to_string


class MessageExtBrokerInner(MessageExt):
    """A message as the broker hands it to :meth:`MessageStore.put_message`.

    Set ``topic``, ``body``, ``flag``, ``properties``, ``queue_id``, ``sys_flag``,
    ``born_timestamp`` (ms), ``born_host`` (``"ip:port"``, IPv4), ``reconsume_times`` and
    ``prepared_transaction_offset``. ``properties_string``, when not None, is stored verbatim
    instead of ``properties`` (the broker uses it for batch items with appended batch properties);
    ``properties`` then holds the same pairs, or is left empty and the store parses the string.
    The store sets ``store_host``, ``store_timestamp``, ``queue_offset`` and ``commit_log_offset``.
    ``tags_code`` is informational: the store computes the consume-queue tag code from the
    stored ``TAGS`` property (Java ``String.hashCode``), as RocketMQ's dispatcher does.
    """

    __slots__ = ("properties_string", "tags_code")

    def __init__(
        self,
        topic: str,
        body: bytes | str = b"",
        *,
        properties_string: str | None = None,
        tags_code: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(topic, body, **kwargs)
        self.properties_string = properties_string
        self.tags_code = tags_code

    @classmethod
    def copy_of(
        cls,
        msg: MessageExt,
        topic: str,
        properties: dict[str, str],
        *,
        queue_id: int = 0,
        reconsume_times: int | None = None,
    ) -> MessageExtBrokerInner:
        """A stored message put again as a new one: to ``topic`` / ``queue_id`` (default 0) with
        ``properties`` (used as given, not copied), ``reconsume_times`` (default: ``msg``'s) and
        ``msg``'s body, flag, sys flag, born time and born host; ``tags_code`` from ``TAGS``.

        What RocketMQ builds by hand wherever a message is moved (``ScheduleMessageService.
        messageTimeup``, ``TimerMessageStore.convert``, ``SendMessageProcessor.consumerSendMsgBack``,
        ``PopReviveService``'s re-put): the store assigns the new offsets and store time.
        """
        return cls(
            topic,
            msg.body,
            flag=msg.flag,
            properties=properties,
            queue_id=queue_id,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            reconsume_times=msg.reconsume_times if reconsume_times is None else reconsume_times,
            tags_code=tags_hash(properties.get(MessageConst.PROPERTY_TAGS)),
        )

    def stored_properties_string(self) -> str:
        """The properties text the store will write."""
        if self.properties_string is not None:
            return self.properties_string
        return properties_to_string(self.properties)


@dataclass(slots=True)
class MessageExtBatch:
    """Messages for one queue that share their header fields: what the broker hands to
    :meth:`MessageStore.put_message_batch` for a SEND_BATCH_MESSAGE, and the unit the store encodes
    in one pass. Mirrors RocketMQ's ``MessageExtBatch``.

    Attributes:
        topic, queue_id: where every message goes (``queue_id`` >= 0).
        sys_flag, born_timestamp (ms), born_host (``"ip:port"``), reconsume_times,
            prepared_transaction_offset: shared by every message.
        flags: each message's user flag.
        bodies: each message's body, stored as given.
        properties: each message's properties text as stored (``k\\x01v\\x02...``).
    """

    topic: str
    queue_id: int
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = "0.0.0.0:0"
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    flags: list[int] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    properties: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.bodies)


class PutMessageStatus(enum.Enum):
    """Outcome of a put (``PutMessageStatus``); the broker maps it to a response code.

    ``DISK_FULL`` is tidemq's: the store refused the put because its disk is above
    ``disk_space_warning_level_ratio`` (or a write hit ``ENOSPC``); nothing was written, and the same
    put succeeds once space is freed. RocketMQ reports it as ``SERVICE_NOT_AVAILABLE`` (and so does
    the send processor, with RocketMQ's "disk is full" remark); a service that re-puts messages
    (delay levels, timers) waits and retries on it instead of giving up.
    """

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    DISK_FULL = "DISK_FULL"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class AppendMessageStatus(enum.Enum):
    """Outcome of the commit-log append (``AppendMessageStatus``)."""

    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(slots=True)
class AppendMessageResult:
    """Where a put landed (``AppendMessageResult``).

    Attributes:
        wrote_offset: commit-log offset of the first record.
        wrote_bytes: bytes written (all records of a batch).
        msg_id: offset msg id; for a batch the ids joined with ``,``.
        store_timestamp: ms.
        logics_offset: queue offset of the first message.
        msg_num: number of messages.
        msg_ids: one offset msg id per message.
        queue_offsets: one queue offset per message.
    """

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1
    msg_ids: list[str] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)

    @property
    def is_ok(self) -> bool:
        return self.status is AppendMessageStatus.PUT_OK


@dataclass(slots=True)
class PutMessageResult:
    """``PutMessageResult``: ``status`` plus ``append_result`` (None unless the append happened).

    ``remark`` says what was wrong for a refused put (for the response remark).
    """

    status: PutMessageStatus
    append_result: AppendMessageResult | None = None
    remark: str = ""

    @property
    def is_ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    @property
    def disk_full(self) -> bool:
        """True when the store refused the put for a full disk (retry once space is freed)."""
        return self.status is PutMessageStatus.DISK_FULL


class GetMessageStatus(enum.Enum):
    """Outcome of a read (``GetMessageStatus``); see protocol.md §3.4 for the pull mapping."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    """``GetMessageResult``: the records found (raw §5.1 bytes) and next offsets.

    The records are held as ``chunks``: each chunk is one or more whole records laid back to back
    (the reader reads a run of records that are contiguous in the commit log with one read and
    keeps it whole), so a pull body is a join of a few large pieces. ``record_sizes`` has one entry
    per record, in order; :attr:`message_buffers` splits the chunks into one bytes per record.

    Attributes:
        next_begin_offset: queue offset the consumer should pull from next.
        min_offset / max_offset: the queue's min and max (next to be written) logical offsets.
        chunks: the stored records, in order, in pieces of whole records.
        record_sizes: the size in bytes of each record.
        message_queue_offsets: queue offset of each returned record.
        buffer_total_size: sum of the record sizes in bytes.
        suggest_pulling_from_slave: the consumer lags by more than the in-memory ratio.
    """

    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    chunks: list[bytes] = field(default_factory=list)
    record_sizes: list[int] = field(default_factory=list)
    message_queue_offsets: list[int] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.record_sizes)

    @property
    def message_buffers(self) -> list[bytes]:
        """One bytes per record (a chunk of several records is split: that copies them)."""
        if len(self.chunks) == len(self.record_sizes):
            return list(self.chunks)
        out: list[bytes] = []
        sizes = iter(self.record_sizes)
        for chunk in self.chunks:
            pos, n = 0, len(chunk)
            while pos < n:
                size = next(sizes)
                out.append(chunk[pos : pos + size])
                pos += size
        return out

    def body(self) -> bytes:
        """Every record back to back: the body of a PULL_MESSAGE response (no copy for one chunk)."""
        return self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)

    def add_message(self, record: bytes, queue_offset: int) -> None:
        self.chunks.append(record)
        self.record_sizes.append(len(record))
        self.message_queue_offsets.append(queue_offset)
        self.buffer_total_size += len(record)
