"""Messages and message queues: the field's nouns, shared by store, broker and client.

Mirrors RocketMQ's ``Message``, ``MessageExt``, ``MessageQueue``, ``MessageConst`` and
``MessageDecoder`` (the codec functions for stored records live in ``tidemq.protocol.message_codec``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


class MessageConst:
    """Well-known property keys (RocketMQ's ``MessageConst``)."""

    PROPERTY_KEYS = "KEYS"
    PROPERTY_TAGS = "TAGS"
    PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
    PROPERTY_DELAY_TIME_LEVEL = "DELAY"
    PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
    PROPERTY_REAL_TOPIC = "REAL_TOPIC"
    PROPERTY_REAL_QUEUE_ID = "REAL_QID"
    PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
    PROPERTY_PRODUCER_GROUP = "PGROUP"
    PROPERTY_MIN_OFFSET = "MIN_OFFSET"
    PROPERTY_MAX_OFFSET = "MAX_OFFSET"
    PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
    PROPERTY_MSG_REGION = "MSG_REGION"
    PROPERTY_TRACE_SWITCH = "TRACE_ON"
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    PROPERTY_CLUSTER = "CLUSTER"
    PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
    PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
    PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
    PROPERTY_START_DELIVER_TIME = "__STARTDELIVERTIME"
    """Aliyun ONS's delivery time (epoch ms; ali-ons ``setStartDeliverTime``): tidemq schedules it
    like ``TIMER_DELIVER_MS`` (Apache RocketMQ does not)."""
    KEY_SEPARATOR = " "


def properties_to_string(properties: dict[str, str]) -> str:
    """``{"a": "1", "b": "2"}`` -> ``"a\\x011\\x02b\\x012"`` (Java style: no trailing separator)."""
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in properties.items())


_NEEDLES: dict[str, tuple[str, str]] = {}
"""key -> (``"\\x02KEY\\x01"``, ``"KEY\\x01"``) for :func:`property_value` (a few constant keys)."""


def property_value(text: str, key: str) -> str | None:
    """The value of ``key`` in a properties string, or None: what ``string_to_properties(text).get(key)``
    gives (the last pair wins), without building the dict. A value never holds ``\\x02``, so a match of
    ``\\x02KEY\\x01`` always starts a pair. Used on the store's put path (TAGS, KEYS, UNIQ_KEY)."""
    needles = _NEEDLES.get(key)
    if needles is None:
        if len(_NEEDLES) >= 256:
            _NEEDLES.clear()
        pair = f"{key}{NAME_VALUE_SEPARATOR}"
        needles = _NEEDLES[key] = (PROPERTY_SEPARATOR + pair, pair)
    needle, head = needles
    i = text.rfind(needle)
    if i >= 0:
        start = i + len(needle)
    elif text.startswith(head):
        start = len(head)
    else:
        return None
    end = text.find(PROPERTY_SEPARATOR, start)
    return text[start:] if end < 0 else text[start:end]


def string_to_properties(text: str) -> dict[str, str]:
    """Parse a properties string tolerantly (trailing ``\\x02`` from C++, empty segments skipped)."""
    props: dict[str, str] = {}
    for segment in text.split(PROPERTY_SEPARATOR):
        key, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if sep and key:
            props[key] = value
    return props


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """A queue of a topic on one broker. Mirrors ``MessageQueue``; sorts by topic, broker, queue id."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        """The JSON shape RocketMQ uses: ``{"brokerName", "queueId", "topic"}``."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> MessageQueue:
        return cls(str(obj["topic"]), str(obj["brokerName"]), int(obj["queueId"]))

    def __str__(self) -> str:
        # Java's MessageQueue.toString(); the consistent-hash strategy hashes exactly this text.
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


