"""VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12): stored messages by offset or by key.

Mirrors RocketMQ's ``QueryMessageProcessor``.

* VIEW_MESSAGE_BY_ID: the client decodes the physical offset from an offset msg id
  (``decode_offset_msg_id``) and sends it as header ``offset``; the answer's body is the stored
  record (protocol.md §5.1). Not found -> SYSTEM_ERROR ``can not find message by the offset, N``.
* QUERY_MESSAGE: header topic, key, maxNum, beginTimestamp, endTimestamp (ms) plus the ext field
  ``_UNIQUE_KEY_QUERY`` (``"true"``: ``key`` is a UNIQ_KEY and ``maxNum`` becomes the store's
  ``default_query_max_num``, 32). The store's key index (``tidemq.store.index``) finds the records;
  the response header carries ``indexLastUpdateTimestamp`` / ``indexLastUpdatePhyoffset`` and the
  body the concatenated stored records. Nothing found -> QUERY_NOT_FOUND with RocketMQ's remark
  ``can not find message, maybe time range not correct``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, ClassVar

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    HeaderError,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel

QUERY_NOT_FOUND_REMARK = "can not find message, maybe time range not correct"


class QueryMessageProcessor:
    """Message lookups. Mirrors ``QueryMessageProcessor``."""

    CODES: ClassVar[tuple[int, ...]] = (RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.QUERY_MESSAGE)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Serve VIEW_MESSAGE_BY_ID and QUERY_MESSAGE (the index lookup runs in a worker thread)."""
        try:
            if request.code == RequestCode.QUERY_MESSAGE:
                header = QueryMessageRequestHeader.from_command(request)
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(None, self.query_message, header)
            view = ViewMessageRequestHeader.from_command(request)
        except HeaderError as exc:
            return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, str(exc))
        return self.view_message_by_id(view.offset)

    def view_message_by_id(self, offset: int) -> RemotingCommand:
        """The stored record at commit-log ``offset``, or SYSTEM_ERROR when there is none."""
        record = self.broker.store.lookup.select_one_message_by_offset(offset) if offset >= 0 else None
        if not record:
            return RemotingCommand.create_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        return RemotingCommand.create_response(ResponseCode.SUCCESS, None, None, bytes(record))

    def query_message(self, header: QueryMessageRequestHeader) -> RemotingCommand:
        """QUERY_MESSAGE decision logic (``QueryMessageProcessor.queryMessage``); thread-safe."""
        max_num = header.max_num
        if header.unique_key_query:
            max_num = self.broker.store_config.default_query_max_num
        result = self.broker.store.lookup.query_message(
            header.topic, header.key, max_num, header.begin_timestamp, header.end_timestamp
        )
        ext = QueryMessageResponseHeader(
            index_last_update_timestamp=result.index_last_update_timestamp,
            index_last_update_phyoffset=result.index_last_update_phyoffset,
        ).to_ext_fields()
        if not result.message_buffers:
            return RemotingCommand.create_response(ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK, ext)
        return RemotingCommand.create_response(
            ResponseCode.SUCCESS, None, ext, b"".join(result.message_buffers)
        )
