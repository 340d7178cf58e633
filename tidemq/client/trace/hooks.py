"""Where traces are taken: after a send (Pub), around a consume (SubBefore / SubAfter).

Mirrors the Java client's ``SendMessageTraceHookImpl`` and ``ConsumeMessageTraceHookImpl``.

* :class:`SendTraceHook`: called by the producer after a single-message send answered by the
  broker (sync, async or the blocking facade's direct path). No record for a failed send, a
  oneway send, a batch, or when the broker's answer says ``TRACE_ON=false`` (as Java). The send's
  cost is measured from the request's ``bornTimestamp``.
* :func:`record_polled`: a lite pull consumer's polled batch, SubBefore and SubAfter (success) at
  once, as Java's ``DefaultLitePullConsumerImpl`` does.
* :func:`trace_listener`: wraps a push consumer's listener (plain, coroutine or orderly) so each
  call records one SubBefore (every message: msg id, retry times, keys) before and one SubAfter
  (cost per message, success, :class:`~tidemq.client.trace.encoder.ConsumeReturnType`) after; a
  message whose ``TRACE_ON`` property is ``false`` is left out.

Both only build a small :class:`~tidemq.client.trace.encoder.TraceContext` and append it to the
dispatcher; encoding and sending happen on its worker.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidemq.client.trace.encoder import ConsumeReturnType, MessageType, TraceBean, TraceContext, TraceType
from tidemq.clock import now_ms
from tidemq.protocol.message import Message, MessageConst, MessageExt, SendResult
from tidemq.protocol.message_codec import create_unique_id

if TYPE_CHECKING:
    from tidemq.client.trace.dispatcher import AsyncTraceDispatcher
    from tidemq.protocol.headers import SendMessageRequestHeader

__all__ = ["SendTraceHook", "record_polled", "trace_listener"]

_OK_RESULTS = frozenset({None, "CONSUME_SUCCESS", "SUCCESS", "COMMIT"})


def _msg_type(msg: Message) -> MessageType:
    """``sendKernelImpl``'s ``MessageType``: transaction half, delayed, or normal."""
    if (msg.get_property(MessageConst.PROPERTY_TRANSACTION_PREPARED) or "").lower() == "true":
        return MessageType.Trans_Msg_Half
    if msg.get_property(MessageConst.PROPERTY_DELAY_TIME_LEVEL) is not None:
        return MessageType.Delay_Msg
    return MessageType.Normal_Msg


class SendTraceHook:
    """Pub records of one producer group. Mirrors ``SendMessageTraceHookImpl``."""

    __slots__ = ("dispatcher", "group")

    def __init__(self, dispatcher: AsyncTraceDispatcher, group: str) -> None:
        self.dispatcher = dispatcher
        self.group = group

    def sent(
        self, msg: Message, header: SendMessageRequestHeader, broker_addr: str, result: SendResult
    ) -> None:
        """Record a send the broker answered (any thread)."""
        if msg.topic.startswith(self.dispatcher.trace_topic) or not result.trace_on:
            return
        now = now_ms()
        ctx = TraceContext(
            TraceType.Pub,
            time_stamp=header.born_timestamp,
            region_id=result.region_id,
            group_name=self.group,
            cost_time=max(0, now - header.born_timestamp),
            is_success=result.send_status == "SEND_OK",
        )
        ctx.trace_beans.append(
            TraceBean(
                topic=msg.topic,
                msg_id=result.msg_id,
                offset_msg_id=result.offset_msg_id,
                tags=msg.tags,
                keys=msg.keys,
                store_host=broker_addr,
                body_length=len(msg.body),
                msg_type=_msg_type(msg),
                store_time=header.born_timestamp + ctx.cost_time // 2,
            )
        )
        self.dispatcher.append(ctx)

    def ended(
        self,
        msg: Message,
        msg_id: str,
        broker_addr: str,
        state: str,
        transaction_id: str | None,
        from_check: bool,
    ) -> None:
        """Record an END_TRANSACTION sent for ``msg_id`` (``state``: ``COMMIT_MESSAGE`` /
        ``ROLLBACK_MESSAGE`` / ``UNKNOW``). Mirrors ``EndTransactionTraceHookImpl``."""
        if msg.topic.startswith(self.dispatcher.trace_topic):
            return
        ctx = TraceContext(
            TraceType.EndTransaction,
            time_stamp=now_ms(),
            region_id=msg.get_property(MessageConst.PROPERTY_MSG_REGION) or "DefaultRegion",
            group_name=self.group,
        )
        ctx.trace_beans.append(
            TraceBean(
                topic=msg.topic,
                msg_id=msg_id,
                tags=msg.tags,
                keys=msg.keys,
                store_host=broker_addr,
                msg_type=MessageType.Trans_msg_Commit,
                transaction_id=transaction_id,
                transaction_state=state,
                from_transaction_check=from_check,
            )
        )
        self.dispatcher.append(ctx)

    def recalled(self, topic: str, msg_id: str, region_id: str, success: bool) -> None:
        """Record a RECALL_MESSAGE the broker answered for ``msg_id`` (``region_id``: the answer's
        ``MSG_REGION``). Mirrors ``DefaultRecallMessageTraceHook`` (5.3)."""
        if topic.startswith(self.dispatcher.trace_topic):
            return
        ctx = TraceContext(
            TraceType.Recall,
            time_stamp=now_ms(),
            region_id=region_id,
            group_name=self.group,
            is_success=success,
        )
        ctx.trace_beans.append(TraceBean(topic=topic, msg_id=msg_id))
        self.dispatcher.append(ctx)


