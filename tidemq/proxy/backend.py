"""Where the proxy's remoting requests go: the broker in this process, or the brokers of a cluster.

Mirrors RocketMQ 5's ``LocalMessageService`` / ``ClusterMessageService`` and the metadata services
beside them. Both backends take the broker's own remoting requests (SEND_MESSAGE_V2, POP_MESSAGE,
ACK_MESSAGE, END_TRANSACTION...), so every RPC handler is the same in both modes:

* :class:`LocalBackend` (``tidemq serve --grpc-port``) calls the broker's request processors
  directly, with a :class:`LocalChannel` standing for the v5 client: no socket, no frame encoding.
* :class:`ClusterBackend` (``tidemq proxy --namesrv``) sends them over remoting to the broker that
  holds the queue, with routes from the name servers and topic attributes from the brokers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tidemq.errors import TideMQError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import MessageExt
from tidemq.protocol.topic import AUTO_CREATE_TOPIC_KEY, check_topic
from tidemq.proxy import codes
from tidemq.proxy.route import BrokerQueues, accepted_types

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

log = logging.getLogger(__name__)

AUTO_CREATE_QUEUE_NUMS = 4
"""Queues of a topic created on first use (a 4.x producer's ``defaultTopicQueueNums``)."""


@dataclass(slots=True)
class TopicRoute:
    """A topic's queues per broker, the brokers' remoting addresses, and the v5 types it accepts."""

    queues: list[BrokerQueues]
    addrs: dict[str, str]
    types: tuple[int, ...]
    auto_create: bool = False
    """True when the topic does not exist yet and sends create it (from ``TBW102``)."""


@dataclass(slots=True)
class GroupInfo:
    """What the proxy needs of a subscription group: FIFO (``consumeMessageOrderly``) and attempts."""

    fifo: bool = False
    max_attempts: int = 17


class Backend(Protocol):
    """The proxy's view of the brokers."""

    max_body_size: int

    async def topic_route(self, topic: str) -> TopicRoute | None:
        """The route of ``topic`` (stored name), or None when it does not exist and cannot be created."""
        ...

    async def group_info(self, group: str) -> GroupInfo:
        """The subscription group's settings (defaults for an unknown group)."""
        ...

    async def invoke(
        self, broker_name: str, request: RemotingCommand, timeout: float, client: str, remote_addr: str = ""
    ) -> RemotingCommand:
        """Run ``request`` on ``broker_name`` for the v5 client ``client`` (its client id) at
        ``remote_addr`` (``ip:port``, the born host the broker records); the answer.

        Raises:
            ProxyError: the broker is unknown or unreachable (PROXY_TIMEOUT, INTERNAL_SERVER_ERROR).
        """
        ...

    def close_client(self, client: str) -> None:
        """The v5 client ``client`` ended (its Telemetry stream closed or it said goodbye)."""
        ...

    async def pop(
        self,
        broker_name: str,
        group: str,
        topic: str,
        max_nums: int,
        invisible_ms: int,
        poll_ms: int,
        *,
        order: bool,
        expression_type: str,
        expression: str,
    ) -> list[MessageExt]:
        """Pop from every queue of ``topic`` on ``broker_name`` (long polling ``poll_ms``); each
        message carries its receipt handle in ``POP_CK`` and its earlier deliveries in ``reconsume_times``.

        Raises:
            ProxyError: the broker refused (TOPIC_NOT_FOUND, CONSUMER_GROUP_NOT_FOUND, ...).
        """
        ...

    async def ack(self, broker_name: str, group: str, topic: str, handle: str) -> None:
        """Ack one popped message. Raises ProxyError when the broker refuses."""
        ...

    async def change_invisible_time(
        self, broker_name: str, group: str, topic: str, handle: str, invisible_ms: int
    ) -> str:
        """Invisible for ``invisible_ms`` from now; returns the new handle. Raises ProxyError."""
        ...

    async def forward_to_dlq(
        self, broker_name: str, group: str, topic: str, handle: str, message_id: str
    ) -> None:
        """Put the popped message into ``%DLQ%<group>`` and ack it. Raises ProxyError."""
        ...


def pop_error(exc: Any) -> codes.ProxyError:
    """A broker :class:`~tidemq.broker.pop.result.PopError` as the v5 status Java answers."""
    if getattr(exc, "expired", False):
        return codes.ProxyError(codes.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
    return codes.ProxyError(codes.code_of_remoting(exc.code), exc.remark)


class LocalChannel:
    """Stands for one v5 client in the broker's processors (duck-typed ``Channel``).

    A processor's answer made later (long polling) comes to :meth:`respond_now`, which resolves the
    waiting request; requests the broker sends to the client (transaction checks) go to
    ``on_request``.
    """

    def __init__(
        self, remote_addr: str, local_addr: str, on_request: Callable[[RemotingCommand], None] | None = None
    ) -> None:
        self.remote_addr = remote_addr
        self.local_addr = local_addr
        self.attrs: dict[str, Any] = {}
        self.on_request = on_request
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._closed = False

    @property
    def is_active(self) -> bool:
        return not self._closed

    @property
    def pending_count(self) -> int:
        return 0

    def expect(self, request: RemotingCommand) -> asyncio.Future[RemotingCommand]:
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._waiting[request.opaque] = fut
        return fut

    def forget(self, request: RemotingCommand) -> None:
        self._waiting.pop(request.opaque, None)

    def respond_now(self, request: RemotingCommand, response: RemotingCommand) -> None:
        fut = self._waiting.pop(request.opaque, None)
        if fut is not None and not fut.done():
            fut.set_result(response)

    async def send_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        self.respond_now(request, response)

    def write_command(self, cmd: RemotingCommand) -> None:
        if self.on_request is not None:
            self.on_request(cmd)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        self.write_command(request)

    async def invoke(self, request: RemotingCommand, timeout: float, **_: Any) -> RemotingCommand:
        self.write_command(request)
        return RemotingCommand.create_response(ResponseCode.SUCCESS, None)

    def close(self, reason: str | None = None) -> None:
        self._closed = True
        for fut in self._waiting.values():
            if not fut.done():
                fut.cancel()
        self._waiting.clear()

    def abort(self) -> None:
        self.close()

    async def wait_closed(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"<LocalChannel {self.remote_addr}>"


class LocalBackend:
    """The broker in this process (``tidemq serve --grpc-port``).

    Args:
        broker: a started :class:`~tidemq.broker.broker.Broker`.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.max_body_size = broker.store_config.max_message_size
        self.channels: dict[str, LocalChannel] = {}
        self.on_broker_request: Callable[[str, RemotingCommand], None] | None = None
        """Called with (client id, request) for requests the broker sends a client (transaction checks)."""

    def channel(self, client: str, remote_addr: str = "") -> LocalChannel:
        """The channel standing for v5 client ``client`` (made at first use)."""
        ch = self.channels.get(client)
        if ch is None or not ch.is_active:

            def forward(cmd: RemotingCommand, client: str = client) -> None:
                if self.on_broker_request is not None:
                    self.on_broker_request(client, cmd)

            ch = LocalChannel(remote_addr or "0.0.0.0:0", self.broker.addr, forward)
            self.channels[client] = ch
        return ch

    async def topic_route(self, topic: str) -> TopicRoute | None:
        broker = self.broker
        tcm = broker.topic_config_manager
        tc = tcm.select_topic_config(topic)
        if tc is None:
            if not broker.config.auto_create_topic_enable or check_topic(topic) is not None:
                return None
            tc = tcm.create_topic_in_send_message_method(
                topic, AUTO_CREATE_TOPIC_KEY, "grpc-proxy", AUTO_CREATE_QUEUE_NUMS, 0
            )
            if tc is None:
                return None
        name = broker.config.broker_name
        queues = [
            BrokerQueues(
                name, tc.read_queue_nums, tc.write_queue_nums, tc.perm & broker.config.broker_permission
            )
        ]
        return TopicRoute(queues, {name: broker.addr}, accepted_types(getattr(tc, "attributes", None)))

    async def group_info(self, group: str) -> GroupInfo:
        sgc = self.broker.subscription_group_manager.find_subscription_group_config(group)
        if sgc is None:
            return GroupInfo()
        return GroupInfo(sgc.consume_message_orderly, sgc.retry_max_times + 1)

    async def invoke(
        self, broker_name: str, request: RemotingCommand, timeout: float, client: str, remote_addr: str = ""
    ) -> RemotingCommand:
        processor = self.broker.remoting_server.processor_for(request.code)
        if processor is None:
            return RemotingCommand.create_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
            )
        channel = self.channel(client, remote_addr)
        fut = channel.expect(request)
        try:
            response = await processor.process_request(channel, request)  # type: ignore[arg-type]
            if response is None:
                try:
                    response = await asyncio.wait_for(fut, timeout)
                except TimeoutError:
                    raise codes.ProxyError(
                        codes.PROXY_TIMEOUT, f"broker did not answer code {request.code} in {timeout:.1f}s"
                    ) from None
        finally:
            channel.forget(request)
        return response

    async def pop(
        self,
        broker_name: str,
        group: str,
        topic: str,
        max_nums: int,
        invisible_ms: int,
        poll_ms: int,
        *,
        order: bool,
        expression_type: str,
        expression: str,
    ) -> list[MessageExt]:
        from tidemq.broker.pop.result import PopError

        try:
            result = await self.broker.pop_service.pop_async(
                group,
                topic,
                -1,
                max_nums,
                invisible_ms,
                poll_ms,
                order=order,
                expression_type=expression_type,
                expression=expression,
            )
        except PopError as exc:
            raise pop_error(exc) from None
        return result.decode_messages()

    async def ack(self, broker_name: str, group: str, topic: str, handle: str) -> None:
        from tidemq.broker.pop.result import PopError

        try:
            self.broker.pop_service.ack(group, topic, handle)
        except PopError as exc:
            raise pop_error(exc) from None

    async def change_invisible_time(
        self, broker_name: str, group: str, topic: str, handle: str, invisible_ms: int
    ) -> str:
        from tidemq.broker.pop.result import PopError

        try:
            return self.broker.pop_service.change_invisible_time(group, topic, handle, invisible_ms)
        except PopError as exc:
            raise pop_error(exc) from None

    async def forward_to_dlq(
        self, broker_name: str, group: str, topic: str, handle: str, message_id: str
    ) -> None:
        from tidemq.proxy.dlq import forward_local

        await forward_local(self, group, topic, handle, message_id)

    def close_client(self, client: str) -> None:
        ch = self.channels.pop(client, None)
        if ch is not None:
            ch.close()
            self.broker.client_housekeeping_service.on_channel_close(ch)  # type: ignore[arg-type]


class _BrokerRequests:
    """Takes the requests brokers send the proxy's connections (CHECK_TRANSACTION_STATE, oneway)."""

    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend

    async def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        names = [n for n, a in self.backend._broker_addrs.items() if a == channel.remote_addr]
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
        self.remoting = RemotingClient()
        if rpc_hook is not None:
            self.remoting.register_rpc_hook(rpc_hook)
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

    async def pop(
        self,
        broker_name: str,
        group: str,
        topic: str,
        max_nums: int,
        invisible_ms: int,
        poll_ms: int,
        *,
        order: bool,
        expression_type: str,
        expression: str,
    ) -> list[MessageExt]:
        from tidemq.proxy import cluster_pop

        return await cluster_pop.pop(
            self, broker_name, group, topic, max_nums, invisible_ms, poll_ms,
            order=order, expression_type=expression_type, expression=expression,
        )  # fmt: skip

    async def ack(self, broker_name: str, group: str, topic: str, handle: str) -> None:
        from tidemq.proxy import cluster_pop

        await cluster_pop.ack(self, broker_name, group, topic, handle)

    async def change_invisible_time(
        self, broker_name: str, group: str, topic: str, handle: str, invisible_ms: int
    ) -> str:
        from tidemq.proxy import cluster_pop

        return await cluster_pop.change_invisible_time(self, broker_name, group, topic, handle, invisible_ms)

    async def forward_to_dlq(
        self, broker_name: str, group: str, topic: str, handle: str, message_id: str
    ) -> None:
        from tidemq.proxy import cluster_pop

        await cluster_pop.forward_to_dlq(self, broker_name, group, topic, handle, message_id)

    async def invoke(
        self, broker_name: str, request: RemotingCommand, timeout: float, client: str, remote_addr: str = ""
    ) -> RemotingCommand:
        addr = self._broker_addrs.get(broker_name)
        if addr is None:
            raise codes.ProxyError(
                codes.INTERNAL_SERVER_ERROR, f"unknown broker {broker_name!r}: query the route first"
            )
        try:
            return await self.remoting.invoke(addr, request, timeout)
        except TimeoutError as exc:
            raise codes.ProxyError(codes.PROXY_TIMEOUT, str(exc)) from None
        except (TideMQError, OSError) as exc:
            raise codes.ProxyError(
                codes.INTERNAL_SERVER_ERROR, f"broker {broker_name} at {addr}: {exc}"
            ) from None

    def close_client(self, client: str) -> None:
        return None
