"""Request-reply (RocketMQ 4.6+): a producer sends a request and waits for one reply message.

Mirrors ``DefaultMQProducerImpl.request`` / ``prepareSendRequest``, ``RequestFutureHolder``,
``RequestResponseFuture``, ``MessageUtil.createReplyMessage`` and
``ClientRemotingProcessor.receiveReplyMessage`` (transactions.md §3). The flow:

1. **Requester** (:func:`request`): the message gets ``CORRELATION_ID`` (a UUID),
   ``REPLY_TO_CLIENT`` (this client id) and ``TTL`` (the timeout, ms). The first request to a
   topic fetches its route and heartbeats every broker first, so the broker knows this client's
   connection under its client id. A future keyed by the correlation id waits for the reply.
2. **Broker**: stores the request like any message, with ``CLUSTER`` added.
3. **Responder**: :func:`create_reply_message` (topic ``<CLUSTER>_REPLY_TOPIC``, ``MSG_TYPE=reply``,
   the three properties copied) and :func:`send_reply` (or any producer send: a ``MSG_TYPE=reply``
   message goes out as SEND_REPLY_MESSAGE_V2, 325).
4. **Broker**: pushes it to the requester's connection with PUSH_REPLY_MESSAGE_TO_CLIENT (326);
   :class:`ReplyMessageProcessor` below completes the future (``ARRIVE_TIME`` added) and answers
   SUCCESS. A reply nobody waits for any more is logged and answered SUCCESS.

No reply within the timeout raises :class:`RequestTimeoutError` (and the next request to that topic
heartbeats every broker first again: a restarted broker forgets the requester's channel until its
next heartbeat); a request that could not be sent raises :class:`RequestSendError` (its cause
attached). Only the requester enforces ``TTL``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from typing import TYPE_CHECKING, Any, Final

from tidemq.errors import ClientError, TideMQError
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import Message, MessageConst, MessageExt, SendResult, string_to_properties
from tidemq.protocol.message_codec import MessageSysFlag, decompress_body

if TYPE_CHECKING:
    from tidemq.client.producer.producer import AsyncProducer
    from tidemq.remoting.channel import Channel

__all__ = [
    "PROPERTY_CORRELATION_ID",
    "PROPERTY_MESSAGE_REPLY_TO_CLIENT",
    "PROPERTY_MESSAGE_TTL",
    "PROPERTY_MESSAGE_TYPE",
    "PUSH_REPLY_MESSAGE_TO_CLIENT",
    "REPLY_MESSAGE_FLAG",
    "ReplyMessageProcessor",
    "RequestSendError",
    "RequestTimeoutError",
    "create_reply_message",
    "get_reply_to_client",
    "request",
    "send_reply",
]

log = logging.getLogger(__name__)

PUSH_REPLY_MESSAGE_TO_CLIENT: Final = 326
PROPERTY_CORRELATION_ID: Final = "CORRELATION_ID"
PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
PROPERTY_MESSAGE_TTL: Final = "TTL"
PROPERTY_MESSAGE_TYPE: Final = "MSG_TYPE"
PROPERTY_REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
REPLY_MESSAGE_FLAG: Final = "reply"
"""``MixAll.REPLY_MESSAGE_FLAG``: the ``MSG_TYPE`` of a reply."""
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"

_pending: dict[str, asyncio.Future[MessageExt]] = {}
"""``RequestFutureHolder.requestFutureTable``: correlation id -> the requester's future (all on the
loop of the requester's ClientInstance, which is also where its 326 requests arrive)."""
_ready: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
"""Producer -> topics whose route it has and after which it heartbeated every broker."""


class RequestTimeoutError(ClientError, TimeoutError):
    """The request was sent but no reply came within the timeout. Mirrors ``RequestTimeoutException``
    (``ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION``)."""


class RequestSendError(ClientError):
    """The request message itself could not be sent (the cause is chained)."""


