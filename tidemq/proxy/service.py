"""The ``apache.rocketmq.v2.MessagingService`` servicer (grpc.aio).

Mirrors RocketMQ 5's ``GrpcMessagingApplication`` + ``DefaultGrpcMessingActivity``: each RPC reads
the caller's context (headers, namespace, client id), checks the signature when ACL is on, runs its
activity and answers with a ``Status``. A :class:`~tidemq.proxy.codes.ProxyError` becomes that
status; any other failure becomes INTERNAL_SERVER_ERROR with the error text (logged), and the
server keeps serving. PullMessage, UpdateOffset, GetOffset, QueryOffset and SyncLiteSubscription
answer gRPC UNIMPLEMENTED (no v5 flow but Lite and Pull consumers uses them; rocketmq5.md §2).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tidemq.proxy import codes, members, settings
from tidemq.proxy.auth import PUB, SUB
from tidemq.proxy.channels import ClientRegistry, ClientState
from tidemq.proxy.context import RequestContext, request_context
from tidemq.proxy.names import resource_name
from tidemq.proxy.pb import grpc_service, s
from tidemq.proxy.producer import ProducerActivity
from tidemq.proxy.route import assignments, message_queues

if TYPE_CHECKING:
    from tidemq.proxy.auth import GrpcAuthenticator
    from tidemq.proxy.backend import Backend

log = logging.getLogger(__name__)


class MessagingService(grpc_service.MessagingServiceServicer):  # type: ignore[misc]
    """The v5 RPCs over a :class:`~tidemq.proxy.backend.Backend`.

    Args:
        backend: the local broker or the cluster.
        auth: checks signatures and permissions (None: ACL off, the ``authorization`` header is ignored).
    """

    def __init__(self, backend: Backend, auth: GrpcAuthenticator | None = None) -> None:
        self.backend = backend
        self.auth = auth
        self.clients = ClientRegistry()
        self.producer = ProducerActivity(backend)
        self.consumer: Any = None
        """The consumer activity (ReceiveMessage, Ack, ChangeInvisibleDuration, DLQ), when POP is there."""
        self.transactions: Any = None
        """The transaction activity (EndTransaction, checks), when transactions are there."""

    # -- plumbing -------------------------------------------------------------------------------

    def _check(
        self, ctx: RequestContext, topics: dict[str, int] | None = None, groups: dict[str, int] | None = None
    ) -> None:
        if self.auth is not None:
            self.auth.check(ctx.metadata, ctx.remote_ip, topics, groups)

    async def _unary(
        self, context: Any, make: Callable[[], Any], run: Callable[[RequestContext], Awaitable[Any]]
    ) -> Any:
        """Run ``run(ctx)``; a refusal or failure becomes ``make()`` with the error status."""
        ctx = request_context(context)
        try:
            return await run(ctx)
        except codes.ProxyError as exc:
            response = make()
            response.status.CopyFrom(codes.status(exc.code, exc.message))
            return response
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("gRPC request from %s failed", ctx.remote_addr)
            response = make()
            response.status.CopyFrom(
                codes.status(codes.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            )
            return response

    # -- route ----------------------------------------------------------------------------------

    async def QueryRoute(self, request: Any, context: Any) -> Any:
        """The topic's queues, all on this endpoint, with the types the topic accepts (§3)."""

        async def run(ctx: RequestContext) -> Any:
            topic = resource_name(request.topic, ctx.namespace)
            self._check(ctx)
            route = await self.backend.topic_route(topic)
            if route is None:
                raise codes.ProxyError(codes.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
            queues = message_queues(request.topic, route.queues, request.endpoints, route.types)
            return s.QueryRouteResponse(status=codes.status(), message_queues=queues)

        return await self._unary(context, s.QueryRouteResponse, run)

    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        """PushConsumer: one queue id -1 per broker, or every queue for a FIFO group (§3)."""

        async def run(ctx: RequestContext) -> Any:
            topic = resource_name(request.topic, ctx.namespace)
            group = resource_name(request.group, ctx.namespace)
            self._check(ctx, {topic: SUB}, {group: SUB})
            route = await self.backend.topic_route(topic)
            if route is None:
                raise codes.ProxyError(codes.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
            info = await self.backend.group_info(group)
            found = assignments(request.topic, route.queues, request.endpoints, info.fifo)
            if not found:
                raise codes.ProxyError(codes.FORBIDDEN, "no readable queue")
            return s.QueryAssignmentResponse(status=codes.status(), assignments=found)

        return await self._unary(context, s.QueryAssignmentResponse, run)

    # -- clients --------------------------------------------------------------------------------

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        """Keeps the client known (its settings stay while its Telemetry stream is open)."""

        async def run(ctx: RequestContext) -> Any:
            self._check(ctx)
            if ctx.client_id:
                state = self.clients.get(ctx.client_id, ctx.namespace, ctx.remote_addr)
                state.client_type = state.client_type or int(request.client_type)
                if request.HasField("group") and request.group.name:
                    state.group = resource_name(request.group, ctx.namespace)
                await members.register(self.backend, state, ctx)
            return s.HeartbeatResponse(status=codes.status())

        return await self._unary(context, s.HeartbeatResponse, run)

    def forget(self, client_id: str) -> None:
        """The client left (NotifyClientTermination, or its last Telemetry stream closed): its state,
        its broker channel (producer registration) and its renewals go; a client still alive comes
        back with its next Telemetry settings and heartbeat."""
        self.clients.remove(client_id)
        self.backend.close_client(client_id)
        if self.consumer is not None:
            self.consumer.renewer.forget_client(client_id)

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        """The client is shutting down: forget it."""

        async def run(ctx: RequestContext) -> Any:
            if ctx.client_id:
                self.forget(ctx.client_id)
            return s.NotifyClientTerminationResponse(status=codes.status())

        return await self._unary(context, s.NotifyClientTerminationResponse, run)

    async def _on_settings(self, state: ClientState, command: Any, ctx: RequestContext) -> Any:
        client = command.settings
        kind = client.WhichOneof("pub_sub")
        group = ""
        topics: set[str] = set()
        if kind == "publishing":
            topics = {resource_name(t, ctx.namespace) for t in client.publishing.topics if t.name.strip()}
        elif kind == "subscription":
            group = resource_name(client.subscription.group, ctx.namespace)
            topics = {resource_name(e.topic, ctx.namespace) for e in client.subscription.subscriptions}
        info = await self.backend.group_info(group) if group else None
        merged = settings.merge(
            client,
            max_body_size=self.backend.max_body_size,
            fifo=bool(info and info.fifo),
            max_attempts=info.max_attempts if info else 17,
            long_polling_ms=self.consumer.config.long_polling_ms if self.consumer is not None else 20_000,
        )
        state.settings, state.client_type, state.group, state.topics = (
            merged,
            int(client.client_type),
            group,
            topics,
        )
        if kind == "subscription":
            state.subscriptions = {
                resource_name(e.topic, ctx.namespace): (
                    "SQL92" if e.expression.type == 2 else "TAG",
                    e.expression.expression or "*",
                )
                for e in client.subscription.subscriptions
            }
        await members.register(self.backend, state, ctx)
        return s.TelemetryCommand(status=codes.status(), settings=merged)

    async def Telemetry(self, request_iterator: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        """Answers each ``settings`` with OK + the merged settings (§4) and pushes queued commands
        (orphaned transaction checks) while the stream is open."""
        ctx = request_context(context)
        try:
            self._check(ctx)
        except codes.ProxyError as exc:
            yield s.TelemetryCommand(status=codes.status(exc.code, exc.message))
            return
        state = self.clients.get(ctx.client_id or ctx.remote_addr, ctx.namespace, ctx.remote_addr)
        state.streams += 1
        replies: asyncio.Queue[Any] = asyncio.Queue()

        async def read() -> None:
            try:
                async for command in request_iterator:
                    if command.WhichOneof("command") != "settings":
                        continue
                    try:
                        await replies.put(await self._on_settings(state, command, ctx))
                    except codes.ProxyError as exc:
                        await replies.put(s.TelemetryCommand(status=codes.status(exc.code, exc.message)))
            finally:
                await replies.put(None)

        reader = asyncio.ensure_future(read())
        outbox: asyncio.Future[Any] = asyncio.ensure_future(state.outbox.get())
        reply: asyncio.Future[Any] = asyncio.ensure_future(replies.get())
        try:
            while True:
                await asyncio.wait({outbox, reply}, return_when=asyncio.FIRST_COMPLETED)
                if outbox.done():
                    yield outbox.result()
                    outbox = asyncio.ensure_future(state.outbox.get())
                if reply.done():
                    item = reply.result()
                    if item is None:
                        return
                    yield item
                    reply = asyncio.ensure_future(replies.get())
        finally:
            state.streams -= 1
            if state.streams <= 0 and self.clients.clients.get(state.client_id) is state:
                self.forget(state.client_id)
            for task in (reader, outbox, reply):
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(reader, outbox, reply, return_exceptions=True)

    # -- producer -------------------------------------------------------------------------------

    async def SendMessage(self, request: Any, context: Any) -> Any:
        """Normal, FIFO, delay and transactional messages (§5)."""

        async def run(ctx: RequestContext) -> Any:
            if request.messages:
                self._check(ctx, {resource_name(request.messages[0].topic, ctx.namespace): PUB})
            return await self.producer.send_message(request, ctx)

        return await self._unary(context, s.SendMessageResponse, run)

    async def EndTransaction(self, request: Any, context: Any) -> Any:
        """Commit or roll back a transactional message (§6)."""

        async def run(ctx: RequestContext) -> Any:
            self._check(ctx, {resource_name(request.topic, ctx.namespace): PUB})
            if self.transactions is None:
                raise codes.ProxyError(codes.NOT_IMPLEMENTED, "transactional messages are not supported yet")
            return await self.transactions.end_transaction(request, ctx)

        return await self._unary(context, s.EndTransactionResponse, run)

    async def RecallMessage(self, request: Any, context: Any) -> Any:
        """Cancel a delay message before its time (5.3, ``tidemq/proxy/recall.py``)."""
        from tidemq.proxy.recall import recall_message

        async def run(ctx: RequestContext) -> Any:
            self._check(ctx, {resource_name(request.topic, ctx.namespace): PUB})
            return await recall_message(self.backend, request, ctx)

        return await self._unary(context, s.RecallMessageResponse, run)

    # -- consumer -------------------------------------------------------------------------------

    def _consumer(self) -> Any:
        if self.consumer is None:
            raise codes.ProxyError(codes.NOT_IMPLEMENTED, "POP consumption is not supported yet")
        return self.consumer

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """Long-polling POP: OK then the messages, or one status (§7)."""
        ctx = request_context(context)
        try:
            group = resource_name(request.group, ctx.namespace)
            topic = resource_name(request.message_queue.topic, ctx.namespace)
            self._check(ctx, {topic: SUB}, {group: SUB})
            consumer = self._consumer()
        except codes.ProxyError as exc:
            yield s.ReceiveMessageResponse(status=codes.status(exc.code, exc.message))
            return
        remaining = context.time_remaining()
        async for item in consumer.receive(request, ctx, self.clients.clients.get(ctx.client_id), remaining):
            yield item

    async def AckMessage(self, request: Any, context: Any) -> Any:
        """rpc AckMessage: ack each entry's receipt handle; one status per entry."""

        async def run(ctx: RequestContext) -> Any:
            self._check(
                ctx,
                {resource_name(request.topic, ctx.namespace): SUB},
                {resource_name(request.group, ctx.namespace): SUB},
            )
            return await self._consumer().ack(request, ctx)

        return await self._unary(context, s.AckMessageResponse, run)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        """rpc ChangeInvisibleDuration: a new invisible time (from now) for one receipt handle; the new
        handle."""

        async def run(ctx: RequestContext) -> Any:
            self._check(
                ctx,
                {resource_name(request.topic, ctx.namespace): SUB},
                {resource_name(request.group, ctx.namespace): SUB},
            )
            return await self._consumer().change_invisible_duration(request, ctx)

        return await self._unary(context, s.ChangeInvisibleDurationResponse, run)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        """rpc ForwardMessageToDeadLetterQueue: move one received message to ``%DLQ%<group>``
        (CONSUMER_SEND_MSG_BACK with max reconsume times reached)."""

        async def run(ctx: RequestContext) -> Any:
            self._check(
                ctx,
                {resource_name(request.topic, ctx.namespace): SUB},
                {resource_name(request.group, ctx.namespace): SUB},
            )
            return await self._consumer().forward_to_dlq(request, ctx)

        return await self._unary(context, s.ForwardMessageToDeadLetterQueueResponse, run)
