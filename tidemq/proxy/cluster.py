"""Cluster mode: every broker of a cluster over remoting (``tidemq proxy --namesrv``).

Mirrors RocketMQ 5's ``ClusterMessageService`` / ``ClusterMetadataService``: routes from the name
servers, topic attributes and subscription groups from the brokers (cached), each request to the
broker holding the queue, transaction checks taken from the brokers' connections.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tidemq.errors import TideMQError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import MessageExt
from tidemq.protocol.topic import AUTO_CREATE_TOPIC_KEY, check_topic
from tidemq.proxy import codes
from tidemq.proxy.backend import AUTO_CREATE_QUEUE_NUMS, GroupInfo, PopSpec, TopicRoute
from tidemq.proxy.route import BrokerQueues, accepted_types

log = logging.getLogger(__name__)


class _BrokerRequests:
    """Takes the requests brokers send the proxy's connections (CHECK_TRANSACTION_STATE, oneway)."""

    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend

    async def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        names = self.backend.broker_names_at(channel.remote_addr)
        callback = self.backend.on_broker_request
        if callback is not None:
            callback(names[0] if names else channel.remote_addr, request)
        return None


class ClusterBackend:
    """The brokers of a cluster, reached over remoting (``tidemq proxy --namesrv``).

    Args:
        namesrv_addr: name servers, ``"host:port;host:port"``.
        route_ttl: seconds a route (and topic attributes) is cached.
        max_body_size: largest body accepted (bytes; RocketMQ's ``maxMessageSize``, 4 MiB).
        rpc_hook: signs requests to brokers with ACL on (``tidemq.acl.client_hook.AclClientRPCHook``).
    """

    def __init__(
        self,
        namesrv_addr: str,
        *,
        route_ttl: float = 30.0,
        max_body_size: int = 4 * 1024 * 1024,
        rpc_hook: Any = None,
    ) -> None:
        from tidemq.client.api import ClientAPI
        from tidemq.remoting import RemotingClient

        self.namesrv = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
        from tidemq.proxy.cluster_members import MemberConnections

        self.remoting = RemotingClient()
        if rpc_hook is not None:
            self.remoting.register_rpc_hook(rpc_hook)
        self.members = MemberConnections(rpc_hook)
        """Each v5 consumer's own connections to the brokers, for its group membership."""
        self.registers_consumers = True
        """v5 consumers join their groups on the brokers, each over its own connection (members.py)."""
        self.api = ClientAPI(self.remoting)
        self.route_ttl = route_ttl
        self.max_body_size = max_body_size
        self.on_broker_request: Callable[[str, RemotingCommand], None] | None = None
        """Called with (broker name, request) for requests a broker sends (transaction checks)."""
        self.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, _BrokerRequests(self))
        self._routes: dict[str, tuple[float, TopicRoute | None]] = {}
        self._attributes: dict[str, tuple[float, dict[str, dict[str, str]]]] = {}
        self._groups: dict[str, tuple[float, dict[str, Any]]] = {}
        self._broker_addrs: dict[str, str] = {}

    async def close(self) -> None:
        """See :meth:`Backend.close <tidemq.proxy.backend.Backend.close>`."""
        await self.members.close_all()
        await self.remoting.close()

    async def _route_from_namesrv(self, topic: str) -> Any:
        from tidemq.errors import NoRouteError

        last: Exception | None = None
        for addr in self.namesrv:
            try:
                return await self.api.get_topic_route_info_from_name_server(addr, topic, 3.0)
            except NoRouteError:
                return None
            except (TideMQError, OSError) as exc:
                last = exc
        raise codes.ProxyError(codes.INTERNAL_SERVER_ERROR, f"no name server answered: {last}")

    async def _topic_attributes(self, addr: str) -> dict[str, dict[str, str]]:
        """Every topic's attributes on broker ``addr`` (GET_ALL_TOPIC_CONFIG, cached ``route_ttl``)."""
        import orjson

        now = time.monotonic()
        cached = self._attributes.get(addr)
        if cached is not None and now - cached[0] < self.route_ttl:
            return cached[1]
        table: dict[str, dict[str, str]] = {}
        try:
            resp = await self.remoting.invoke(
                addr, RemotingCommand.create_request(RequestCode.GET_ALL_TOPIC_CONFIG, {}), 3.0
            )
            if resp.code == ResponseCode.SUCCESS and resp.body:
                for name, tc in (orjson.loads(resp.body).get("topicConfigTable") or {}).items():
                    attrs = tc.get("attributes") if isinstance(tc, dict) else None
                    if isinstance(attrs, dict):
                        table[str(name)] = {str(k): str(v) for k, v in attrs.items()}
        except (TideMQError, OSError, ValueError) as exc:
            log.warning("cannot read topic attributes from %s: %s", addr, exc)
        self._attributes[addr] = (now, table)
        return table

    async def topic_route(self, topic: str) -> TopicRoute | None:
        """See :meth:`Backend.topic_route <tidemq.proxy.backend.Backend.topic_route>`."""
        now = time.monotonic()
        cached = self._routes.get(topic)
        if cached is not None and now - cached[0] < self.route_ttl:
            return cached[1]
        data = await self._route_from_namesrv(topic)
        auto = data is None
        if auto and check_topic(topic) is None:
            data = await self._route_from_namesrv(AUTO_CREATE_TOPIC_KEY)
        route: TopicRoute | None = None
        if data is not None:
            addrs: dict[str, str] = {}
            for bd in data.broker_datas:
                master = bd.broker_addrs.get(0)
                if master:
                    addrs[bd.broker_name] = master
            self._broker_addrs.update(addrs)
            queues = []
            for qd in data.queue_datas:
                if qd.broker_name not in addrs:
                    continue
                if auto:
                    n = min(AUTO_CREATE_QUEUE_NUMS, qd.write_queue_nums)
                    queues.append(BrokerQueues(qd.broker_name, n, n, qd.perm & 6))
                else:
                    queues.append(
                        BrokerQueues(qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm)
                    )
            attributes: dict[str, str] = {}
            if not auto and queues:
                attributes = (await self._topic_attributes(addrs[queues[0].broker_name])).get(topic, {})
            route = (
                TopicRoute(queues, addrs, accepted_types(attributes), auto_create=auto) if queues else None
            )
        self._routes[topic] = (now, route)
        return route

    async def group_info(self, group: str) -> GroupInfo:
        """From the first broker that knows the group (GET_ALL_SUBSCRIPTIONGROUP_CONFIG, cached
        ``route_ttl``); defaults when none does."""
        import orjson

        now = time.monotonic()
        for addr in sorted(set(self._broker_addrs.values())):
            cached = self._groups.get(addr)
            if cached is None or now - cached[0] >= self.route_ttl:
                table: dict[str, Any] = {}
                try:
                    request = RemotingCommand.create_request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
                    resp = await self.remoting.invoke(addr, request, 3.0)
                    if resp.code == ResponseCode.SUCCESS and resp.body:
                        table = orjson.loads(resp.body).get("subscriptionGroupTable") or {}
                except (TideMQError, OSError, ValueError) as exc:
                    log.warning("cannot read subscription groups from %s: %s", addr, exc)
                cached = self._groups[addr] = (now, table)
            cfg = cached[1].get(group)
            if isinstance(cfg, dict):
                return GroupInfo(
                    bool(cfg.get("consumeMessageOrderly")), int(cfg.get("retryMaxTimes", 16)) + 1
                )
        return GroupInfo()

    async def pop(self, broker_name: str, spec: PopSpec) -> list[MessageExt]:
        """See :meth:`Backend.pop <tidemq.proxy.backend.Backend.pop>`."""
        from tidemq.proxy import cluster_pop

        return await cluster_pop.pop(self, broker_name, spec)

    async def ack(self, broker_name: str, group: str, topic: str, handle: str) -> None:
        """See :meth:`Backend.ack <tidemq.proxy.backend.Backend.ack>`."""
        from tidemq.proxy import cluster_pop

        await cluster_pop.ack(self, broker_name, group, topic, handle)

    async def change_invisible_time(
        self, broker_name: str, group: str, topic: str, handle: str, invisible_ms: int
    ) -> str:
        """See :meth:`Backend.change_invisible_time <tidemq.proxy.backend.Backend.change_invisible_time>`."""
        from tidemq.proxy import cluster_pop

        return await cluster_pop.change_invisible_time(self, broker_name, group, topic, handle, invisible_ms)

    async def forward_to_dlq(
        self, broker_name: str, group: str, topic: str, handle: str, message_id: str
    ) -> None:
        """See :meth:`Backend.forward_to_dlq <tidemq.proxy.backend.Backend.forward_to_dlq>`."""
        from tidemq.proxy import cluster_pop

        await cluster_pop.forward_to_dlq(self, broker_name, group, topic, handle, message_id)

    async def invoke(
        self, broker_name: str, request: RemotingCommand, timeout: float, client: str, remote_addr: str = ""
    ) -> RemotingCommand:
        """See :meth:`Backend.invoke <tidemq.proxy.backend.Backend.invoke>`."""
        return await self._at_broker(broker_name, lambda addr: self.remoting.invoke(addr, request, timeout))

    async def invoke_as_member(
        self, broker_name: str, request: RemotingCommand, timeout: float, client: str, remote_addr: str = ""
    ) -> RemotingCommand:
        """:meth:`invoke` over the v5 client ``client``'s own connection to the broker (its consumer
        HEART_BEAT, ``cluster_members.py``).

        Raises:
            ProxyError: as :meth:`invoke`.
        """
        return await self._at_broker(
            broker_name, lambda addr: self.members.invoke(client, addr, request, timeout)
        )

    async def _at_broker(
        self, broker_name: str, send: Callable[[str], Awaitable[RemotingCommand]]
    ) -> RemotingCommand:
        """``await send(addr)`` with ``broker_name``'s address, its failures as ProxyErrors."""
        addr = self._broker_addrs.get(broker_name)
        if addr is None:
            raise codes.ProxyError(
                codes.INTERNAL_SERVER_ERROR, f"unknown broker {broker_name!r}: query the route first"
            )
        try:
            return await send(addr)
        except TimeoutError as exc:
            raise codes.ProxyError(codes.PROXY_TIMEOUT, str(exc)) from None
        except (TideMQError, OSError) as exc:
            raise codes.ProxyError(
                codes.INTERNAL_SERVER_ERROR, f"broker {broker_name} at {addr}: {exc}"
            ) from None

    def broker_names_at(self, addr: str) -> list[str]:
        """The names of the brokers whose master is at ``addr`` (``host:port``), as routes gave them."""
        return [name for name, a in self._broker_addrs.items() if a == addr]

    def close_client(self, client: str) -> None:
        """See :meth:`Backend.close_client <tidemq.proxy.backend.Backend.close_client>`: its member
        connections close, so the brokers drop it from its group."""
        self.members.close(client)