def _before(dispatcher: AsyncTraceDispatcher, group: str, msgs: list[MessageExt]) -> TraceContext | None:
    """``consumeMessageBefore``: the SubBefore context (appended), or None when nothing is traced."""
    ctx = TraceContext(TraceType.SubBefore, group_name=group, request_id=create_unique_id())
    for m in msgs:
        if m.get_property(MessageConst.PROPERTY_TRACE_SWITCH) == "false":
            continue
        ctx.region_id = m.get_property(MessageConst.PROPERTY_MSG_REGION)
        ctx.trace_beans.append(
            TraceBean(
                topic=m.topic,
                msg_id=m.msg_id,
                tags=m.tags,
                keys=m.keys,
                store_time=m.store_timestamp,
                body_length=m.store_size,
                retry_times=m.reconsume_times,
            )
        )
    if not ctx.trace_beans:
        return None
    ctx.time_stamp = now_ms()
    dispatcher.append(ctx)
    return ctx


def _after(
    dispatcher: AsyncTraceDispatcher, before: TraceContext, count: int, code: ConsumeReturnType
) -> None:
    """``consumeMessageAfter``: the SubAfter context of ``before``."""
    now = now_ms()
    dispatcher.append(
        TraceContext(
            TraceType.SubAfter,
            time_stamp=now,
            region_id=before.region_id,
            group_name=before.group_name,
            cost_time=(now - before.time_stamp) // max(1, count),
            is_success=code is ConsumeReturnType.SUCCESS,
            request_id=before.request_id,
            context_code=int(code),
            trace_beans=before.trace_beans,
        )
    )


def record_polled(dispatcher: AsyncTraceDispatcher, group: str, msgs: list[MessageExt]) -> None:
    """A lite pull consumer's delivered batch: SubBefore and a successful SubAfter at once, as
    ``DefaultLitePullConsumerImpl.pull`` runs the consume hooks (polled counts as consumed)."""
    before = _before(dispatcher, group, msgs)
    if before is not None:
        _after(dispatcher, before, len(msgs), ConsumeReturnType.SUCCESS)


def _code(result: object) -> ConsumeReturnType:
    return ConsumeReturnType.SUCCESS if result in _OK_RESULTS else ConsumeReturnType.FAILED


def _wrap_fn(fn: Callable[..., Any], dispatcher: AsyncTraceDispatcher, group: str) -> Callable[..., Any]:
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )
    if is_async:

        @functools.wraps(fn)
        async def traced_async(msgs: list[MessageExt], context: Any) -> Any:
            before = _before(dispatcher, group, msgs)
            try:
                result = await fn(msgs, context)
            except BaseException:
                if before is not None:
                    _after(dispatcher, before, len(msgs), ConsumeReturnType.EXCEPTION)
                raise
            if before is not None:
                _after(dispatcher, before, len(msgs), _code(result))
            return result

        return traced_async

    @functools.wraps(fn)
    def traced(msgs: list[MessageExt], context: Any) -> Any:
        before = _before(dispatcher, group, msgs)
        try:
            result = fn(msgs, context)
        except BaseException:
            if before is not None:
                _after(dispatcher, before, len(msgs), ConsumeReturnType.EXCEPTION)
            raise
        if before is not None:
            _after(dispatcher, before, len(msgs), _code(result))
        return result

    return traced


def trace_listener(listener: Any, dispatcher: AsyncTraceDispatcher, group: str) -> Any:
    """``listener`` wrapped to record SubBefore / SubAfter for ``group``; an orderly listener
    (:class:`~tidemq.client.consumer.listener.MessageListenerOrderly`) stays orderly."""
    from tidemq.client.consumer.listener import MessageListenerOrderly

    if isinstance(listener, MessageListenerOrderly):
        return MessageListenerOrderly(_wrap_fn(listener.fn, dispatcher, group))
    return _wrap_fn(listener, dispatcher, group)
