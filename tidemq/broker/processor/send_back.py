"""CONSUMER_SEND_MSG_BACK (36): a consumer hands a failed message back for a later retry.

Mirrors RocketMQ's ``SendMessageProcessor.asyncConsumerSendMsgBack`` (protocol.md §3.6, §7.9).

Order of checks (each failure answers a code + remark):

1. header parses (else SYSTEM_ERROR naming the field); the group's subscription config exists or is
   auto-created (else SUBSCRIPTION_GROUP_NOT_EXIST); broker writable (else NO_PERMISSION);
   ``retryQueueNums <= 0`` -> SUCCESS, message dropped;
2. ``%RETRY%<group>`` created (``retryQueueNums`` queues, perm RW) and writable;
3. the original message is found at the header's commit-log ``offset`` (else SYSTEM_ERROR
   ``look message by offset failed, N``).

Then a copy goes to ``%RETRY%<group>`` (random retry queue) with ``reconsumeTimes + 1``,
``RETRY_TOPIC`` = the original topic (kept if already set), ``ORIGIN_MESSAGE_ID`` (kept if set, else
the original's offset message id) and delay level ``3 + reconsumeTimes`` (or the requested level)
-- the store parks it in ``SCHEDULE_TOPIC_XXXX``. Once ``reconsumeTimes >= maxReconsumeTimes`` (the
group's ``retryMaxTimes``, 16 by default, or the header's value for clients of version >= 121) or when
``delayLevel < 0``, the copy goes to ``%DLQ%<group>`` queue 0 instead, without delay -- the same rule
and DLQ topic settings as the ``%RETRY%`` redirect of plain sends
(:meth:`~tidemq.broker.processor.send.SendMessageProcessor.handle_retry_and_dlq`).
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, ClassVar

from tidemq.broker.names import check_retry_topic_of
from tidemq.broker.processor.send import CLIENT_VERSION_WITH_MAX_RECONSUME, FAQ_NO_TOPIC, PERM_RW, error
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import ConsumerSendMsgBackRequestHeader, HeaderError
from tidemq.protocol.message import MessageConst, MessageExt
from tidemq.protocol.topic import dlq_topic, retry_topic
from tidemq.store.results import MessageExtBrokerInner, PutMessageStatus

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel

__all__ = ["DLQ_NUMS_PER_GROUP", "SendMessageBackProcessor", "effective_max_reconsume_times"]

log = logging.getLogger(__name__)

DLQ_NUMS_PER_GROUP = 1
"""Queues of a ``%DLQ%<group>`` topic (``MixAll.DLQ_NUMS_PER_GROUP``)."""


def effective_max_reconsume_times(group_max: int, request_version: int, header_max: int | None) -> int:
    """The group's ``retryMaxTimes``, overridden by the header's for clients of version >= 121."""
    if request_version >= CLIENT_VERSION_WITH_MAX_RECONSUME and header_max is not None:
        return header_max
    return group_max


class SendMessageBackProcessor:
    """Retries and dead letters for failed messages. Mirrors ``asyncConsumerSendMsgBack``.

    Args:
        broker: the owning :class:`~tidemq.broker.broker.Broker` (config, managers, store).
    """

    CODES: ClassVar[tuple[int, ...]] = (RequestCode.CONSUMER_SEND_MSG_BACK,)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._rng = random.Random()

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Handle one CONSUMER_SEND_MSG_BACK; returns SUCCESS (no header, no body) or an error."""
        try:
            header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderError as exc:
            return error(ResponseCode.SYSTEM_ERROR, f"bad consumer send-back request header: {exc}")
        return self.consumer_send_msg_back(header, request.version)

    def _to_dead_letters(
        self, group: str, msg: MessageExt, props: dict[str, str], max_times: int, delay_level: int
    ) -> tuple[str, int]:
        """Where a message past ``max_times`` (or sent back with a negative delay level) goes:
        ``%DLQ%<group>`` (created when missing) and a random queue of it; ``DELAY`` dropped from
        ``props``."""
        new_topic = dlq_topic(group)
        queue_id = self._rng.randrange(DLQ_NUMS_PER_GROUP)
        self.broker.topic_config_manager.create_topic_in_send_message_back_method(
            new_topic, DLQ_NUMS_PER_GROUP, PERM_RW, 0
        )
        props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
        log.info(
            "message %s of group %s (reconsumed %d times, max %d, delay level %d) goes to %s",
            msg.offset_msg_id,
            group,
            msg.reconsume_times,
            max_times,
            delay_level,
            new_topic,
        )
        return new_topic, queue_id

    def consumer_send_msg_back(
        self, header: ConsumerSendMsgBackRequestHeader, request_version: int
    ) -> RemotingCommand:
        """The decision logic (callable without a socket): copy the message to retry or DLQ."""
        broker = self.broker
        group = header.group
        problem = check_retry_topic_of(group)  # before anything is created or parked for later
        if problem is not None:
            return error(ResponseCode.SYSTEM_ERROR, problem)
        sgc = broker.subscription_group_manager.find_subscription_group_config(group)
        if sgc is None:
            return error(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group}{FAQ_NO_TOPIC}",
            )
        if not broker.config.is_writeable:
            return error(
                ResponseCode.NO_PERMISSION, f"the broker[{broker.addr}] sending message is forbidden"
            )
        if sgc.retry_queue_nums <= 0:
            return RemotingCommand.create_response(ResponseCode.SUCCESS)
        tcm = broker.topic_config_manager
        new_topic = retry_topic(group)
        queue_id = self._rng.randrange(sgc.retry_queue_nums)
        topic_sys_flag = 2 if header.unit_mode else 0  # TopicSysFlag.buildSysFlag(false, true)
        topic_config = tcm.create_topic_in_send_message_back_method(
            new_topic, sgc.retry_queue_nums, PERM_RW, topic_sys_flag
        )
        if not topic_config.perm & 2:
            return error(ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden")
        msg = broker.store.lookup.look_message_by_offset(header.offset)
        if msg is None:
            return error(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}")
        props = dict(msg.properties)
        props.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, msg.topic)
        props.pop(MessageConst.PROPERTY_WAIT_STORE_MSG_OK, None)
        max_times = effective_max_reconsume_times(
            sgc.retry_max_times, request_version, header.max_reconsume_times
        )
        if msg.reconsume_times >= max_times or header.delay_level < 0:
            new_topic, queue_id = self._to_dead_letters(group, msg, props, max_times, header.delay_level)
        else:
            delay_level = header.delay_level or 3 + msg.reconsume_times
            props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
        if not props.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID):
            props[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] = msg.offset_msg_id
        inner = MessageExtBrokerInner.copy_of(
            msg, new_topic, props, queue_id=queue_id, reconsume_times=msg.reconsume_times + 1
        )
        result = broker.store.put_message(inner)
        if result.status is PutMessageStatus.PUT_OK:
            return RemotingCommand.create_response(ResponseCode.SUCCESS)
        detail = f": {result.remark}" if result.remark else ""
        # a full disk is SERVICE_NOT_AVAILABLE (the client re-consumes the message later: nothing lost)
        code = ResponseCode.SERVICE_NOT_AVAILABLE if result.disk_full else ResponseCode.SYSTEM_ERROR
        return error(code, f"{result.status.value}{detail}")
