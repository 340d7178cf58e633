"""VIEW_MESSAGE_BY_ID (33): one stored message by commit-log offset.

Mirrors RocketMQ's ``QueryMessageProcessor.viewMessageById``. The client decodes the physical
offset from an offset msg id (``decode_offset_msg_id``) and sends it as header ``offset``; the body
of the answer is the stored record (protocol.md §5.1). Not found -> SYSTEM_ERROR
``can not find message by the offset, N``. QUERY_MESSAGE (12, the key index) is not served yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import HeaderError, ViewMessageRequestHeader

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel


class QueryMessageProcessor:
    """Message lookups. Mirrors ``QueryMessageProcessor``."""

    CODES: ClassVar[tuple[int, ...]] = (RequestCode.VIEW_MESSAGE_BY_ID,)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Serve VIEW_MESSAGE_BY_ID."""
        try:
            header = ViewMessageRequestHeader.from_command(request)
        except HeaderError as exc:
            return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, str(exc))
        return self.view_message_by_id(header.offset)

    def view_message_by_id(self, offset: int) -> RemotingCommand:
        """The stored record at commit-log ``offset``, or SYSTEM_ERROR when there is none."""
        record = self.broker.store.select_one_message_by_offset(offset) if offset >= 0 else None
        if not record:
            return RemotingCommand.create_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        return RemotingCommand.create_response(ResponseCode.SUCCESS, None, None, bytes(record))
