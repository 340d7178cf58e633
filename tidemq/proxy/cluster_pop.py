"""POP over remoting for cluster mode: POP_MESSAGE / ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME to
the broker named in the request, with the receipt handles built from the pop response header as
RocketMQ's client does (``MQClientAPIImpl.processPopResponse``, rocketmq5.md §8.3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemq.broker.pop.extra_info import (
    build_extra_info,
    parse_extra_info,
    parse_order_count_info,
    parse_start_offset_info,
    queue_offset_key,
    start_offset_key,
)
from tidemq.clock import now_ms
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import ConsumerSendMsgBackRequestHeader
from tidemq.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from tidemq.protocol.message import MessageExt
from tidemq.protocol.message_codec import decode_messages
from tidemq.proxy import codes

if TYPE_CHECKING:
    from tidemq.proxy.backend import PopSpec
    from tidemq.proxy.cluster import ClusterBackend

POP_CK = "POP_CK"
NOT_FOUND = (ResponseCode.PULL_NOT_FOUND, ResponseCode.POLLING_TIMEOUT)


def _refused(response: RemotingCommand, what: str) -> codes.ProxyError:
    return codes.ProxyError(
        codes.code_of_remoting(response.code), response.remark or f"{what} failed ({response.code})"
    )


def messages_with_handles(response: RemotingCommand, topic: str, broker_name: str) -> list[MessageExt]:
    """The popped messages, each with its handle in ``POP_CK`` and its delivery count."""
    ext = response.ext_fields
    pop_time, invisible, revive_qid = int(ext["popTime"]), int(ext["invisibleTime"]), int(ext["reviveQid"])
    starts = parse_start_offset_info(ext.get("startOffsetInfo"))
    counts = parse_order_count_info(ext.get("orderCountInfo"))
    out = decode_messages(response.body or b"", broker_name=broker_name)
    for msg in out:
        handle = msg.get_property(POP_CK)
        if handle is None:
            key = start_offset_key(msg.topic, msg.queue_id)
            handle = build_extra_info(
                starts.get(key, msg.queue_offset), pop_time, invisible, revive_qid,
                msg.topic, broker_name, msg.queue_id, msg.queue_offset,
            )  # fmt: skip
            count = counts.get(queue_offset_key(msg.topic, msg.queue_id, msg.queue_offset), counts.get(key))
            if count is not None:
                msg.reconsume_times = count
        # + the commit-log offset, as the Java proxy's handle has it (brokers read the first 8
        # fields): what ForwardMessageToDeadLetterQueue hands to CONSUMER_SEND_MSG_BACK
        msg.put_property(POP_CK, f"{handle} {msg.commit_log_offset}")
        msg.topic = topic
    return out


async def pop(backend: ClusterBackend, broker_name: str, spec: PopSpec) -> list[MessageExt]:
    """POP_MESSAGE from every queue of ``topic`` on ``broker_name``.

    Raises:
        ProxyError: the broker refused.
    """
    header = PopMessageRequestHeader(
        consumer_group=spec.group, topic=spec.topic, queue_id=-1, max_msg_nums=spec.max_nums,
        invisible_time=spec.invisible_ms, poll_time=spec.poll_ms, born_time=now_ms(), init_mode=1,
        exp_type=spec.expression_type, exp=spec.expression, order=spec.order, attempt_id=spec.attempt_id,
    )  # fmt: skip
    request = RemotingCommand.create_request(RequestCode.POP_MESSAGE, header.to_ext_fields())
    response = await backend.invoke(broker_name, request, spec.poll_ms / 1000.0 + 3.0, "")
    if response.code in NOT_FOUND:
        return []
    if response.code != ResponseCode.SUCCESS:
        raise _refused(response, "pop")
    return messages_with_handles(response, spec.topic, broker_name)


async def ack(backend: ClusterBackend, broker_name: str, group: str, topic: str, handle: str) -> None:
    """ACK_MESSAGE. Raises ProxyError when the broker refuses."""
    info = parse_extra_info(handle)
    header = AckMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=info.queue_id, extra_info=handle, offset=info.queue_offset
    )
    request = RemotingCommand.create_request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
    response = await backend.invoke(broker_name, request, 3.0, "")
    if response.code != ResponseCode.SUCCESS:
        raise _refused(response, "ack")


async def change_invisible_time(
    backend: ClusterBackend, broker_name: str, group: str, topic: str, handle: str, invisible_ms: int
) -> str:
    """CHANGE_MESSAGE_INVISIBLETIME; the new handle (the message's offset as its check-point start).

    Raises:
        ProxyError: the broker refused.
    """
    info = parse_extra_info(handle)
    header = ChangeInvisibleTimeRequestHeader(
        consumer_group=group, topic=topic, queue_id=info.queue_id, extra_info=handle,
        offset=info.queue_offset, invisible_time=invisible_ms,
    )  # fmt: skip
    request = RemotingCommand.create_request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields())
    response = await backend.invoke(broker_name, request, 3.0, "")
    if response.code != ResponseCode.SUCCESS:
        raise _refused(response, "change invisible time")
    ext = response.ext_fields
    extra = handle.split(" ")[8:]  # the commit-log offset, kept
    return " ".join(
        [str(info.queue_offset), ext["popTime"], ext["invisibleTime"], ext["reviveQid"], info.retry,
         broker_name, str(info.queue_id), str(info.queue_offset), *extra]
    )  # fmt: skip


async def forward_to_dlq(
    backend: ClusterBackend, broker_name: str, group: str, topic: str, handle: str, message_id: str
) -> None:
    """CONSUMER_SEND_MSG_BACK with delay level -1 (straight to ``%DLQ%<group>``), then the ack.

    Raises:
        ProxyError: BAD_REQUEST for a handle without the commit-log offset, or the broker's refusal.
    """
    parts = handle.split(" ")
    if len(parts) < 9 or not parts[8].isdigit():
        raise codes.ProxyError(
            codes.BAD_REQUEST, "the receipt handle does not name its message's commit-log offset"
        )
    header = ConsumerSendMsgBackRequestHeader(
        offset=int(parts[8]), group=group, delay_level=-1, origin_msg_id=message_id, origin_topic=topic
    )
    request = RemotingCommand.create_request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
    response = await backend.invoke(broker_name, request, 3.0, "")
    if response.code != ResponseCode.SUCCESS:
        raise _refused(response, "send to the dead-letter queue")
    await ack(backend, broker_name, group, topic, handle)
