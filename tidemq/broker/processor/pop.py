"""POP_MESSAGE (200050), ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151) and
CHANGE_MESSAGE_INVISIBLETIME (200053) over remoting, as RocketMQ 5's broker serves them
(``PopMessageProcessor``, ``AckMessageProcessor``, ``ChangeInvisibleTimeProcessor``; rocketmq5.md §8).

The work is :class:`~tidemq.broker.pop.service.PopService`'s; this module parses headers, checks the
client's clock (``now - bornTime - pollTime > 500`` ms -> POLLING_TIMEOUT "timeout too much") and
maps results and :class:`~tidemq.broker.pop.result.PopError` to responses. Every pop records its
group (and, once checked, its subscription) for groups that never heartbeat (``pop/compensate.py``).

========================  ===================================================================
outcome                   response
========================  ===================================================================
messages                  SUCCESS, body = the records, ``PopMessageResponseHeader`` fields
nothing, no poll          PULL_NOT_FOUND (19), remark ``NO_MESSAGE_IN_QUEUE``
nothing after the poll    POLLING_TIMEOUT (210)
too many polls waiting    POLLING_FULL (209)
bad request               the PopError's code + remark (INVALID_PARAMETER, TOPIC_NOT_EXIST...)
========================  ===================================================================
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, ClassVar

from tidemq.broker.pop.compensate import compensate_pop_consumer
from tidemq.broker.pop.result import PopError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import HeaderError
from tidemq.protocol.headers.pop import (
    AckMessageRequestHeader,
    BatchAckMessageRequestBody,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
)

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel

log = logging.getLogger(__name__)

POLL_CLOCK_SLACK_MS = 500
"""How late a pop may arrive past ``bornTime + pollTime`` (RocketMQ's 500 ms)."""


def _error(code: int, remark: str) -> RemotingCommand:
    return RemotingCommand.create_response(code, remark)


class PopMessageProcessor:
    """Serves POP_MESSAGE with long polling (the request's ``pollTime``, capped by
    ``max_suspend_ms``). Mirrors ``PopMessageProcessor``.

    Args:
        broker: the owning broker (its ``pop_service``).
    """

    CODES: ClassVar[tuple[int, ...]] = (RequestCode.POP_MESSAGE,)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Handle one POP_MESSAGE (200050): the messages and the ``PopMessageResponseHeader``, or an error
        code with a remark (a long-polled pop answers later)."""
        try:
            header = PopMessageRequestHeader.from_command(request)
        except HeaderError as exc:
            return _error(ResponseCode.INVALID_PARAMETER, f"bad pop request header: {exc}")
        compensate_pop_consumer(self.broker, header.consumer_group)  # known without a heartbeat
        now = time.time_ns() // 1_000_000
        poll_ms = max(0, header.poll_time)
        if poll_ms > 0 and now - header.born_time - poll_ms > POLL_CLOCK_SLACK_MS:
            return _error(ResponseCode.POLLING_TIMEOUT, "timeout too much, when pop message")
        poll_ms = min(poll_ms, self.broker.config.max_suspend_ms)
        if poll_ms > 0 and header.born_time > 0:
            poll_ms = max(0, min(poll_ms, header.born_time + header.poll_time - now))
        service = self.broker.pop_service
        try:
            result = await service.pop_async(
                header.consumer_group,
                header.topic,
                header.queue_id,
                header.max_msg_nums,
                header.invisible_time,
                poll_ms,
                order=bool(header.order),
                expression_type=header.exp_type,
                expression=header.exp,
                init_mode=header.init_mode,
                attempt_id=header.attempt_id or None,
            )
        except PopError as exc:
            return _error(exc.code, exc.remark)
        fields = result.response_fields()
        if result.messages:
            return RemotingCommand.create_response(ResponseCode.SUCCESS, "FOUND", fields, result.body())
        if result.polling_timed_out:
            return RemotingCommand.create_response(
                ResponseCode.POLLING_TIMEOUT, "no new message after polling", fields
            )
        return RemotingCommand.create_response(ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", fields)


class AckMessageProcessor:
    """Serves ACK_MESSAGE and BATCH_ACK_MESSAGE. Mirrors ``AckMessageProcessor``."""

    CODES: ClassVar[tuple[int, ...]] = (RequestCode.ACK_MESSAGE, RequestCode.BATCH_ACK_MESSAGE)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Handle one ACK_MESSAGE (200051) or BATCH_ACK_MESSAGE (200151); SUCCESS, or an error code with a
        remark."""
        if request.code == RequestCode.BATCH_ACK_MESSAGE:
            return self._batch(request)
        try:
            header = AckMessageRequestHeader.from_command(request)
        except HeaderError as exc:
            return _error(ResponseCode.INVALID_PARAMETER, f"bad ack request header: {exc}")
        try:
            self.broker.pop_service.ack(header.consumer_group, header.topic, header.extra_info, header.offset)
        except PopError as exc:
            return _error(exc.code, exc.remark)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)

    def _batch(self, request: RemotingCommand) -> RemotingCommand:
        try:
            body = BatchAckMessageRequestBody.decode(request.body or b"")
        except ValueError as exc:
            return _error(ResponseCode.INVALID_PARAMETER, f"bad batch ack body: {exc}")
        service = self.broker.pop_service
        for ack in body.acks:
            try:
                service.batch_ack(
                    ack.consumer_group,
                    ack.topic,
                    ack.retry,
                    ack.queue_id,
                    ack.start_offset,
                    ack.pop_time,
                    ack.invisible_time,
                    ack.revive_queue_id,
                    ack.offsets(),
                )
            except PopError as exc:
                return _error(exc.code, exc.remark)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


class ChangeInvisibleTimeProcessor:
    """Serves CHANGE_MESSAGE_INVISIBLETIME. Mirrors ``ChangeInvisibleTimeProcessor``: the response
    header's ``popTime`` / ``invisibleTime`` / ``reviveQid`` let the client build the new handle."""

    CODES: ClassVar[tuple[int, ...]] = (RequestCode.CHANGE_MESSAGE_INVISIBLETIME,)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Handle one CHANGE_MESSAGE_INVISIBLETIME (200053): the new handle's fields in a
        ``ChangeInvisibleTimeResponseHeader``, or an error code with a remark."""
        try:
            header = ChangeInvisibleTimeRequestHeader.from_command(request)
        except HeaderError as exc:
            return _error(ResponseCode.INVALID_PARAMETER, f"bad change invisible time request header: {exc}")
        try:
            new = self.broker.pop_service.change_invisible_time(
                header.consumer_group, header.topic, header.extra_info, header.invisible_time, header.offset
            )
        except PopError as exc:
            return _error(exc.code, exc.remark)
        parts = new.split(" ")
        fields = ChangeInvisibleTimeResponseHeader(
            pop_time=int(parts[1]), invisible_time=int(parts[2]), revive_qid=int(parts[3])
        ).to_ext_fields()
        return RemotingCommand.create_response(ResponseCode.SUCCESS, None, fields)
