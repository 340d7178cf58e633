"""The core of :class:`~tidemq.admin.client.AsyncAdminClient`: transport, name server, topics, retention.

Split out of ``client.py`` so each family of admin requests reads in one sitting; the families
build on each other: :class:`AdminCore` <- ``OffsetOps`` (ops_offsets: queue and group offsets,
consume stats, connections) <- ``BrokerOps`` (ops_broker) <- ``GroupOps`` (ops_group)
<- ``MessageOps`` (ops_message) <- ``AsyncAdminClient``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from tidemq.client.api import ClientAPI
from tidemq.errors import BrokerError, ClientError, NoRouteError, RemotingError
from tidemq.protocol.body import (
    MULTI_TAG,
    SINGLE_TAG,
    ClusterInfo,
    CreateTopicListRequestBody,
    TopicConfig,
    TopicRouteData,
    TopicStatsTable,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    CreateTopicRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.topic import AUTO_CREATE_TOPIC_KEY, MASTER_ID, PermName, validate_topic
from tidemq.protocol.topic_attributes import parse_attributes
from tidemq.remoting.client import RemotingClient

__all__ = ["AdminCore", "QueueProgress"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One row of ``consumer-progress``: a queue's broker offset, the group's offset and the lag.

    Attributes:
        mq: the message queue.
        broker_offset: max offset of the queue (next offset to be written).
        consumer_offset: the group's committed offset (next offset to consume); 0 when none.
        lag: ``broker_offset - consumer_offset`` (never negative).
        last_timestamp: store time (ms) of the last consumed message, 0 if unknown.
    """

    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    lag: int
    last_timestamp: int


