"""Local mode: the broker in this process, its request processors called directly.

Mirrors RocketMQ 5's ``LocalMessageService``: a :class:`LocalChannel` stands for each v5 client in
the broker's processors (no socket, no frame encoding); POP goes to the broker's ``PopService``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import MessageExt
from tidemq.protocol.topic import AUTO_CREATE_TOPIC_KEY, check_topic
from tidemq.proxy import codes
from tidemq.proxy.backend import AUTO_CREATE_QUEUE_NUMS, GroupInfo, PopSpec, TopicRoute, pop_error
from tidemq.proxy.route import BrokerQueues, accepted_types

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

log = logging.getLogger(__name__)


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
        """True until :meth:`close`."""
        return not self._closed

    @property
    def pending_count(self) -> int:
        """Always 0: nothing is queued on an in-process channel."""
        return 0

    def expect(self, request: RemotingCommand) -> asyncio.Future[RemotingCommand]:
        """A future the broker's answer to ``request`` (by its opaque) will complete (:meth:`respond_now`)."""
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._waiting[request.opaque] = fut
        return fut

    def forget(self, request: RemotingCommand) -> None:
        """Drop the future of ``request`` (its answer came, or the caller gave up)."""
        self._waiting.pop(request.opaque, None)

    def respond_now(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Complete the future waiting for ``request`` with ``response`` (no-op when none waits)."""
        fut = self._waiting.pop(request.opaque, None)
        if fut is not None and not fut.done():
            fut.set_result(response)

    async def send_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """The broker's answer: :meth:`respond_now`."""
        self.respond_now(request, response)

    def write_command(self, cmd: RemotingCommand) -> None:
        """A request from the broker to the client (a transaction check, a reply): handed to
        ``on_request``."""
        if self.on_request is not None:
            self.on_request(cmd)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        """A oneway request from the broker: :meth:`write_command`."""
        self.write_command(request)

    async def invoke(self, request: RemotingCommand, timeout: float, **_: Any) -> RemotingCommand:
        """A two-way request from the broker: handed to ``on_request`` and answered SUCCESS at once."""
        self.write_command(request)
        return RemotingCommand.create_response(ResponseCode.SUCCESS, None)

    def close(self, reason: str | None = None) -> None:
        """Mark the channel closed and cancel the futures still waiting."""
        self._closed = True
        for fut in self._waiting.values():
            if not fut.done():
                fut.cancel()
        self._waiting.clear()

    def abort(self) -> None:
        """As :meth:`close`."""
        self.close()

    async def wait_closed(self) -> None:
        """Returns at once (nothing to drain)."""
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
        self.registers_consumers = True
        """Each v5 client has a channel of its own here, so consumers join their groups (members.py)."""
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
        """See :meth:`Backend.topic_route <tidemq.proxy.backend.Backend.topic_route>`."""
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
        """See :meth:`Backend.group_info <tidemq.proxy.backend.Backend.group_info>`."""
        sgc = self.broker.subscription_group_manager.find_subscription_group_config(group)
        if sgc is None:
            return GroupInfo()
        return GroupInfo(sgc.consume_message_orderly, sgc.retry_max_times + 1)

    async def invoke(
        self, broker_name: str, request: RemotingCommand, timeout: float, client: str, remote_addr: str = ""
    ) -> RemotingCommand:
        """See :meth:`Backend.invoke <tidemq.proxy.backend.Backend.invoke>`."""
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

    async def pop(self, broker_name: str, spec: PopSpec) -> list[MessageExt]:
        """See :meth:`Backend.pop <tidemq.proxy.backend.Backend.pop>`."""
        from tidemq.broker.pop.result import PopError

        try:
            result = await self.broker.pop_service.pop_async(
                spec.group,
                spec.topic,
                -1,
                spec.max_nums,
                spec.invisible_ms,
                spec.poll_ms,
                order=spec.order,
                expression_type=spec.expression_type,
                expression=spec.expression,
                attempt_id=spec.attempt_id,
            )
        except PopError as exc:
            raise pop_error(exc) from None
        return result.decode_messages()

    async def ack(self, broker_name: str, group: str, topic: str, handle: str) -> None:
        """See :meth:`Backend.ack <tidemq.proxy.backend.Backend.ack>`."""
        from tidemq.broker.pop.result import PopError

        try:
            self.broker.pop_service.ack(group, topic, handle)
        except PopError as exc:
            raise pop_error(exc) from None

    async def change_invisible_time(
        self, broker_name: str, group: str, topic: str, handle: str, invisible_ms: int
    ) -> str:
        """See :meth:`Backend.change_invisible_time <tidemq.proxy.backend.Backend.change_invisible_time>`."""
        from tidemq.broker.pop.result import PopError

        try:
            return self.broker.pop_service.change_invisible_time(group, topic, handle, invisible_ms)
        except PopError as exc:
            raise pop_error(exc) from None

    async def forward_to_dlq(
        self, broker_name: str, group: str, topic: str, handle: str, message_id: str
    ) -> None:
        """See :meth:`Backend.forward_to_dlq <tidemq.proxy.backend.Backend.forward_to_dlq>`."""
        from tidemq.proxy.dlq import forward_local

        await forward_local(self, group, topic, handle, message_id)

    def close_client(self, client: str) -> None:
        """See :meth:`Backend.close_client <tidemq.proxy.backend.Backend.close_client>`."""
        ch = self.channels.pop(client, None)
        if ch is not None:
            ch.close()
            self.broker.client_housekeeping_service.on_channel_close(ch)  # type: ignore[arg-type]
