"""``Producer.recall_message``: cancel a timer message before it is delivered (RocketMQ 5.3).

Mirrors ``DefaultMQProducerImpl.recallMessage`` / ``MQClientAPIImpl.recallMessage``: the handle (a
timer send's :attr:`SendResult.recall_handle <tidemq.protocol.message.SendResult.recall_handle>`)
names the broker; RECALL_MESSAGE (370) goes to that broker's master, found through the topic's route.
With ``enable_msg_trace`` a ``Recall`` trace record is written for every answer
(``DefaultRecallMessageTraceHook``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemq.errors import ClientError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.headers.recall import RecallMessageRequestHeader
from tidemq.protocol.message import MessageConst
from tidemq.protocol.recall import RecallHandle, RecallHandleError
from tidemq.protocol.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, validate_topic

if TYPE_CHECKING:
    from tidemq.client.producer.producer import AsyncProducer

__all__ = ["recall_message"]


async def recall_message(
    producer: AsyncProducer, topic: str, recall_handle: str, timeout: float | None = None
) -> str:
    """Recall the timer message ``recall_handle`` names; returns its message id (UNIQ_KEY).

    Args:
        producer: a started producer (its group goes in the request).
        topic: the topic the message was sent to.
        recall_handle: the send's ``recall_handle``.
        timeout: seconds (default the producer's ``send_msg_timeout``).

    Raises:
        ClientError: a retry / DLQ topic, a handle that does not decode, an unknown broker.
        BrokerError: the broker refused it, e.g. ILLEGAL_OPERATION (604) ``recall failed, timestamp
            invalid: ...`` when the message is already due (delivered), NO_PERMISSION when the
            broker has recall off.
    """
    validate_topic(topic)
    if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        raise ClientError(f"recall: topic {topic} is not supported (retry and dead-letter topics)")
    try:
        handle = RecallHandle.decode(recall_handle)
    except RecallHandleError as exc:
        raise ClientError(f"recall: {exc}") from None
    instance = producer.instance
    addr = instance.find_broker_address_in_publish(handle.broker_name)
    if addr is None:
        await producer.fetch_publish_message_queues(topic)
        addr = instance.find_broker_address_in_publish(handle.broker_name)
    if addr is None:
        raise ClientError(
            f"recall: the broker {handle.broker_name} of the handle is not known (topic {topic})"
        )
    ext = RecallMessageRequestHeader(
        producer_group=producer.config.producer_group,
        topic=topic,
        recall_handle=recall_handle,
        bname=handle.broker_name,
    ).to_ext_fields()
    api = instance.api
    wait = producer.config.send_msg_timeout if timeout is None else timeout
    resp = await api.invoke(addr, api.request(RequestCode.RECALL_MESSAGE, ext), wait)
    region = resp.ext_fields.get(MessageConst.PROPERTY_MSG_REGION)
    if producer.trace_hook is not None and region is not None:  # DefaultRecallMessageTraceHook
        producer.trace_hook.recalled(topic, handle.message_id, region, resp.code == ResponseCode.SUCCESS)
    api.check(resp, addr)
    return resp.ext_fields.get("msgId", handle.message_id)
