"""Messages both ways: a v5 ``Message`` to the broker's properties, a stored message to a v5 ``Message``.

Mirrors RocketMQ's ``SendMessageActivity.buildMessageProperty`` / ``buildSysFlag`` and
``GrpcConverter.buildMessage`` (rocketmq5.md §5, §7). Pure code: no I/O.

Sent (``to_send``): user properties as they are; ``TAGS``, ``KEYS`` (space-joined), ``UNIQ_KEY`` =
the client's ``message_id``, ``TRAN_MSG=true`` (+ ``CHECK_IMMUNITY_TIME_IN_SECONDS``) for
TRANSACTION, ``TIMER_DELIVER_MS`` for a ``delivery_timestamp``, ``__SHARDINGKEY`` = the message
group, ``TRACE_CONTEXT``, ``__BORNHOST``, ``BORN_TIMESTAMP``, ``RECONSUME_TIME``, ``PGROUP``.
Received (``to_v5``): every property outside :data:`SYSTEM_PROPERTIES` is a user property, so a
message comes back with exactly the user properties it was sent with.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Final

from tidemq.protocol.message import MessageConst, MessageExt
from tidemq.protocol.message_codec import MessageSysFlag
from tidemq.proxy import codes
from tidemq.proxy.names import resource_of
from tidemq.proxy.pb import d

TAGS: Final = MessageConst.PROPERTY_TAGS
KEYS: Final = MessageConst.PROPERTY_KEYS
UNIQ_KEY: Final = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
TRAN_MSG: Final = MessageConst.PROPERTY_TRANSACTION_PREPARED
DELAY: Final = MessageConst.PROPERTY_DELAY_TIME_LEVEL
PGROUP: Final = MessageConst.PROPERTY_PRODUCER_GROUP
RECONSUME_TIME: Final = MessageConst.PROPERTY_RECONSUME_TIME
SHARDING_KEY: Final = "__SHARDINGKEY"
TRACE_CONTEXT: Final = "TRACE_CONTEXT"
BORN_HOST: Final = "__BORNHOST"
BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
CHECK_IMMUNITY: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
POP_CK: Final = "POP_CK"
DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"

SYSTEM_PROPERTIES: Final = frozenset(
    {
        # MessageConst.STRING_HASH_SET
        "TRACE_ON", "MSG_REGION", KEYS, TAGS, "WAIT", DELAY, "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
        TRAN_MSG, PGROUP, "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
        "CORRECTION_FLAG", "MQ2_FLAG", RECONSUME_TIME, UNIQ_KEY, "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME", POP_CK, "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET",
        "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL",
        "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET",
        TIMER_DELAY_MS, TIMER_DELAY_SEC, TIMER_DELIVER_MS, "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", BORN_HOST,
        BORN_TIMESTAMP, DLQ_ORIGIN_TOPIC, DLQ_ORIGIN_MESSAGE_ID, "__CRC32#",
        # carried in v5 system properties, so not user properties either (Java leaks these four)
        SHARDING_KEY, TRACE_CONTEXT, CHECK_IMMUNITY, "__transactionId__",
        "TRANSACTION_CHECK_TIMES", "INNER_NUM", "INNER_BASE",
    }
)  # fmt: skip
"""Properties that are not user properties (Java's ``MessageConst.STRING_HASH_SET`` and the v5
system properties); a user property of one of these names is refused (ILLEGAL_MESSAGE_PROPERTY_KEY)."""

MAX_USER_PROPERTIES: Final = 128  # ProxyConfig.userPropertyMaxNum
MAX_USER_PROPERTY_SIZE: Final = 16 * 1024  # ProxyConfig.maxUserPropertySize
MAX_MESSAGE_GROUP_SIZE: Final = 64  # ProxyConfig.maxMessageGroupSize
MAX_DELAY_MS: Final = 24 * 3600 * 1000  # ProxyConfig.maxDelayTimeMills (1 day)
MAX_TRANSACTION_RECOVERY_S: Final = 3600  # ProxyConfig.maxTransactionRecoverySecond

NORMAL, FIFO, DELAY_TYPE, TRANSACTION = 1, 2, 3, 4
"""``apache.rocketmq.v2.MessageType`` values."""
ALL_TYPES: Final = (NORMAL, FIFO, DELAY_TYPE, TRANSACTION)


@dataclass(slots=True)
class SendItem:
    """One message ready for SEND_MESSAGE_V2: ``topic`` is the stored name (namespace included)."""

    topic: str
    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp: int
    message_id: str
    message_type: int
    message_group: str = ""
    extra: dict[str, str] = field(default_factory=dict)


def _has_control(text: str) -> bool:
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in text)


def _millis(ts: Any) -> int:
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def _user_properties(message: Any) -> tuple[dict[str, str], int]:
    user = dict(message.user_properties)
    if len(user) > MAX_USER_PROPERTIES:
        raise codes.ProxyError(
            codes.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {MAX_USER_PROPERTIES}"
        )
    size = 0
    for key, value in user.items():
        if key in SYSTEM_PROPERTIES:
            raise codes.ProxyError(codes.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if not key or _has_control(key):
            raise codes.ProxyError(
                codes.ILLEGAL_MESSAGE_PROPERTY_KEY,
                "the key of property cannot be empty or contain control character",
            )
        if _has_control(value):
            raise codes.ProxyError(
                codes.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control character"
            )
        size += len(key.encode()) + len(value.encode())
    return user, size


def _tag_and_keys(sp: Any, props: dict[str, str]) -> int:
    size = 0
    if sp.HasField("tag"):
        tag = sp.tag
        if not tag.strip() or "|" in tag or _has_control(tag):
            raise codes.ProxyError(
                codes.ILLEGAL_MESSAGE_TAG, f"tag {tag!r} is blank or holds '|' or a control character"
            )
        props[TAGS] = tag
        size += len(tag.encode())
    keys = list(sp.keys)
    for key in keys:
        if key and (not key.strip() or _has_control(key)):
            raise codes.ProxyError(
                codes.ILLEGAL_MESSAGE_KEY, "key cannot be whitespace or contain control character"
            )
        size += len(key.encode())
    if keys:
        props[KEYS] = " ".join(keys)
    return size


def _type_properties(sp: Any, props: dict[str, str], now_ms: int) -> None:
    if sp.message_type == TRANSACTION:
        props[TRAN_MSG] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = int(sp.orphaned_transaction_recovery_duration.seconds)
            if seconds > MAX_TRANSACTION_RECOVERY_S:
                raise codes.ProxyError(
                    codes.BAD_REQUEST,
                    f"the max transaction recovery time of message is too large, max is {MAX_TRANSACTION_RECOVERY_S}",
                )
            props[CHECK_IMMUNITY] = str(seconds)
    if sp.HasField("delivery_timestamp"):
        deliver_ms = _millis(sp.delivery_timestamp)
        if deliver_ms - now_ms > MAX_DELAY_MS:
            raise codes.ProxyError(
                codes.ILLEGAL_DELIVERY_TIME,
                f"the max delay time of message is too large, max is {MAX_DELAY_MS}",
            )
        props[TIMER_DELIVER_MS] = str(deliver_ms)
    group = sp.message_group if sp.HasField("message_group") else ""
    if group:
        if not group.strip() or _has_control(group) or len(group.encode()) >= MAX_MESSAGE_GROUP_SIZE:
            raise codes.ProxyError(
                codes.ILLEGAL_MESSAGE_GROUP,
                f"message group must be printable and under {MAX_MESSAGE_GROUP_SIZE} bytes",
            )
        props[SHARDING_KEY] = group


def sys_flag_of(sp: Any) -> int:
    """The stored sysFlag of a v5 message (``SendMessageActivity.buildSysFlag``): compressed for a GZIP
    body, TRANSACTION_PREPARED for a transactional message."""
    sys_flag = MessageSysFlag.COMPRESSED_FLAG if sp.body_encoding == 2 else 0  # GZIP
    if sp.message_type == TRANSACTION:
        sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
    return sys_flag


def to_send(
    message: Any, topic: str, remote_host: str, max_body_size: int, now_ms: int | None = None
) -> SendItem:
    """A v5 ``Message`` as the broker stores it (``SendMessageActivity.buildMessage``).

    Args:
        message: an ``apache.rocketmq.v2.Message``.
        topic: its stored topic name (namespace wrapped in); also the producer group (``PGROUP``),
            which routes transaction checks back to producers of the topic.
        remote_host: the client's address, the born host when the message names none.
        max_body_size: largest body accepted (bytes; the broker's ``maxMessageSize``).
        now_ms: the current time (for the delay check; default: the clock).

    Raises:
        ProxyError: MESSAGE_BODY_EMPTY, MESSAGE_BODY_TOO_LARGE, ILLEGAL_MESSAGE_ID,
            ILLEGAL_MESSAGE_PROPERTY_KEY, MESSAGE_PROPERTIES_TOO_LARGE, ILLEGAL_MESSAGE_TAG /
            _KEY / _GROUP, ILLEGAL_DELIVERY_TIME, BAD_REQUEST (recovery duration over 1 h).
    """
    body = bytes(message.body)
    if not body:
        raise codes.ProxyError(codes.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if len(body) > max_body_size:
        raise codes.ProxyError(
            codes.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {max_body_size}"
        )
    sp = message.system_properties
    props, size = _user_properties(message)
    size += _tag_and_keys(sp, props)
    if size > MAX_USER_PROPERTY_SIZE:
        raise codes.ProxyError(
            codes.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user property is too large, max is {MAX_USER_PROPERTY_SIZE}",
        )
    message_id = sp.message_id
    if not message_id.strip():
        raise codes.ProxyError(codes.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[UNIQ_KEY] = message_id
    _type_properties(sp, props, time.time_ns() // 1_000_000 if now_ms is None else now_ms)
    props[RECONSUME_TIME] = str(sp.delivery_attempt)
    props[PGROUP] = topic
    if sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    born_host = sp.born_host.strip() or remote_host
    if born_host:
        props[BORN_HOST] = born_host
    born_ms = _millis(sp.born_timestamp) if sp.HasField("born_timestamp") else 0
    if born_ms > 0:
        props[BORN_TIMESTAMP] = str(born_ms)
    return SendItem(
        topic=topic,
        body=body,
        properties=props,
        sys_flag=sys_flag_of(sp),
        born_timestamp=born_ms or (time.time_ns() // 1_000_000),
        message_id=message_id,
        message_type=int(sp.message_type),
        message_group=props.get(SHARDING_KEY, ""),
    )


def message_type_of(props: dict[str, str]) -> int:
    """The v5 type a message's properties say (``TopicMessageType.parseFromMessageProperty``)."""
    if props.get(TRAN_MSG) == "true":
        return TRANSACTION
    if DELAY in props or TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props or TIMER_DELAY_MS in props:
        return DELAY_TYPE
    if SHARDING_KEY in props:
        return FIFO
    return NORMAL


def check_type(accepted: tuple[int, ...], props: dict[str, str], topic: str) -> None:
    """Refuse a message whose type the topic does not accept (``DefaultTopicMessageTypeValidator``).

    Raises:
        ProxyError: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, with Java's message.
    """
    actual = message_type_of(props)
    if actual not in accepted:
        expected = "MIXED" if len(accepted) > 1 else d.MessageType.Name(accepted[0])
        raise codes.ProxyError(
            codes.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"TopicMessageType validate failed, the expected type is {expected}, but actual type is "
            f"{d.MessageType.Name(actual)} (topic {topic})",
        )


def _set_millis(ts: Any, ms: int) -> None:
    ts.seconds, ts.nanos = divmod(ms, 1000)
    ts.nanos *= 1_000_000


def to_v5(msg: MessageExt, namespace: str, receipt_handle: str | None = None) -> Any:
    """A stored message as a v5 ``Message`` (``GrpcConverter.buildMessage``).

    Args:
        msg: the stored message (body already decompressed by the decoder when it was compressed).
        namespace: the receiving client's namespace (unwrapped from the topic name).
        receipt_handle: the POP handle to ack / change it with (the ``POP_CK`` property when None).
    """
    props = msg.properties
    out = d.Message(topic=resource_of(namespace, msg.topic), body=msg.body)
    for key, value in props.items():
        if key not in SYSTEM_PROPERTIES:
            out.user_properties[key] = value
    sp = out.system_properties
    if TAGS in props:
        sp.tag = props[TAGS]
    if KEYS in props:
        sp.keys.extend(props[KEYS].split(" "))
    sp.message_id = props.get(UNIQ_KEY) or msg.msg_id
    sp.body_digest.type = 2  # MD5, uppercase hex: Node dereferences it unconditionally
    sp.body_digest.checksum = hashlib.md5(msg.body).hexdigest().upper()
    sp.body_encoding = 1  # IDENTITY: the decoder has inflated a compressed body
    sp.message_type = message_type_of(props)
    _set_millis(sp.born_timestamp, int(props.get(BORN_TIMESTAMP) or msg.born_timestamp))
    sp.born_host = props.get(BORN_HOST) or msg.born_host
    _set_millis(sp.store_timestamp, msg.store_timestamp)
    sp.store_host = msg.store_host
    if TIMER_DELIVER_MS in props:
        _set_millis(sp.delivery_timestamp, int(props[TIMER_DELIVER_MS]))
    if SHARDING_KEY in props:
        sp.message_group = props[SHARDING_KEY]
    handle = receipt_handle if receipt_handle is not None else props.get(POP_CK)
    if handle is not None:
        sp.receipt_handle = handle
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    sp.delivery_attempt = msg.reconsume_times + 1
    if TRACE_CONTEXT in props:
        sp.trace_context = props[TRACE_CONTEXT]
    if DLQ_ORIGIN_TOPIC in props and DLQ_ORIGIN_MESSAGE_ID in props:
        sp.dead_letter_queue.topic = props[DLQ_ORIGIN_TOPIC]
        sp.dead_letter_queue.message_id = props[DLQ_ORIGIN_MESSAGE_ID]
    return out
