"""ForwardMessageToDeadLetterQueue in local mode: the popped message is copied into
``%DLQ%<group>`` (queue 0, created with one queue as RocketMQ creates it) with
``DLQ_ORIGIN_TOPIC`` / ``DLQ_ORIGIN_MESSAGE_ID``, then acked. Mirrors the proxy's
``ForwardMessageToDLQActivity`` (a CONSUMER_SEND_MSG_BACK with delay level -1, then an ack)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemq.broker.pop.extra_info import parse_extra_info, real_topic
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import SendMessageRequestHeader
from tidemq.protocol.message import properties_to_string
from tidemq.protocol.message_codec import decode_message
from tidemq.protocol.topic import dlq_topic
from tidemq.proxy import codes
from tidemq.proxy.convert import DLQ_ORIGIN_MESSAGE_ID, DLQ_ORIGIN_TOPIC

if TYPE_CHECKING:
    from tidemq.proxy.local import LocalBackend


async def forward_local(backend: LocalBackend, group: str, topic: str, handle: str, message_id: str) -> None:
    """Copy the message named by ``handle`` to the group's dead-letter topic, then ack it.

    Raises:
        ProxyError: MESSAGE_NOT_FOUND when the message is gone, or the send's / ack's refusal.
    """
    broker = backend.broker
    info = parse_extra_info(handle)
    source = real_topic(topic, group, info.retry)
    found = broker.store.get_message(group, source, info.queue_id, info.queue_offset, 1, None)
    buffers = found.message_buffers if found.record_sizes else []
    if not buffers:
        raise codes.ProxyError(codes.MESSAGE_NOT_FOUND, f"message {message_id} is no longer in {source}")
    msg = decode_message(buffers[0])[0]
    dlq = dlq_topic(group)
    broker.topic_config_manager.create_topic_in_send_message_back_method(dlq, 1, 6, 0)
    props = dict(msg.properties)
    props[DLQ_ORIGIN_TOPIC] = topic
    props[DLQ_ORIGIN_MESSAGE_ID] = message_id
    header = SendMessageRequestHeader(
        producer_group=group,
        topic=dlq,
        default_topic="TBW102",
        default_topic_queue_nums=1,
        queue_id=0,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        flag=msg.flag,
        properties=properties_to_string(props),
        reconsume_times=msg.reconsume_times,
    )
    request = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext_fields(), msg.body)
    response = await backend.invoke(broker.config.broker_name, request, 3.0, f"dlq-{group}")
    if response.code != ResponseCode.SUCCESS:
        raise codes.ProxyError(
            codes.code_of_remoting(response.code), response.remark or "send to the DLQ failed"
        )
    await backend.ack(info.broker_name, group, topic, handle)
