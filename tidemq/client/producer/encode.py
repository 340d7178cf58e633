"""What a producer does to a message before it goes on the wire, sans I/O: checks, UNIQ_KEY,
compression, the SEND_MESSAGE_V2 header and a batch's body.

Mirrors the message-side parts of RocketMQ's ``DefaultMQProducerImpl`` (``Validators.checkMessage``,
the UNIQ_KEY / compression / header steps of ``sendKernelImpl``, ``MessageBatch.encode``). One
:class:`SendEncoder` per producer, shared by :class:`~tidemq.client.producer.producer.AsyncProducer`,
the blocking producer's caller-thread path and request-reply.
"""

from __future__ import annotations

import struct
import time

from tidemq.client.config import ProducerConfig
from tidemq.errors import ClientError, ProtocolError
from tidemq.protocol.headers import SendMessageRequestHeader
from tidemq.protocol.message import Message, MessageConst, MessageQueue, properties_to_string
from tidemq.protocol.message_codec import (
    MAX_PROPERTIES_BYTES,
    MessageSysFlag,
    compress_body,
    create_unique_id,
    create_unique_ids,
)
from tidemq.protocol.topic import is_retry_topic, validate_topic

__all__ = ["BATCH_ITEM_HEAD", "BATCH_ITEM_OVERHEAD", "U16", "SendEncoder"]

BATCH_ITEM_OVERHEAD = 20 + 2
BATCH_ITEM_HEAD = struct.Struct(">iiiii")
"""A batch-body record's head (protocol.md §5.6): total size, magic (0), body CRC (0), flag, body length."""
U16 = struct.Struct(">H")
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_SCHEDULED = frozenset(
    {
        _DELAY,
        MessageConst.PROPERTY_TIMER_DELIVER_MS,
        MessageConst.PROPERTY_TIMER_DELAY_MS,
        MessageConst.PROPERTY_TIMER_DELAY_SEC,
        MessageConst.PROPERTY_START_DELIVER_TIME,
    }
)
"""Properties that schedule a message: a batch holding one is refused (the broker would deliver it at once)."""


