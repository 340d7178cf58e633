"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue over POP.

Mirrors RocketMQ 5's ``ReceiveMessageActivity``, ``AckMessageActivity``,
``ChangeInvisibleDurationActivity`` and ``ForwardMessageToDLQActivity`` (rocketmq5.md §7):

* a receive pops across every queue of the broker named in the request (the queue id is ignored,
  as Java's ``ReceiveMessageQueueSelector`` does: Python 5.1.2 picks a random queue per receive);
  a FIFO group (``consumeMessageOrderly``) makes it an order pop;
* long polling: the request's ``long_polling_timeout``, at most 20 s (``long_polling_ms``) and what the client's
  deadline leaves (one second kept for the answer);
* invisible time: the request's, within [``min_invisible_ms``, 12 h] (else ILLEGAL_INVISIBLE_TIME);
  an ``auto_renew`` receive (the PushConsumer's) gets ``default_invisible_ms`` (60 s), renewed
  until the message is acked (:mod:`tidemq.proxy.renew`);
* the stream is ``{status OK}``, ``{delivery_timestamp}``, then one ``{message}`` each, or one
  ``{status MESSAGE_NOT_FOUND}``;
* the receipt handle is the broker's POP handle (``POP_CK``); an ack or change with a handle whose
  invisible time is over answers INVALID_RECEIPT_HANDLE "receipt handle is expired" (Java's
  ``AbstractProcessor``); a change answers with the new handle, which replaces the old one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidemq.broker.pop.extra_info import ExtraInfoError, parse_extra_info
from tidemq.clock import now_ms
from tidemq.proxy import codes
from tidemq.proxy.backend import PopSpec
from tidemq.proxy.convert import to_v5
from tidemq.proxy.names import resource_name
from tidemq.proxy.pb import s
from tidemq.proxy.renew import HandleRenewer

if TYPE_CHECKING:
    from tidemq.proxy.backend import Backend
    from tidemq.proxy.channels import ClientState
    from tidemq.proxy.context import RequestContext

MAX_INVISIBLE_MS = 12 * 3600 * 1000  # ProxyConfig.maxInvisibleTimeMills
MAX_BATCH = 32  # the broker's pop limit


@dataclass(slots=True)
class ConsumerConfig:
    """Receive limits (RocketMQ 5's ``ProxyConfig`` names, ms).

    Attributes:
        min_invisible_ms: shortest invisible time a receive may ask (``minInvisibleTimeMillsForRecv``, 10 s).
        default_invisible_ms: the invisible time of ``auto_renew`` receives (the PushConsumers'),
            renewed by :class:`~tidemq.proxy.renew.HandleRenewer` until acked (``defaultInvisibleTimeMills``, 60 s).
        renew_ahead_ms / renew_max_ms / renew_interval_ms: renew that long before expiry (10 s), for
            at most that long (3 h), looking every that long (1 s).
        long_polling_ms: the longest a receive waits (``grpcClientConsumerMaxLongPollingTimeoutMillis``,
            20 s), also the long polling the consumers are told in their settings. A Node
            PushConsumer's shutdown waits for its receive in flight, so up to this long.
    """

    min_invisible_ms: int = 10_000
    default_invisible_ms: int = 60_000
    long_polling_ms: int = 20_000
    renew_ahead_ms: int = 10_000
    renew_max_ms: int = 3 * 3600 * 1000
    renew_interval_ms: int = 1000


def _duration_ms(duration: Any) -> int:
    return int(duration.seconds) * 1000 + int(duration.nanos) // 1_000_000


def check_handle(handle: str) -> tuple[str, int]:
    """The broker name of a receipt handle and when it expires (ms).

    Raises:
        ProxyError: INVALID_RECEIPT_HANDLE when it does not parse or its invisible time is over.
    """
    try:
        info = parse_extra_info(handle)
    except ExtraInfoError as exc:
        raise codes.ProxyError(codes.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {exc}") from None
    if info.visible_at <= now_ms():
        raise codes.ProxyError(codes.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
    return info.broker_name, info.visible_at


class ConsumerActivity:
    """The POP RPCs for both backends.

    Args:
        backend: where the pops, acks and changes go (``pop`` / ``ack`` / ``change_invisible_time``).
        config: receive limits.
    """

    def __init__(self, backend: Backend, config: ConsumerConfig | None = None) -> None:
        self.backend = backend
        self.config = config or ConsumerConfig()
        c = self.config
        self.renewer = HandleRenewer(
            backend,
            invisible_ms=c.default_invisible_ms,
            renew_ahead_ms=c.renew_ahead_ms,
            renew_max_ms=c.renew_max_ms,
            renew_interval_ms=c.renew_interval_ms,
        )

    def _invisible_ms(self, request: Any) -> int:
        if request.auto_renew:
            return self.config.default_invisible_ms
        if not request.HasField("invisible_duration"):
            raise codes.ProxyError(codes.ILLEGAL_INVISIBLE_TIME, "invisible duration is required")
        ms = _duration_ms(request.invisible_duration)
        if not self.config.min_invisible_ms <= ms <= MAX_INVISIBLE_MS:
            raise codes.ProxyError(
                codes.ILLEGAL_INVISIBLE_TIME,
                f"the invisible time of message must be in [{self.config.min_invisible_ms}, {MAX_INVISIBLE_MS}] ms, got {ms}",
            )
        return ms

    def _poll_ms(self, request: Any, time_remaining: float | None) -> int:
        longest = self.config.long_polling_ms
        asked = request.HasField("long_polling_timeout")
        ms = min(max(_duration_ms(request.long_polling_timeout) if asked else longest, 0), longest)
        if time_remaining is not None:
            ms = min(ms, max(0, int(time_remaining * 1000) - 1000))
        return ms

    async def receive(
        self,
        request: Any,
        ctx: RequestContext,
        client: ClientState | None,
        time_remaining: float | None = None,
    ) -> AsyncIterator[Any]:
        """The ReceiveMessage stream (see the module doc)."""
        try:
            group = resource_name(request.group, ctx.namespace)
            topic = resource_name(request.message_queue.topic, ctx.namespace)
            broker_name = request.message_queue.broker.name
            invisible_ms = self._invisible_ms(request)
            batch = min(max(request.batch_size, 1), MAX_BATCH)
            expression = request.filter_expression
            exp_type = "SQL92" if expression.type == 2 else "TAG"
            info = await self.backend.group_info(group)
            spec = PopSpec(
                group,
                topic,
                batch,
                invisible_ms,
                self._poll_ms(request, time_remaining),
                order=info.fifo,
                expression_type=exp_type,
                expression=expression.expression or "*",
                attempt_id=request.attempt_id or None,
            )
            messages = await self.backend.pop(broker_name, spec)
        except codes.ProxyError as exc:
            yield s.ReceiveMessageResponse(status=codes.status(exc.code, exc.message))
            return
        if not messages:
            yield s.ReceiveMessageResponse(status=codes.status(codes.MESSAGE_NOT_FOUND, "no new message"))
            return
        if request.auto_renew:
            for msg in messages:
                handle = msg.get_property("POP_CK") or ""
                with contextlib.suppress(ExtraInfoError):
                    visible_at = parse_extra_info(handle).visible_at
                    self.renewer.add(ctx.client_id, broker_name, group, topic, handle, visible_at)
        yield s.ReceiveMessageResponse(status=codes.status())
        # when the messages left the server: the Python PushConsumer computes its receive latency
        # from it and fails the whole batch without it (rocketmq-python-client 5.1.2)
        stamp = s.ReceiveMessageResponse()
        stamp.delivery_timestamp.FromMilliseconds(now_ms())
        yield stamp
        for msg in messages:
            yield s.ReceiveMessageResponse(message=to_v5(msg, ctx.namespace))

    async def ack(self, request: Any, ctx: RequestContext) -> Any:
        """AckMessage: one status per entry; OK, or MULTIPLE_RESULTS when they differ."""
        group = resource_name(request.group, ctx.namespace)
        topic = resource_name(request.topic, ctx.namespace)
        entries = []
        for entry in request.entries:
            result = s.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle)
            try:
                handle = self.renewer.take(entry.receipt_handle)
                broker_name, _ = check_handle(handle)
                await self.backend.ack(broker_name, group, topic, handle)
                result.status.CopyFrom(codes.status())
            except codes.ProxyError as exc:
                result.status.CopyFrom(codes.status(exc.code, exc.message))
            entries.append(result)
        response = s.AckMessageResponse(entries=entries)
        kinds = {e.status.code for e in entries}
        if len(kinds) > 1:
            response.status.CopyFrom(codes.status(codes.MULTIPLE_RESULTS, "ack has multiple results"))
        else:
            response.status.CopyFrom(entries[0].status if entries else codes.status())
        return response

    async def change_invisible_duration(self, request: Any, ctx: RequestContext) -> Any:
        """ChangeInvisibleDuration: invisible for the new duration from now; answers the new handle."""
        group = resource_name(request.group, ctx.namespace)
        topic = resource_name(request.topic, ctx.namespace)
        ms = _duration_ms(request.invisible_duration)
        if not 0 < ms <= MAX_INVISIBLE_MS:
            raise codes.ProxyError(
                codes.ILLEGAL_INVISIBLE_TIME,
                f"the invisible time must be in (0, {MAX_INVISIBLE_MS}] ms, got {ms}",
            )
        old = self.renewer.take(request.receipt_handle)
        broker_name, _ = check_handle(old)
        handle = await self.backend.change_invisible_time(broker_name, group, topic, old, ms)
        return s.ChangeInvisibleDurationResponse(status=codes.status(), receipt_handle=handle)

    async def forward_to_dlq(self, request: Any, ctx: RequestContext) -> Any:
        """ForwardMessageToDeadLetterQueue: the message goes to ``%DLQ%<group>`` and is acked."""
        group = resource_name(request.group, ctx.namespace)
        topic = resource_name(request.topic, ctx.namespace)
        handle = self.renewer.take(request.receipt_handle)
        broker_name, _ = check_handle(handle)
        await self.backend.forward_to_dlq(broker_name, group, topic, handle, request.message_id)
        return s.ForwardMessageToDeadLetterQueueResponse(status=codes.status())