def create_reply_message(request_msg: Message, body: bytes | str) -> Message:
    """The reply to ``request_msg``. Mirrors ``MessageUtil.createReplyMessage``.

    Topic ``<CLUSTER>_REPLY_TOPIC`` (``CLUSTER`` is the property the broker added to the stored
    request); properties ``MSG_TYPE=reply`` and the request's ``CORRELATION_ID``,
    ``REPLY_TO_CLIENT`` and ``TTL``.

    Raises:
        ClientError: the request has no ``CLUSTER`` property (it was not received from a broker),
            or is not a request (no ``CORRELATION_ID`` / ``REPLY_TO_CLIENT``).
    """
    cluster = request_msg.get_property(MessageConst.PROPERTY_CLUSTER)
    if cluster is None:
        raise ClientError(
            f"create reply message fail, requestMessage error, property[{MessageConst.PROPERTY_CLUSTER}] is null."
        )
    props: dict[str, str] = {PROPERTY_MESSAGE_TYPE: REPLY_MESSAGE_FLAG}
    for key in (PROPERTY_CORRELATION_ID, PROPERTY_MESSAGE_REPLY_TO_CLIENT, PROPERTY_MESSAGE_TTL):
        value = request_msg.get_property(key)
        if value is None and key != PROPERTY_MESSAGE_TTL:
            raise ClientError(f"create reply message fail: the message has no {key} (not a request)")
        if value is not None:
            props[key] = value
    reply = Message(f"{cluster}_{REPLY_TOPIC_POSTFIX}", body)
    reply.properties.update(props)
    return reply


def get_reply_to_client(msg: Message) -> str | None:
    """The requester's client id (``REPLY_TO_CLIENT``). Mirrors ``MessageUtil.getReplyToClient``."""
    return msg.get_property(PROPERTY_MESSAGE_REPLY_TO_CLIENT)


async def send_reply(producer: AsyncProducer, reply: Message, timeout: float | None = None) -> SendResult:
    """Send ``reply`` (of :func:`create_reply_message`) once, as SEND_REPLY_MESSAGE_V2 (325).

    One attempt, no retries: when the requester is gone the broker answers SYSTEM_ERROR
    (``push reply message fail, channel of <id> not found.``) and the reply is dropped there.

    Args:
        timeout: seconds (default the producer's ``send_msg_timeout``).

    Raises:
        BrokerError: the broker refused it or could not push it to the requester.
        RemotingTimeoutError / ClientError / NoRouteError: as :meth:`AsyncProducer.send`.
    """
    if reply.get_property(PROPERTY_MESSAGE_TYPE) != REPLY_MESSAGE_FLAG:
        raise ClientError("not a reply message (MSG_TYPE is not 'reply'): use create_reply_message()")
    producer.encoder.check_message(reply)
    t = producer.config.send_msg_timeout if timeout is None else timeout
    return await producer.send_default(reply, t, 0)


async def _prepare_send_request(producer: AsyncProducer, msg: Message, timeout_ms: int) -> str:
    """``prepareSendRequest``: the three properties, and route + heartbeat on a topic's first request."""
    correlation_id = str(uuid.uuid4())
    msg.properties[PROPERTY_CORRELATION_ID] = correlation_id
    msg.properties[PROPERTY_MESSAGE_REPLY_TO_CLIENT] = producer.instance.client_id
    msg.properties[PROPERTY_MESSAGE_TTL] = str(timeout_ms)
    topics = _ready.setdefault(producer, set())
    if msg.topic not in topics:
        begin = time.monotonic()
        await producer.find_publish_info(msg.topic)
        await producer.instance.send_heartbeat_to_all_brokers()
        topics.add(msg.topic)
        cost_ms = (time.monotonic() - begin) * 1000
        if cost_ms > 500:
            log.warning("prepare send request for <%s> cost %d ms", msg.topic, cost_ms)
    return correlation_id


