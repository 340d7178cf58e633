"""The offset requests of :class:`~tidemq.client.api.ClientAPI`: a queue's max / min / by-time offset
and earliest store time, a consumer group's committed offset (query, update sync or oneway).
Mirrors that part of RocketMQ's ``MQClientAPIImpl``."""

from __future__ import annotations

from typing import Any

from tidemq.client.api_base import APIBase
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    GetMaxOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from tidemq.protocol.message import MessageQueue

__all__ = ["OffsetAPI"]


class OffsetAPI(APIBase):
    """QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), SEARCH_OFFSET_BY_TIMESTAMP (29),
    GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32)."""

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue, timeout: float) -> int:
        """QUERY_CONSUMER_OFFSET (14). Raises ``QueryNotFoundError`` when the broker has none."""
        ext = QueryConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id
        ).to_ext_fields()
        resp = self.check(
            await self.invoke(addr, self.request(RequestCode.QUERY_CONSUMER_OFFSET, ext), timeout), addr
        )
        return int(resp.ext_fields.get("offset", -1))

    async def update_consumer_offset(
        self,
        addr: str,
        group: str,
        mq: MessageQueue,
        offset: int,
        timeout: float,
        *,
        oneway: bool = False,
    ) -> None:
        """UPDATE_CONSUMER_OFFSET (15), sync or oneway."""
        req = self.build_update_consumer_offset_request(group, mq, offset, oneway=oneway)
        if oneway:
            await self.remoting.invoke_oneway(addr, req)
        else:
            self.check(await self.invoke(addr, req, timeout), addr)

    def build_update_consumer_offset_request(
        self, group: str, mq: MessageQueue, offset: int, *, oneway: bool = False
    ) -> RemotingCommand:
        """The UPDATE_CONSUMER_OFFSET (15) request (sent by :meth:`update_consumer_offset`, or on a
        caller's own connection by the blocking lite pull consumer's ``commit_sync``)."""
        ext = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=offset
        ).to_ext_fields()
        return self.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext, oneway=oneway)

    @staticmethod
    def check_update_consumer_offset_response(response: RemotingCommand, addr: str) -> None:
        """Raise ``BrokerError`` unless ``response`` (to UPDATE_CONSUMER_OFFSET) is SUCCESS."""
        OffsetAPI.check(response, addr)

    async def _offset_query(
        self, code: int, addr: str, mq: MessageQueue, timeout: float, **extra: Any
    ) -> int:
        ext = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id).to_ext_fields()
        ext.update({k: str(v) for k, v in extra.items()})
        resp = self.check(await self.invoke(addr, self.request(code, ext), timeout), addr)
        return int(resp.ext_fields.get("offset", resp.ext_fields.get("timestamp", -1)))

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float) -> int:
        """GET_MAX_OFFSET (30): the next offset to be written."""
        return await self._offset_query(RequestCode.GET_MAX_OFFSET, addr, mq, timeout)

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout: float) -> int:
        """GET_MIN_OFFSET (31)."""
        return await self._offset_query(RequestCode.GET_MIN_OFFSET, addr, mq, timeout)

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int, timeout: float) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (29): the offset nearest ``timestamp_ms``."""
        return await self._offset_query(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, addr, mq, timeout, timestamp=timestamp_ms
        )

    async def get_earliest_msg_storetime(self, addr: str, mq: MessageQueue, timeout: float) -> int:
        """GET_EARLIEST_MSG_STORETIME (32), ms."""
        return await self._offset_query(RequestCode.GET_EARLIEST_MSG_STORETIME, addr, mq, timeout)