class SendEncoder:
    """Checks and encodes messages for one producer (its ``config`` and ``group_name``)."""

    __slots__ = ("config", "group_name")

    def __init__(self, config: ProducerConfig, group_name: str) -> None:
        self.config = config
        self.group_name = group_name

    def check_message(self, msg: Message) -> None:
        """Mirrors ``Validators.checkMessage``.

        Raises:
            ClientError: invalid topic name, empty body, body over ``max_message_size`` bytes.
        """
        validate_topic(msg.topic)
        if not msg.body:
            raise ClientError(f"message body of topic {msg.topic} is empty")
        if len(msg.body) > self.config.max_message_size:
            raise ClientError(
                f"message body is {len(msg.body)} bytes, more than max_message_size {self.config.max_message_size}"
            )

    def prepare(self, msg: Message) -> tuple[bytes, int, str]:
        """``(body, sys_flag, uniq_key)`` of one message: a ``UNIQ_KEY`` set when missing, the body
        zlib-compressed (COMPRESSED_FLAG) when at least ``compress_msg_body_over_howmuch`` bytes."""
        uniq = msg.unique_key
        if not uniq:
            uniq = create_unique_id()
            msg.properties[_UNIQ_KEY] = uniq
        body, sys_flag = msg.body, 0
        if len(body) >= self.config.compress_msg_body_over_howmuch:
            body = compress_body(body, self.config.compress_level)
            sys_flag |= MessageSysFlag.COMPRESSED_FLAG
        return body, sys_flag, uniq

    def build_header(
        self, msg: Message, mq: MessageQueue, sys_flag: int, *, batch: bool
    ) -> SendMessageRequestHeader:
        """The SEND_MESSAGE(_V2) / SEND_BATCH_MESSAGE header of ``msg`` for ``mq``; a retry-topic
        message's RECONSUME_TIME / MAX_RECONSUME_TIMES properties become header fields."""
        props = dict(msg.properties)
        reconsume_times = 0
        max_reconsume: int | None = None
        if is_retry_topic(msg.topic):
            rt = props.pop(MessageConst.PROPERTY_RECONSUME_TIME, None)
            mr = props.pop(MessageConst.PROPERTY_MAX_RECONSUME_TIMES, None)
            reconsume_times = int(rt) if rt and rt.isdigit() else 0
            max_reconsume = int(mr) if mr and mr.lstrip("-").isdigit() else None
        return SendMessageRequestHeader(
            producer_group=self.group_name,
            topic=msg.topic,
            default_topic=self.config.create_topic_key,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
            queue_id=mq.queue_id,
            sys_flag=sys_flag,
            born_timestamp=int(time.time() * 1000),
            flag=msg.flag,
            properties=properties_to_string(props),
            reconsume_times=reconsume_times,
            unit_mode=False,
            max_reconsume_times=max_reconsume,
            batch=batch,
        )

    def prepare_batch(self, batch: list[Message]) -> tuple[Message, bytes, str]:
        """Check a batch and encode its body: ``(carrier message, body, comma-joined UNIQ_KEYs)``.

        One pass per message: check it, give it a ``UNIQ_KEY`` when it has none, and append its
        record (the bytes of ``encode_batch_body``, protocol.md §5.6); the topic is validated once.

        Raises:
            ClientError: empty list, mixed topics, delayed, timer or retry-topic messages, body too large.
            ProtocolError: a message's properties exceed 32767 bytes.
        """
        if not batch:
            raise ClientError("send_batch needs at least one message")
        topic = batch[0].topic
        validate_topic(topic)
        retry = is_retry_topic(topic)
        max_size = self.config.max_message_size
        parts: list[bytes] = []
        append = parts.append
        uniqs: list[str] = []
        head = BATCH_ITEM_HEAD.pack
        u16 = U16.pack
        missing = sum(1 for m in batch if not m.properties.get(_UNIQ_KEY))
        new_ids = iter(create_unique_ids(missing))  # the ids one create_unique_id() each would give
        for m in batch:
            if m.topic != topic:
                validate_topic(m.topic)
                raise ClientError(f"all messages of a batch must have one topic: {topic} != {m.topic}")
            body = m.body
            size = len(body)
            if not size:
                raise ClientError(f"message body of topic {topic} is empty")
            if size > max_size:
                raise ClientError(f"message body is {size} bytes, more than max_message_size {max_size}")
            props = m.properties
            if not _SCHEDULED.isdisjoint(props):
                if m.delay_time_level > 0:
                    raise ClientError("delayed messages cannot be sent in a batch")
                if _DELAY not in props or len(_SCHEDULED.intersection(props)) > 1:
                    raise ClientError("timer messages (delivery_time_ms, delay_ms) cannot be sent in a batch")
            if retry:
                raise ClientError("retry-topic messages cannot be sent in a batch")
            uniq = props.get(_UNIQ_KEY)
            if not uniq:
                uniq = props[_UNIQ_KEY] = next(new_ids)
            uniqs.append(uniq)
            # properties_to_string(props), inlined
            raw = "\x02".join([f"{k}\x01{v}" for k, v in props.items()]).encode()
            if len(raw) > MAX_PROPERTIES_BYTES:
                raise ProtocolError(f"properties are {len(raw)} bytes, more than {MAX_PROPERTIES_BYTES}")
            append(head(22 + size + len(raw), 0, 0, m.flag, size))
            append(body)
            append(u16(len(raw)) + raw)
        body = b"".join(parts)
        if len(body) > max_size:
            raise ClientError(
                f"batch body is {len(body)} bytes, more than max_message_size {max_size}; use split_batch()"
            )
        return Message(topic, body), body, ",".join(uniqs)
