"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325): request-reply's answer leg.

Mirrors RocketMQ 4.9's ``ReplyMessageProcessor`` (transactions.md §3). A responder sends the reply
(built by ``MessageUtil.createReplyMessage``: topic ``<cluster>_REPLY_TOPIC``, ``MSG_TYPE=reply``,
the request's ``CORRELATION_ID`` / ``REPLY_TO_CLIENT`` / ``TTL``) with 325 (or 324). The broker:

1. runs the send checks (``msgCheck``: permission, topic, queue id; a queue id < 0 picks one);
2. finds the requester's connection by its client id (``REPLY_TO_CLIENT``, registered by the
   requester's producer heartbeat) and pushes the reply there with PUSH_REPLY_MESSAGE_TO_CLIENT
   (326, two-way, :class:`ReplyMessageRequestHeader` fields + the body), ``PUSH_REPLY_TIME`` added;
3. answers SUCCESS with ``msgId "0"``, ``queueOffset 0`` when the requester took it, else
   SYSTEM_ERROR with ``push reply message fail, channel of <id> not found.`` (the requester is
   gone: one log line, nothing retried or kept pending) or ``reply message properties[REPLY_TO_CLIENT]
   is null``;
4. with ``store_reply_message_enable`` (default true) also stores the reply on the reply topic;
   the store result sets the answer's msgId / queueOffset but never its code.

The answer carries ``MSG_REGION`` and ``TRACE_ON`` like every send answer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar, Final

from tidemq.clock import now_ms
from tidemq.errors import ProtocolError, TideMQError
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.filter import tags_hash
from tidemq.protocol.headers import HeaderError, SendMessageRequestHeader
from tidemq.protocol.headers.send import SEND_REPLY_MESSAGE, SEND_REPLY_MESSAGE_V2
from tidemq.protocol.message import MessageConst, properties_to_string, string_to_properties
from tidemq.protocol.message_codec import MAX_PROPERTIES_BYTES
from tidemq.store.results import MessageExtBrokerInner, PutMessageStatus

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel

__all__ = [
    "PUSH_REPLY_MESSAGE_TO_CLIENT",
    "REPLY_TOPIC_POSTFIX",
    "ReplyMessageProcessor",
    "reply_topic",
]

log = logging.getLogger(__name__)

PUSH_REPLY_MESSAGE_TO_CLIENT: Final = 326
"""Broker -> requester, two-way (``RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT``)."""
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
"""``MixAll.REPLY_TOPIC_POSTFIX``: the reply topic is ``<cluster>_REPLY_TOPIC``."""
PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
PROPERTY_PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
PUSH_REPLY_TIMEOUT_S: Final = 3.0
"""How long the broker waits for the requester's 326 answer (Java's ``callClient``: 3 s)."""
_STORED_OK = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


def reply_topic(cluster: str) -> str:
    """``MixAll.getReplyTopic``: ``"<cluster>_REPLY_TOPIC"``."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


class ReplyMessageProcessor:
    """Pushes replies to their requesters (and stores them). Mirrors ``ReplyMessageProcessor``.

    Args:
        broker: the owning :class:`~tidemq.broker.broker.Broker` (its send processor's checks, the
            producer manager to find the requester's channel, the store).
    """

    CODES: ClassVar[tuple[int, ...]] = (SEND_REPLY_MESSAGE, SEND_REPLY_MESSAGE_V2)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.pushed = 0
        """Replies handed to their requester (for tests and metrics)."""
        self.dropped = 0
        """Replies whose requester was gone or refused them."""

    def _ext(self) -> dict[str, str]:
        cfg = self.broker.config
        return {
            MessageConst.PROPERTY_MSG_REGION: cfg.region_id,
            MessageConst.PROPERTY_TRACE_SWITCH: str(cfg.trace_on).lower(),
        }

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Handle one 324 / 325: check, push to the requester, store; returns the answer."""
        ext = self._ext()
        try:
            header = SendMessageRequestHeader.from_command(request)
        except HeaderError as exc:
            return RemotingCommand.create_response(
                ResponseCode.SYSTEM_ERROR, f"bad reply request header: {exc}", ext
            )
        send = self.broker.send_processor
        assert send is not None
        checked = send.msg_check(channel.remote_addr, header)
        if isinstance(checked, RemotingCommand):
            checked.ext_fields.update(ext)
            return checked
        _, queue_id = checked
        body = request.body or b""
        text = header.properties or ""
        limit = self.broker.store_config.max_message_size
        if len(body) > limit or len(text.encode()) > MAX_PROPERTIES_BYTES:
            return RemotingCommand.create_response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the reply message is too large: body {len(body)} bytes (limit {limit}), "
                f"properties {len(text.encode())} bytes (limit {MAX_PROPERTIES_BYTES})",
                ext,
            )
        props = string_to_properties(text)
        ok, remark = await self.push_reply_message(channel, header, props, body)
        fields = dict(ext)
        if ok:
            code, remark_out = ResponseCode.SUCCESS, None
            fields.update(msgId="0", queueId=str(queue_id), queueOffset="0")
        else:
            code, remark_out = ResponseCode.SYSTEM_ERROR, remark
        if self.broker.config.store_reply_message_enable:
            self._store(channel, header, props, body, queue_id, fields)
        return RemotingCommand.create_response(code, remark_out, fields)

    async def push_reply_message(
        self, channel: Channel, header: SendMessageRequestHeader, props: dict[str, str], body: bytes
    ) -> tuple[bool, str]:
        """PUSH_REPLY_MESSAGE_TO_CLIENT (326) to the channel of ``REPLY_TO_CLIENT``; ``(ok, remark)``.

        Never raises: a missing property, an unknown client id, a refused or timed-out push each
        give ``(False, remark)`` and one log line. ``PUSH_REPLY_TIME`` is added to ``props``.
        """
        sender = props.get(PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if sender is None:
            log.warning("%s is null, can not reply message", PROPERTY_MESSAGE_REPLY_TO_CLIENT)
            self.dropped += 1
            return False, f"reply message properties[{PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"
        target = self.broker.producer_manager.find_channel(sender)
        if target is None or not target.is_active:
            remark = f"push reply message fail, channel of <{sender}> not found."
            log.warning("%s (reply from %s dropped)", remark, channel.remote_addr)
            self.dropped += 1
            return False, remark
        props[PROPERTY_PUSH_REPLY_TIME] = str(now_ms())
        push = RemotingCommand.create_request(
            PUSH_REPLY_MESSAGE_TO_CLIENT, self._push_fields(channel, header, props), body
        )
        try:
            answer = await target.invoke(push, PUSH_REPLY_TIMEOUT_S)  # type: ignore[attr-defined]
        except (TideMQError, OSError) as exc:
            log.warning("push reply message to <%s> fail: %s", sender, exc)
            self.dropped += 1
            return False, f"push reply message to {sender} fail."
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, remark: %s", sender, answer.remark)
            self.dropped += 1
            return False, f"push reply message to {sender} fail."
        self.pushed += 1
        return True, ""

    def _push_fields(
        self, channel: Channel, header: SendMessageRequestHeader, props: dict[str, str]
    ) -> dict[str, str]:
        """``ReplyMessageRequestHeader`` as ext fields (long names, every value a string)."""
        fields = {
            "producerGroup": header.producer_group,
            "topic": header.topic,
            "defaultTopic": header.default_topic,
            "defaultTopicQueueNums": str(header.default_topic_queue_nums),
            "queueId": str(header.queue_id),
            "sysFlag": str(header.sys_flag),
            "bornTimestamp": str(header.born_timestamp),
            "flag": str(header.flag),
            "properties": properties_to_string(props),
            "reconsumeTimes": str(header.reconsume_times or 0),
            "unitMode": str(header.unit_mode).lower(),
            "bornHost": channel.remote_addr,
            "storeHost": self.broker.addr,
            "storeTimestamp": str(now_ms()),
        }
        return fields

    def _store(
        self,
        channel: Channel,
        header: SendMessageRequestHeader,
        props: dict[str, str],
        body: bytes,
        queue_id: int,
        fields: dict[str, str],
    ) -> None:
        """Store the reply (``storeReplyMessageEnable``); a stored reply's msgId / queueOffset go
        into ``fields``, a failure is only logged (as Java's ``handlePutMessageResult``)."""
        inner = MessageExtBrokerInner(
            header.topic,
            body,
            flag=header.flag,
            properties=props,
            queue_id=queue_id,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=channel.remote_addr,
            reconsume_times=header.reconsume_times or 0,
            tags_code=tags_hash(props.get(MessageConst.PROPERTY_TAGS)),
        )
        try:
            result = self.broker.store.put_message(inner)
        except ProtocolError as exc:
            log.warning("process reply message, store refused it: %s", exc)
            return
        append = result.append_result
        if result.status not in _STORED_OK or append is None:
            log.warning("process reply message, store put failed: %s", result.status.value)
            return
        self.broker.broker_stats.inc_put(header.topic, 1, append.wrote_bytes)
        fields.update(msgId=append.msg_id, queueId=str(queue_id), queueOffset=str(append.logics_offset))
