"""Admin requests the broker carries out on its consumers' connections (protocol.md §3.8).

Mirrors the relaying parts of RocketMQ's ``AdminBrokerProcessor`` and ``Broker2Client``:

* INVOKE_BROKER_TO_RESET_OFFSET (222): compute each queue's target offset (by store time, or the max
  offset for ``timestamp=-1``), then send RESET_CONSUMER_CLIENT_OFFSET (220) oneway to every
  connection of the group, in the body form that connection's client parses: ``ResetOffsetBodyForC``
  (a JSON list) for a CPP client, Java's fastjson object-key ``ResetOffsetBody`` otherwise. The
  broker does not touch its own offset table: the consumers write the new offsets back.
* GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309): forward code, extFields and
  body to the named client's connection (10 s) and relay its answer. Client not connected ->
  SYSTEM_ERROR; no answer in time -> CONSUME_MSG_TIMEOUT.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, ClassVar

from tidemq.errors import ProtocolError, RemotingError, RemotingTimeoutError
from tidemq.protocol.body import ResetOffsetBody, ResetOffsetBodyForC
from tidemq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    HeaderError,
    ResetOffsetRequestHeader,
)
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.message_codec import decode_offset_msg_id

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.broker.consumer_manager import ClientChannelInfo
    from tidemq.remoting import Channel

log = logging.getLogger(__name__)

CALL_CLIENT_TIMEOUT = 10.0
"""Seconds the broker waits for a relayed client answer (``Broker2Client.callClient``: 10 s)."""


def _resp(code: int, remark: str | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.create_response(code, remark, None, body)


class AdminRelayProcessor:
    """Offset reset and client relays. Mirrors ``AdminBrokerProcessor`` (resetOffset, callConsumer).

    Attributes:
        call_client_timeout: seconds to wait for a relayed client answer (10 s; tests lower it).
    """

    CODES: ClassVar[tuple[int, ...]] = (
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
    )

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.call_client_timeout = CALL_CLIENT_TIMEOUT

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Dispatch on the code; a malformed header answers SYSTEM_ERROR naming the field."""
        try:
            if request.code == RequestCode.INVOKE_BROKER_TO_RESET_OFFSET:
                h = ResetOffsetRequestHeader.from_command(request)
                return await self.reset_offset(h.topic, h.group, h.timestamp, h.is_force)
            if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
                r = GetConsumerRunningInfoRequestHeader.from_command(request)
                return await self.call_consumer(request, r.consumer_group, r.client_id)
            if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
                return await self.consume_message_directly(request)
        except HeaderError as exc:
            return _resp(ResponseCode.SYSTEM_ERROR, str(exc))
        return _resp(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported")

    # -- reset offset -------------------------------------------------------------------------------

    def compute_reset_offsets(
        self, topic: str, group: str, timestamp: int, is_force: bool
    ) -> dict[MessageQueue, int] | RemotingCommand:
        """The new offset of each queue 0..writeQueueNums-1, or the error response.

        Target = max offset (``timestamp == -1``) or the offset by store time (ms); it is used when
        ``is_force`` or when it is below the group's committed offset, else the committed offset stays.
        Mirrors the first half of ``Broker2Client.resetOffset``.
        """
        broker = self.broker
        tc = broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return _resp(
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}",
            )
        store = broker.store
        table: dict[MessageQueue, int] = {}
        for qid in range(tc.write_queue_nums):
            committed = broker.consumer_offset_manager.query_offset(group, topic, qid)
            if committed == -1:
                return _resp(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            if timestamp == -1:
                target = store.get_max_offset_in_queue(topic, qid)
            else:
                target = store.lookup.get_offset_in_queue_by_time(topic, qid, timestamp)
            target = max(target, 0)
            mq = MessageQueue(topic, broker.config.broker_name, qid)
            table[mq] = target if is_force or target < committed else committed
        return table

    async def reset_offset(self, topic: str, group: str, timestamp: int, is_force: bool) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET (222): tell every consumer of ``group`` its new offsets.

        Returns SUCCESS with the Java-form ``ResetOffsetBody``, CONSUMER_NOT_ONLINE when the group has
        no connection, SYSTEM_ERROR for an unknown topic or a group without committed offsets.
        Mirrors ``Broker2Client.resetOffset`` (without its client-version check).
        """
        table = self.compute_reset_offsets(topic, group, timestamp, is_force)
        if isinstance(table, RemotingCommand):
            return table
        info = self.broker.consumer_manager.get_consumer_group_info(group)
        channels = list(info.channel_info_table.values()) if info is not None else []
        if not channels:
            return _resp(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                f"Timestamp: {timestamp}",
            )
        ext = ResetOffsetRequestHeader(
            topic=topic, group=group, timestamp=timestamp, is_force=is_force
        ).to_ext_fields()
        java_body = ResetOffsetBody(dict(table)).encode()
        c_body = ResetOffsetBodyForC(dict(table)).encode()
        for ch in channels:
            body = c_body if _is_cpp(ch.language) else java_body
            request = RemotingCommand.create_request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(ext), body, oneway=True
            )
            try:
                await ch.channel.invoke_oneway(request)
                log.info(
                    "[reset-offset] reset offset success. topic=%s group=%s clientId=%s",
                    topic,
                    group,
                    ch.client_id,
                )
            except Exception as exc:  # a dead channel: the others still get theirs
                log.warning(
                    "[reset-offset] reset offset to %s (%s) failed: %s",
                    ch.client_id,
                    ch.channel.remote_addr,
                    exc,
                )
        return _resp(ResponseCode.SUCCESS, None, java_body)

    # -- relays ------------------------------------------------------------------------------------

    async def consume_message_directly(self, request: RemotingCommand) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY (309): attach ``brokerName`` and the stored message named by the
        offset ``msgId`` as body, then relay to the client. Mirrors ``consumeMessageDirectly``."""
        h = ConsumeMessageDirectlyResultRequestHeader.from_command(request)
        request.ext_fields["brokerName"] = self.broker.config.broker_name
        if h.msg_id:
            try:
                _, offset = decode_offset_msg_id(h.msg_id)
            except ProtocolError:
                offset = -1
            record = self.broker.store.lookup.select_one_message_by_offset(offset) if offset >= 0 else None
            if record:
                request.body = bytes(record)
        return await self.call_consumer(request, h.consumer_group, h.client_id or "")

    async def call_consumer(self, request: RemotingCommand, group: str, client_id: str) -> RemotingCommand:
        """Forward ``request`` (code, extFields, body) to ``client_id`` of ``group`` and return its
        answer. Mirrors ``AdminBrokerProcessor.callConsumer`` + ``Broker2Client.callClient``."""
        info: ClientChannelInfo | None = self.broker.consumer_manager.find_channel(group, client_id)
        if info is None or not info.channel.is_active:
            return _resp(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        forward = RemotingCommand.create_request(request.code, dict(request.ext_fields), request.body)
        channel: Any = info.channel
        try:
            response: RemotingCommand = await channel.invoke(forward, self.call_client_timeout)
        except RemotingTimeoutError as exc:
            return _resp(ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}")
        except (RemotingError, OSError) as exc:
            return _resp(
                ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}"
            )
        return response


def _is_cpp(language: object) -> bool:
    """Whether a client's language (name or ordinal as heartbeated) is CPP."""
    return str(language).upper() in ("CPP", str(int(LanguageCode.CPP)))