class AdminCore:
    """Plumbing, name-server lookups, topics, offsets and consume stats of :class:`AsyncAdminClient`.

    Mirrors the core of ``DefaultMQAdminExt``.

    Args:
        namesrv_addr: ``"host:port"`` (several separated by ``;``; tried in order).
        timeout: default seconds per request (3.0, RocketMQ's ``timeoutMillis``).
        remoting: a shared transport; by default the client owns one and closes it in :meth:`close`.
        access_key / secret_key: ACL credentials (both or neither); every request is then signed
            (``AclClientRPCHook``), so the client works against an ACL broker with an admin account.

    Raises:
        ClientError: no name-server address, or only one of the two keys.
    """

    def __init__(
        self,
        namesrv_addr: str,
        *,
        timeout: float = 3.0,
        remoting: RemotingClient | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        self.namesrv_addrs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
        if not self.namesrv_addrs:
            raise ClientError("namesrv_addr is required (host:port)")
        self.timeout = timeout
        self._own_remoting = remoting is None
        self.remoting = remoting if remoting is not None else RemotingClient()
        if (access_key is None) != (secret_key is None):
            raise ClientError("give both access_key and secret_key, or neither")
        self.access_key, self.secret_key = access_key, secret_key
        if access_key and secret_key:
            from tidemq.acl.client_hook import AclClientRPCHook
            from tidemq.acl.common import SessionCredentials

            self.remoting.register_rpc_hook(AclClientRPCHook(SessionCredentials(access_key, secret_key)))
        self.api = ClientAPI(self.remoting)
        self._broker_addrs: dict[str, str] = {}

    async def close(self) -> None:
        """Close the transport if this client owns it."""
        if self._own_remoting:
            await self.remoting.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing ------------------------------------------------------------------------------

    async def invoke_checked(
        self, addr: str, request: RemotingCommand, timeout: float | None
    ) -> RemotingCommand:
        """``request`` to ``addr`` (``host:port``), answered within ``timeout`` s (None: the
        client's ``timeout``); returns the SUCCESS answer (``MQClientAPIImpl``'s pattern).

        Raises:
            BrokerError: the answer's code is not SUCCESS (its remark and ``addr`` in the text).
            RemotingError: no answer (connect failure, timeout).
        """
        request.language = self.api.language
        resp = await self.remoting.invoke(addr, request, self.timeout if timeout is None else timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError.for_code(resp.code, resp.remark, addr)
        return resp

    async def _namesrv(self, request_factory: Any, timeout: float | None) -> RemotingCommand:
        last: Exception | None = None
        for addr in self.namesrv_addrs:
            try:
                return await self.invoke_checked(addr, request_factory(), timeout)
            except RemotingError as exc:
                last = exc
        assert last is not None
        raise last

    # -- name server ---------------------------------------------------------------------------

    async def examine_broker_cluster_info(self, timeout: float | None = None) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106): clusters and their brokers' addresses."""
        resp = await self._namesrv(
            lambda: RemotingCommand.create_request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout
        )
        info = ClusterInfo.decode(resp.body) if resp.body else ClusterInfo()
        for name, bd in info.broker_addr_table.items():
            addr = bd.select_broker_addr()
            if addr:
                self._broker_addrs[name] = bd.broker_addrs.get(MASTER_ID, addr)
        return info

    async def examine_topic_route_info(self, topic: str, timeout: float | None = None) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC (105). Raises ``NoRouteError`` for an unknown topic."""
        last: Exception | None = None
        for addr in self.namesrv_addrs:
            try:
                route = await self.api.get_topic_route_info_from_name_server(
                    addr, topic, self.timeout if timeout is None else timeout
                )
            except RemotingError as exc:
                last = exc
                continue
            for bd in route.broker_datas:
                master = bd.broker_addrs.get(MASTER_ID) or bd.select_broker_addr()
                if master:
                    self._broker_addrs[bd.broker_name] = master
            return route
        assert last is not None
        raise last

    async def broker_addr(self, broker_name: str, *, topic: str | None = None) -> str:
        """The master address of ``broker_name`` (from a cached route, else the cluster table).

        Raises:
            ClientError: no such broker.
        """
        addr = self._broker_addrs.get(broker_name)
        if addr is None and topic is not None:
            await self.examine_topic_route_info(topic)
            addr = self._broker_addrs.get(broker_name)
        if addr is None:
            await self.examine_broker_cluster_info()
            addr = self._broker_addrs.get(broker_name)
        if addr is None:
            raise ClientError(f"broker {broker_name!r} is not registered with the name server")
        return addr

    async def all_broker_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """``{brokerName: master address}`` of every broker (of ``cluster`` when given)."""
        info = await self.examine_broker_cluster_info()
        names = info.cluster_addr_table.get(cluster, set()) if cluster else set(info.broker_addr_table)
        if cluster and not names:
            raise ClientError(
                f"cluster {cluster!r} has no brokers (known: {sorted(info.cluster_addr_table)})"
            )
        out: dict[str, str] = {}
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            addr = bd.broker_addrs.get(MASTER_ID) if bd else None
            if addr:
                out[name] = addr
        return out

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (``readQueueNums`` per readable broker), sorted."""
        route = await self.examine_topic_route_info(topic)
        mqs = [
            MessageQueue(topic, qd.broker_name, qid)
            for qd in route.queue_datas
            if qd.perm & PermName.PERM_READ
            for qid in range(qd.read_queue_nums)
        ]
        return sorted(mqs)

    # -- topics --------------------------------------------------------------------------------

    async def create_topic(
        self,
        topic: str,
        queue_nums: int = 8,
        *,
        cluster: str | None = None,
        perm: int = PermName.PERM_READ | PermName.PERM_WRITE,
        order: bool = False,
        read_queue_nums: int | None = None,
        topic_filter_type: str = SINGLE_TAG,
        timeout: float | None = None,
        broker_addr: str | None = None,
        attributes: str | None = None,
        topic_sys_flag: int = 0,
    ) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC (17) on every master of ``cluster`` (default: every cluster), or
        only on ``broker_addr``. ``attributes``: RocketMQ 5's ``+key=value,-key`` text (checked here,
        applied by the broker).

        Mirrors ``createAndUpdateTopicConfig`` applied per broker, as ``mqadmin updateTopic -c`` does.
        Also used to grow a topic (new queues appear in the route after the broker re-registers).

        Returns:
            The broker addresses that accepted.

        Raises:
            ClientError: invalid topic name or queue count, or no broker to create it on.
            BrokerError: a broker refused (its remark says why).
        """
        _check_new_topic(topic)
        _check_queue_nums(queue_nums)
        if topic_filter_type not in (SINGLE_TAG, MULTI_TAG):
            raise ClientError(f"topic_filter_type must be {SINGLE_TAG} or {MULTI_TAG}")
        try:
            parse_attributes(attributes)
        except ValueError as exc:
            raise ClientError(f"attributes (-a): {exc}") from None
        addrs = [broker_addr] if broker_addr else list((await self.all_broker_addrs(cluster)).values())
        ext = CreateTopicRequestHeader(
            topic=topic,
            default_topic=AUTO_CREATE_TOPIC_KEY,
            read_queue_nums=queue_nums if read_queue_nums is None else read_queue_nums,
            write_queue_nums=queue_nums,
            perm=perm,
            topic_filter_type=topic_filter_type,
            topic_sys_flag=topic_sys_flag,
            order=order,
            attributes=attributes or None,
        ).to_ext_fields()
        code = RequestCode.UPDATE_AND_CREATE_TOPIC
        return await _on_each(self, addrs, lambda: RemotingCommand.create_request(code, dict(ext)), timeout)

    async def create_topic_list(
        self,
        topics: Iterable[str],
        queue_nums: int = 8,
        *,
        cluster: str | None = None,
        perm: int = PermName.PERM_READ | PermName.PERM_WRITE,
        order: bool = False,
        timeout: float | None = None,
    ) -> list[str]:
        """Create (or update) many topics at once: one UPDATE_AND_CREATE_TOPIC_LIST (18, RocketMQ 5)
        per master of ``cluster`` (default: every cluster), each with ``queue_nums`` read and write
        queues. Mirrors ``MQClientAPIImpl.createTopicList``.

        The broker writes one journal append and sends one registration for the whole list, so
        10,000 topics take seconds instead of minutes (``python -m bench.scale``). A RocketMQ 4.x
        broker does not know the code: it answers REQUEST_CODE_NOT_SUPPORTED (a BrokerError).

        Returns:
            The broker addresses that accepted.

        Raises:
            ClientError: an invalid topic name or queue count, or no broker to create them on.
            BrokerError: a broker refused (its remark says why).
        """
        names = list(topics)
        for topic in names:
            _check_new_topic(topic)
        _check_queue_nums(queue_nums)
        addrs = list((await self.all_broker_addrs(cluster)).values())
        body = CreateTopicListRequestBody(
            [
                TopicConfig(
                    topic_name=t,
                    read_queue_nums=queue_nums,
                    write_queue_nums=queue_nums,
                    perm=perm,
                    topic_filter_type=SINGLE_TAG,
                    topic_sys_flag=0,
                    order=order,
                )
                for t in names
            ]
        ).encode()
        code = RequestCode.UPDATE_AND_CREATE_TOPIC_LIST
        return await _on_each(self, addrs, lambda: RemotingCommand.create_request(code, {}, body), timeout)

    async def examine_topic_stats(self, topic: str, timeout: float | None = None) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO (202) on every broker of the topic's route, merged."""
        route = await self.examine_topic_route_info(topic, timeout)
        table = TopicStatsTable()
        for bd in route.broker_datas:
            addr = bd.broker_addrs.get(MASTER_ID) or bd.select_broker_addr()
            if not addr:
                continue
            req = RemotingCommand.create_request(
                RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic=topic).to_ext_fields()
            )
            resp = await self.invoke_checked(addr, req, timeout)
            if resp.body:
                table.offset_table.update(TopicStatsTable.decode(resp.body).offset_table)
        return table

    # -- retention -----------------------------------------------------------------------------

    async def _each_broker(
        self, code: int, broker_addr: str | None, timeout: float | None, ext: dict[str, str] | None = None
    ) -> list[str]:
        addrs = [broker_addr] if broker_addr else list((await self.all_broker_addrs()).values())
        await asyncio.gather(
            *(self.invoke_checked(a, RemotingCommand.create_request(code, ext), timeout) for a in addrs)
        )
        return addrs

    async def delete_expired_commitlog(
        self, broker_addr: str | None = None, timeout: float | None = 30.0, *, force: bool = False
    ) -> list[str]:
        """DELETE_EXPIRED_COMMITLOG (329): run retention now on one broker (default: all brokers).

        Commit-log segments older than the broker's ``file_reserved_time`` whose messages every
        consumer group has consumed are deleted, and the consume queues' min offsets move past them.
        ``force`` (tidemq's extField ``force=true``; a RocketMQ broker ignores it): one pass as if
        ``cleanFileForciblyEnable`` were on: expired segments go whoever has not consumed them, and
        unexpired ones while the disk is above ``diskSpaceCleanForciblyRatio``; the broker logs
        every loss as one ERROR line. Returns the addresses asked.
        """
        ext = {"force": "true"} if force else None
        return await self._each_broker(RequestCode.DELETE_EXPIRED_COMMITLOG, broker_addr, timeout, ext)

    async def clean_expired_consume_queue(
        self, broker_addr: str | None = None, timeout: float | None = 30.0
    ) -> list[str]:
        """CLEAN_EXPIRED_CONSUMEQUEUE (306): drop consume-queue entries whose data is gone."""
        return await self._each_broker(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, broker_addr, timeout)

    # -- helpers for tools ---------------------------------------------------------------------

    async def wait_for_route(self, topic: str, timeout: float = 10.0) -> TopicRouteData:
        """Poll GET_ROUTEINFO_BY_TOPIC until the topic has a route (brokers register periodically).

        Raises:
            NoRouteError: still no route after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                return await self.examine_topic_route_info(topic)
            except NoRouteError:
                if time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(0.05)


def _check_new_topic(topic: str) -> None:
    """Raises ClientError: ``topic`` is not a valid name, or is the reserved TBW102."""
    validate_topic(topic)
    if topic == AUTO_CREATE_TOPIC_KEY:
        raise ClientError(f"topic {topic} is reserved")


def _check_queue_nums(queue_nums: int) -> None:
    """Raises ClientError: ``queue_nums`` is not within 1..1024."""
    if queue_nums <= 0 or queue_nums > 1024:
        raise ClientError(f"queue_nums must be within 1..1024, got {queue_nums}")


async def _on_each(
    core: AdminCore, addrs: list[str], request: Callable[[], RemotingCommand], timeout: float | None
) -> list[str]:
    """``request()`` sent to every broker of ``addrs`` at once; returns ``addrs``.

    Raises:
        ClientError: ``addrs`` is empty (no broker registered). BrokerError: a broker refused.
    """
    if not addrs:
        raise ClientError("no broker is registered with the name server")
    await asyncio.gather(*(core.invoke_checked(a, request(), timeout) for a in addrs))
    return addrs