async def request(producer: AsyncProducer, msg: Message, timeout_ms: int, **send_kwargs: Any) -> MessageExt:
    """Send ``msg`` as a request and return the reply. Mirrors ``DefaultMQProducerImpl.request``.

    Args:
        producer: a started :class:`~tidemq.client.producer.producer.AsyncProducer`.
        msg: the request; ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL`` are set on it.
        timeout_ms: milliseconds for the send and the reply together.
        send_kwargs: ``queue`` / ``selector`` / ``arg`` as for :meth:`AsyncProducer.send`.

    Returns:
        The reply (a ``MessageExt``: topic ``<cluster>_REPLY_TOPIC``, body, properties with
        ``ARRIVE_TIME``, ``PUSH_REPLY_TIME``, born/store hosts and timestamps).

    Raises:
        RequestTimeoutError: sent, but no reply within ``timeout_ms``.
        RequestSendError: the request could not be sent within ``timeout_ms``.
        ClientError: invalid message, or ``timeout_ms`` <= 0.
    """
    if timeout_ms <= 0:
        raise ClientError(f"request timeout must be positive, got {timeout_ms} ms")
    producer.encoder.check_message(msg)
    deadline = time.monotonic() + timeout_ms / 1000
    correlation_id = await _prepare_send_request(producer, msg, timeout_ms)
    fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
    _pending[correlation_id] = fut
    try:
        try:
            await producer.send(msg, max(0.001, deadline - time.monotonic()), **send_kwargs)
        except TideMQError as exc:
            raise RequestSendError(f"send request message to <{msg.topic}> fail: {exc}") from exc
        try:
            return await asyncio.wait_for(fut, max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            # the broker may have restarted and forgotten this client's channel: heartbeat again first
            _ready.get(producer, set()).discard(msg.topic)
            raise RequestTimeoutError(
                f"send request message to <{msg.topic}> OK, but wait reply message timeout, {timeout_ms} ms."
            ) from None
    finally:
        _pending.pop(correlation_id, None)


def pending_requests() -> int:
    """Requests waiting for their reply in this process (for tests and metrics)."""
    return len(_pending)


def _complete(fut: asyncio.Future[MessageExt], msg: MessageExt) -> None:
    if not fut.done():
        fut.set_result(msg)


class ReplyMessageProcessor:
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326) on a client connection. Mirrors
    ``ClientRemotingProcessor.receiveReplyMessage`` / ``processReplyMessage``.

    Builds the reply ``MessageExt`` from the ``ReplyMessageRequestHeader`` fields and the body
    (decompressed when sysFlag says so), adds ``ARRIVE_TIME``, completes the waiting request and
    answers SUCCESS; SYSTEM_ERROR ``process reply message fail`` when the push cannot be read.
    """

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Handle one PUSH_REPLY_MESSAGE_TO_CLIENT (326): complete the matching request; SUCCESS (also for a
        reply nobody waits for) or SYSTEM_ERROR when the push cannot be read."""
        receive_ms = time.time_ns() // 1_000_000
        try:
            msg = self.decode_reply(request, receive_ms)
        except (ValueError, TideMQError) as exc:
            log.warning("bad reply message from %s: %s", channel.remote_addr, exc)
            return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        correlation_id = msg.get_property(PROPERTY_CORRELATION_ID) or ""
        fut = _pending.pop(correlation_id, None)
        if fut is None or fut.done():
            log.warning(
                "receive reply message, but not matched any request, CorrelationId: %s , reply from host: %s",
                correlation_id,
                msg.born_host,
            )
        elif fut.get_loop() is asyncio.get_running_loop():
            fut.set_result(msg)
        else:  # a requester on another loop than this connection's (not the usual case)
            fut.get_loop().call_soon_threadsafe(_complete, fut, msg)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)

    @staticmethod
    def decode_reply(request: RemotingCommand, receive_ms: int) -> MessageExt:
        """The reply message of a 326 request (``ValueError`` on a malformed number)."""
        f = request.ext_fields
        sys_flag = int(f.get("sysFlag", "0"))
        body = request.body or b""
        if sys_flag & MessageSysFlag.COMPRESSED_FLAG:
            body = decompress_body(body)
        props = string_to_properties(f.get("properties", ""))
        props[PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(receive_ms)
        return MessageExt(
            f.get("topic", ""),
            body,
            flag=int(f.get("flag", "0")),
            properties=props,
            queue_id=int(f.get("queueId", "0")),
            sys_flag=sys_flag,
            born_timestamp=int(f.get("bornTimestamp", "0")),
            born_host=f.get("bornHost", ""),
            store_timestamp=int(f.get("storeTimestamp", "0")),
            store_host=f.get("storeHost", ""),
            reconsume_times=int(f.get("reconsumeTimes") or 0),
        )
