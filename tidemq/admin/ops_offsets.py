"""Offsets of :class:`~tidemq.admin.client.AsyncAdminClient`: the queues' min / max / by-time offsets,
consumer groups' committed offsets, their consume stats and progress (with the brokers that could not
be asked), and the groups' live connections.

Split out of ``core.py`` (:class:`~tidemq.admin.core.AdminCore` <- :class:`OffsetOps` <- ``BrokerOps``
<- ``GroupOps`` <- ``MessageOps`` <- ``AsyncAdminClient``); every request goes to the master of the
queue's broker, or to each broker group (its slaves when the master does not answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from tidemq.admin.core import AdminCore, QueueProgress
from tidemq.errors import BrokerError, ClientError, QueryNotFoundError, RemotingError
from tidemq.protocol.body import ConsumerConnection, ConsumeStats
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import GetConsumerConnectionListRequestHeader, GetConsumeStatsRequestHeader
from tidemq.protocol.message import MessageQueue

__all__ = ["OffsetOps"]


class OffsetOps(AdminCore):
    """Queue offsets (GET_MIN_OFFSET, GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP), consumer offsets
    (QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET), GET_CONSUME_STATS and
    GET_CONSUMER_CONNECTION_LIST. Mirrors the matching part of ``DefaultMQAdminExt``."""

    # -- offsets -------------------------------------------------------------------------------

    async def _mq_addr(self, mq: MessageQueue) -> str:
        return await self.broker_addr(mq.broker_name, topic=mq.topic)

    async def min_offset(self, mq: MessageQueue, timeout: float | None = None) -> int:
        """GET_MIN_OFFSET (31): the queue's smallest readable offset."""
        t = self.timeout if timeout is None else timeout
        return await self.api.get_min_offset(await self._mq_addr(mq), mq, t)

    async def max_offset(self, mq: MessageQueue, timeout: float | None = None) -> int:
        """GET_MAX_OFFSET (30): the queue's next offset to be written."""
        t = self.timeout if timeout is None else timeout
        return await self.api.get_max_offset(await self._mq_addr(mq), mq, t)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int, timeout: float | None = None) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (29): the first offset stored at or after ``timestamp_ms``."""
        t = self.timeout if timeout is None else timeout
        return await self.api.search_offset(await self._mq_addr(mq), mq, timestamp_ms, t)

    async def fetch_min_offsets(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """:meth:`min_offset` of many queues, concurrently."""
        items = list(mqs)
        values = await asyncio.gather(*(self.min_offset(mq) for mq in items))
        return dict(zip(items, values, strict=True))

    async def fetch_max_offsets(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """:meth:`max_offset` of many queues, concurrently."""
        items = list(mqs)
        values = await asyncio.gather(*(self.max_offset(mq) for mq in items))
        return dict(zip(items, values, strict=True))

    async def search_offsets(self, mqs: Iterable[MessageQueue], timestamp_ms: int) -> dict[MessageQueue, int]:
        """:meth:`search_offset` of many queues, concurrently."""
        items = list(mqs)
        values = await asyncio.gather(*(self.search_offset(mq, timestamp_ms) for mq in items))
        return dict(zip(items, values, strict=True))

    # -- consumer groups -----------------------------------------------------------------------

    async def query_consumer_offset(self, group: str, mq: MessageQueue, timeout: float | None = None) -> int:
        """QUERY_CONSUMER_OFFSET (14): the group's committed offset of ``mq``, -1 when it has none."""
        t = self.timeout if timeout is None else timeout
        try:
            return await self.api.query_consumer_offset(await self._mq_addr(mq), group, mq, t)
        except QueryNotFoundError:
            return -1

    async def query_consumer_offsets(
        self, group: str, mqs: Iterable[MessageQueue]
    ) -> dict[MessageQueue, int]:
        """:meth:`query_consumer_offset` of many queues, concurrently (-1 = none)."""
        items = list(mqs)
        values = await asyncio.gather(*(self.query_consumer_offset(group, mq) for mq in items))
        return dict(zip(items, values, strict=True))

    async def update_consumer_offset(
        self, group: str, mq: MessageQueue, offset: int, timeout: float | None = None
    ) -> None:
        """UPDATE_CONSUMER_OFFSET (15): set the group's offset (next offset to consume) of ``mq``.

        Raises:
            ClientError: negative offset.
        """
        if offset < 0:
            raise ClientError(f"consumer offset must be >= 0, got {offset} for {mq}")
        t = self.timeout if timeout is None else timeout
        await self.api.update_consumer_offset(await self._mq_addr(mq), group, mq, offset, t)

    async def update_consumer_offsets(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        """:meth:`update_consumer_offset` for many queues, concurrently."""
        await asyncio.gather(*(self.update_consumer_offset(group, mq, off) for mq, off in offsets.items()))

    async def _broker_groups(self, topic: str | None, timeout: float | None) -> dict[str, list[str]]:
        """``{brokerName: [master, slave...]}`` of ``topic``'s route (or of every broker), master first."""
        if topic:
            datas = (await self.examine_topic_route_info(topic, timeout)).broker_datas
        else:
            datas = list((await self.examine_broker_cluster_info(timeout)).broker_addr_table.values())
        return {bd.broker_name: [a for _, a in sorted(bd.broker_addrs.items()) if a] for bd in datas}

    async def consume_stats_report(
        self, group: str, topic: str | None = None, timeout: float | None = None
    ) -> tuple[ConsumeStats, dict[str, str]]:
        """GET_CONSUME_STATS (208) per broker group, merged; a group whose master does not answer is
        asked on its slaves (which hold the master's offsets as of their last sync, and the offsets
        consumers commit to them while the master is down).

        Returns:
            ``(stats, unreachable)``: ``unreachable`` maps each broker name none of whose addresses
            answered to why (``"127.0.0.1:10911: connect failed ..."``).

        Raises:
            NoRouteError: ``topic`` is unknown. BrokerError: a broker refused (its remark says why).
        """
        stats = ConsumeStats()
        unreachable: dict[str, str] = {}
        ext = GetConsumeStatsRequestHeader(consumer_group=group, topic=topic).to_ext_fields()
        for name, addrs in sorted((await self._broker_groups(topic, timeout)).items()):
            body: bytes | None = None
            errors = []
            for addr in addrs:
                req = RemotingCommand.create_request(RequestCode.GET_CONSUME_STATS, dict(ext))
                try:
                    body = (await self.invoke_checked(addr, req, timeout)).body or b""
                    break
                except RemotingError as exc:
                    errors.append(f"{addr}: {exc}")
            if body is None:
                unreachable[name] = "; ".join(errors) or "no address registered"
            elif body:
                part = ConsumeStats.decode(body)
                stats.offset_table.update(part.offset_table)
                stats.consume_tps += part.consume_tps
        return stats, unreachable

    async def examine_consume_stats(
        self, group: str, topic: str | None = None, timeout: float | None = None
    ) -> ConsumeStats:
        """:meth:`consume_stats_report` without the list of brokers that could not be asked."""
        return (await self.consume_stats_report(group, topic, timeout))[0]

    async def consumer_progress_report(
        self, group: str, topic: str | None = None
    ) -> tuple[list[QueueProgress], dict[str, str]]:
        """:meth:`consume_stats_report` as sorted rows with the lag per queue, and the unreachable brokers."""
        stats, unreachable = await self.consume_stats_report(group, topic)
        rows = [
            QueueProgress(
                mq,
                w.broker_offset,
                w.consumer_offset,
                max(0, w.broker_offset - w.consumer_offset),
                w.last_timestamp,
            )
            for mq, w in sorted(stats.offset_table.items())
        ]
        return rows, unreachable

    async def consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        """:meth:`consumer_progress_report`'s rows."""
        return (await self.consumer_progress_report(group, topic))[0]

    async def examine_consumer_connection_info(
        self, group: str, timeout: float | None = None, *, broker_addr: str | None = None
    ) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST (203): the group's live clients and subscriptions, all brokers
        merged (only ``broker_addr`` when given).

        Raises:
            ConsumerNotOnlineError: no broker knows a live consumer of ``group``.
        """
        merged: ConsumerConnection | None = None
        last: BrokerError | None = None
        addrs = [broker_addr] if broker_addr else list((await self.all_broker_addrs()).values())
        for addr in addrs:
            req = RemotingCommand.create_request(
                RequestCode.GET_CONSUMER_CONNECTION_LIST,
                GetConsumerConnectionListRequestHeader(consumer_group=group).to_ext_fields(),
            )
            try:
                resp = await self.invoke_checked(addr, req, timeout)
            except BrokerError as exc:
                last = exc
                continue
            cc = ConsumerConnection.decode(resp.body)
            if merged is None:
                merged = cc
            else:
                known = {c.client_id for c in merged.connection_set}
                merged.connection_set.extend(c for c in cc.connection_set if c.client_id not in known)
                merged.subscription_table.update(cc.subscription_table)
        if merged is None:
            if last is not None:
                raise last
            raise BrokerError.for_code(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        return merged