class Message:
    """A message to send. Mirrors RocketMQ's ``Message``.

    Args:
        topic: topic name (letters, digits, ``%-_|``; at most 127 characters).
        body: payload bytes (a ``str`` is encoded as UTF-8).
        tags: optional tag, used for broker-side filtering (``TAGS`` property).
        keys: optional business key(s); a list is joined with spaces (``KEYS`` property).
        flag: user flag (int), stored as is.
        properties: user properties (``str -> str``); must not contain ``\\x01`` / ``\\x02``.
        delay_time_level: delay level 1..18 (0 = none), ``DELAY`` property.
        delivery_time_ms: deliver at this epoch ms (``TIMER_DELIVER_MS``), see :attr:`delivery_time_ms`.
        delay_ms: deliver this many ms after it is stored (``TIMER_DELAY_MS``), see :attr:`delay_ms`.
    """

    __slots__ = ("body", "flag", "properties", "topic")

    def __init__(
        self,
        topic: str,
        body: bytes | str = b"",
        tags: str | None = None,
        keys: str | list[str] | None = None,
        flag: int = 0,
        properties: dict[str, str] | None = None,
        delay_time_level: int = 0,
        *,
        delivery_time_ms: int | None = None,
        delay_ms: int | None = None,
    ) -> None:
        self.topic = topic
        self.body = body.encode() if isinstance(body, str) else bytes(body)
        self.flag = flag
        self.properties: dict[str, str] = dict(properties or {})
        if tags:
            self.tags = tags
        if keys:
            self.keys = keys if isinstance(keys, str) else MessageConst.KEY_SEPARATOR.join(keys)
        if delay_time_level:
            self.delay_time_level = delay_time_level
        if delivery_time_ms is not None:
            self.delivery_time_ms = delivery_time_ms
        if delay_ms is not None:
            self.delay_ms = delay_ms

    def get_property(self, key: str) -> str | None:
        """One property's value (None when absent). Mirrors ``Message.getProperty``; what ``tags``,
        ``keys`` and ``unique_key`` read."""
        return self.properties.get(key)

    def put_property(self, key: str, value: str) -> None:
        """Set one property. Mirrors ``MessageAccessor.putProperty``; ``key`` and ``value`` must not
        hold ``\\x01`` / ``\\x02``."""
        self.properties[key] = value

    @property
    def tags(self) -> str | None:
        return self.get_property(MessageConst.PROPERTY_TAGS)

    @tags.setter
    def tags(self, value: str) -> None:
        self.properties[MessageConst.PROPERTY_TAGS] = value

    @property
    def keys(self) -> str | None:
        return self.get_property(MessageConst.PROPERTY_KEYS)

    @keys.setter
    def keys(self, value: str) -> None:
        self.properties[MessageConst.PROPERTY_KEYS] = value

    @property
    def delay_time_level(self) -> int:
        return int(self.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL, "0") or 0)

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self.properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)

    @property
    def delivery_time_ms(self) -> int | None:
        """When the broker delivers the message (epoch ms, ``TIMER_DELIVER_MS``; RocketMQ 5's
        ``setDeliverTimeMs``), or None for at once.

        The broker keeps a timer message invisible until then and delivers it within its timer
        precision (100 ms by default) after it. A time at or before now is delivered at once; more
        than ``timer_max_delay_sec`` (3 days by default) ahead is refused (MESSAGE_ILLEGAL).
        A ``delay_time_level`` > 0 wins over it. Setting None removes the property. Needs a broker
        that schedules timer messages (tidemq, RocketMQ 5); a 4.x broker delivers it at once.
        """
        value = self.properties.get(MessageConst.PROPERTY_TIMER_DELIVER_MS)
        return int(value) if value else None

    @delivery_time_ms.setter
    def delivery_time_ms(self, epoch_ms: int | None) -> None:
        if epoch_ms is None:
            self.properties.pop(MessageConst.PROPERTY_TIMER_DELIVER_MS, None)
        else:
            self.properties[MessageConst.PROPERTY_TIMER_DELIVER_MS] = str(int(epoch_ms))

    @property
    def delay_ms(self) -> int | None:
        """Deliver this many ms after the broker stores the message (``TIMER_DELAY_MS``; RocketMQ 5's
        ``setDelayTimeMs``), or None. Same rules as :attr:`delivery_time_ms`; when both are set the
        broker uses this one. Setting None removes the property."""
        value = self.properties.get(MessageConst.PROPERTY_TIMER_DELAY_MS)
        return int(value) if value else None

    @delay_ms.setter
    def delay_ms(self, delay: int | None) -> None:
        if delay is None:
            self.properties.pop(MessageConst.PROPERTY_TIMER_DELAY_MS, None)
        else:
            self.properties[MessageConst.PROPERTY_TIMER_DELAY_MS] = str(int(delay))

    @property
    def unique_key(self) -> str | None:
        """The client-generated message id (``UNIQ_KEY`` property), if any."""
        return self.get_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def user_properties(self) -> dict[str, str]:
        """Properties minus the system keys RocketMQ sets itself."""
        system = {v for k, v in vars(MessageConst).items() if k.startswith("PROPERTY_")}
        return {k: v for k, v in self.properties.items() if k not in system}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (self.topic, self.body, self.flag, self.properties) == (
            other.topic,
            other.body,
            other.flag,
            other.properties,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(topic={self.topic!r}, body={self.body[:32]!r}, properties={self.properties!r})"


class MessageExt(Message):
    """A stored message, as pulled or viewed. Mirrors ``MessageExt`` / ``MessageClientExt``.

    Timestamps are milliseconds since the epoch; hosts are ``"ip:port"`` strings.
    ``offset_msg_id`` is the broker's id (store host + commit-log offset, 32 hex chars);
    :attr:`msg_id` is the client's ``UNIQ_KEY`` when present, else ``offset_msg_id``.
    """

    __slots__ = (
        "_props",
        "_props_text",
        "body_crc",
        "born_host",
        "born_timestamp",
        "broker_name",
        "commit_log_offset",
        "offset_msg_id",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_host",
        "store_size",
        "store_timestamp",
        "sys_flag",
    )

    _props: dict[str, str] | None
    _props_text: str

    def __init__(
        self,
        topic: str,
        body: bytes | str = b"",
        *,
        flag: int = 0,
        properties: dict[str, str] | None = None,
        queue_id: int = 0,
        store_size: int = 0,
        queue_offset: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "",
        store_timestamp: int = 0,
        store_host: str = "",
        offset_msg_id: str = "",
        commit_log_offset: int = 0,
        body_crc: int = 0,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        broker_name: str = "",
    ) -> None:
        super().__init__(topic, body, flag=flag, properties=properties)
        self.queue_id = queue_id
        self.store_size = store_size
        self.queue_offset = queue_offset
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.store_timestamp = store_timestamp
        self.store_host = store_host
        self.offset_msg_id = offset_msg_id
        self.commit_log_offset = commit_log_offset
        self.body_crc = body_crc
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.broker_name = broker_name

    @property  # type: ignore[override]
    def properties(self) -> dict[str, str]:
        """The message's properties (a dict). A decoded message keeps its stored properties text
        and parses it into the dict at the first access (most consumers never read it; ``tags``,
        ``keys`` and ``unique_key`` read the text without parsing it)."""
        props = self._props
        if props is None:
            props = self._props = string_to_properties(self._props_text)
        return props

    @properties.setter
    def properties(self, value: dict[str, str]) -> None:
        self._props = value

    def set_properties_text(self, text: str) -> None:
        """Make ``text`` (a stored properties string) the properties, parsed only when
        :attr:`properties` is first read: what ``msg.properties = string_to_properties(text)`` gives."""
        self._props = None
        self._props_text = text

    def properties_text(self) -> str:
        """The properties as text (``k\\x01v\\x02...``): the stored text while it is not parsed yet,
        else the dict joined again (``properties_to_string``)."""
        props = self._props
        return self._props_text if props is None else properties_to_string(props)

    def get_property(self, key: str) -> str | None:
        """One property's value (None when absent), read from the properties text while it is not
        parsed yet (no dict is built)."""
        props = self._props
        if props is None:
            return property_value(self._props_text, key)
        return props.get(key)

    def put_property(self, key: str, value: str) -> None:
        """Set one property; while the properties text is not parsed yet the pair is appended to it
        (the last pair of a key wins, in the parse as in :meth:`get_property`), so a consumer that
        stamps ``CONSUME_START_TIME`` on every message does not parse every message's properties."""
        props = self._props
        if props is None:
            text = self._props_text
            pair = f"{key}{NAME_VALUE_SEPARATOR}{value}"
            self._props_text = f"{text}{PROPERTY_SEPARATOR}{pair}" if text else pair
        else:
            props[key] = value

    @property
    def msg_id(self) -> str:
        return self.unique_key or self.offset_msg_id

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"msg_id={self.msg_id!r}, body={self.body[:32]!r})"
        )


@dataclass(slots=True)
class SendResult:
    """Outcome of a send. Mirrors ``SendResult``.

    ``send_status`` is one of ``SEND_OK``, ``FLUSH_DISK_TIMEOUT``, ``FLUSH_SLAVE_TIMEOUT``,
    ``SLAVE_NOT_AVAILABLE``. ``msg_id`` is the client id (UNIQ_KEY; comma-joined for a batch).
    """

    send_status: str
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    transaction_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    recall_handle: str | None = None
    """A timer message's handle for ``Producer.recall_message`` (the answer's ``recallHandle``, 5.3)."""
