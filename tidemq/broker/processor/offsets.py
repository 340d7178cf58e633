"""Offset requests: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), GET_MAX_OFFSET (30),
GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32).

Mirrors RocketMQ's ``ConsumerManageProcessor`` (consumer offsets) and the offset handlers of
``AdminBrokerProcessor`` (protocol.md §3.5).

QUERY_CONSUMER_OFFSET rule: a stored offset >= 0 is returned; else, if the queue's min offset is
<= 0 and its first message is not "in disk" (the queue is empty, or the message at logical offset 0
lies within ``access_message_in_memory_max_ratio`` % of physical RAM from the commit-log end) the
answer is SUCCESS with 0 -- so a new group on a young topic starts at the beginning even with
CONSUME_FROM_LAST_OFFSET; otherwise QUERY_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    HeaderError,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel


class ConsumerManageProcessor:
    """Consumer offsets and queue offset queries. Mirrors ``ConsumerManageProcessor`` (+ the
    GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME handlers of
    ``AdminBrokerProcessor``)."""

    CODES: ClassVar[tuple[int, ...]] = (
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.GET_MAX_OFFSET,
        RequestCode.GET_MIN_OFFSET,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        RequestCode.GET_EARLIEST_MSG_STORETIME,
    )

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Dispatch on the request code; a bad header answers SYSTEM_ERROR naming the field."""
        try:
            return self.handle(channel.remote_addr, request)
        except HeaderError as exc:
            return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, str(exc))

    def handle(self, remote_addr: str, request: RemotingCommand) -> RemotingCommand:
        """Decision logic for one request (no I/O besides the store)."""
        code = request.code
        store = self.broker.store
        ext = request.ext_fields
        if code == RequestCode.QUERY_CONSUMER_OFFSET:
            q = QueryConsumerOffsetRequestHeader.from_ext_fields(ext)
            return self.query_consumer_offset(q.consumer_group, q.topic, q.queue_id)
        if code == RequestCode.UPDATE_CONSUMER_OFFSET:
            u = UpdateConsumerOffsetRequestHeader.from_ext_fields(ext)
            self.broker.consumer_offset_manager.commit_offset(
                remote_addr, u.consumer_group, u.topic, u.queue_id, u.commit_offset
            )
            return RemotingCommand.create_response(ResponseCode.SUCCESS)
        if code == RequestCode.GET_MAX_OFFSET:
            mx = GetMaxOffsetRequestHeader.from_ext_fields(ext)
            offset = store.get_max_offset_in_queue(mx.topic, mx.queue_id)
            return _ok(GetMaxOffsetResponseHeader(offset=offset).to_ext_fields())
        if code == RequestCode.GET_MIN_OFFSET:
            mn = GetMinOffsetRequestHeader.from_ext_fields(ext)
            offset = store.get_min_offset_in_queue(mn.topic, mn.queue_id)
            return _ok(GetMinOffsetResponseHeader(offset=offset).to_ext_fields())
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            so = SearchOffsetRequestHeader.from_ext_fields(ext)
            offset = store.lookup.get_offset_in_queue_by_time(so.topic, so.queue_id, so.timestamp)
            return _ok(SearchOffsetResponseHeader(offset=offset).to_ext_fields())
        if code == RequestCode.GET_EARLIEST_MSG_STORETIME:
            em = GetEarliestMsgStoretimeRequestHeader.from_ext_fields(ext)
            ts = store.lookup.get_earliest_message_time(em.topic, em.queue_id)
            return _ok(GetEarliestMsgStoretimeResponseHeader(timestamp=ts).to_ext_fields())
        return RemotingCommand.create_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported"
        )

    def query_consumer_offset(self, group: str, topic: str, queue_id: int) -> RemotingCommand:
        """QUERY_CONSUMER_OFFSET with RocketMQ's "fresh queue starts at 0" rule (module doc)."""
        offset = self.broker.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset >= 0:
            return _ok(QueryConsumerOffsetResponseHeader(offset=offset).to_ext_fields())
        min_offset = self.broker.store.get_min_offset_in_queue(topic, queue_id)
        if min_offset <= 0 and not self.check_in_disk_by_consume_offset(topic, queue_id, 0):
            return _ok(QueryConsumerOffsetResponseHeader(offset=0).to_ext_fields())
        return RemotingCommand.create_response(
            ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
        )

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """True if the message at ``consume_offset`` is older than the in-memory window (the store's
        ``checkInDiskByConsumeOffset``); an empty queue has no such message: False."""
        return self.broker.store.lookup.check_in_disk_by_consume_offset(topic, queue_id, consume_offset)


def _ok(ext: dict[str, str]) -> RemotingCommand:
    return RemotingCommand.create_response(ResponseCode.SUCCESS, None, ext)
