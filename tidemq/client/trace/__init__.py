"""Message trace (RocketMQ's ``org.apache.rocketmq.client.trace``), wire-compatible with the Java client.

With ``enable_msg_trace=True`` a producer records every answered send (Pub) and a push consumer
every listener call (SubBefore before, SubAfter after), a lite pull consumer every polled batch, into trace messages on
``RMQ_SYS_TRACE_TOPIC`` (or ``customized_trace_topic``), written by
:class:`~tidemq.client.trace.dispatcher.AsyncTraceDispatcher` in the background, in the Java
client's ``TraceDataEncoder`` format (:mod:`tidemq.client.trace.encoder`), so RocketMQ's own tools
read them and tidemq reads theirs. ``tidemq admin queryMsgTraceById -i MSGID`` and the dashboard's
message page show a message's trace (:mod:`tidemq.client.trace.view`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidemq.client.trace.dispatcher import AsyncTraceDispatcher
from tidemq.client.trace.encoder import (
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
    decode_trace_data,
    encode_trace_context,
)
from tidemq.client.trace.hooks import SendTraceHook, record_polled, trace_listener
from tidemq.client.trace.view import MessageTrace, build_message_trace

if TYPE_CHECKING:
    from tidemq.client.config import ClientConfig

__all__ = [
    "AsyncTraceDispatcher",
    "ConsumeReturnType",
    "MessageTrace",
    "MessageType",
    "SendTraceHook",
    "TraceBean",
    "TraceContext",
    "TraceType",
    "build_message_trace",
    "decode_trace_data",
    "encode_trace_context",
    "record_polled",
    "start_consume_trace",
    "start_pull_trace",
    "start_send_trace",
    "trace_listener",
]


async def start_send_trace(config: ClientConfig, group: str) -> SendTraceHook:
    """A started dispatcher for producer ``group`` and the hook its sends call (on the client loop)."""
    dispatcher = AsyncTraceDispatcher(config, group, "PRODUCER", config.customized_trace_topic)
    await dispatcher.start()
    return SendTraceHook(dispatcher, group)


async def start_consume_trace(
    config: ClientConfig, group: str, listener: Any
) -> tuple[AsyncTraceDispatcher, Any]:
    """A started dispatcher for consumer ``group`` and ``listener`` wrapped to record its calls."""
    dispatcher = AsyncTraceDispatcher(config, group, "CONSUMER", config.customized_trace_topic)
    await dispatcher.start()
    return dispatcher, trace_listener(listener, dispatcher, group)


async def start_pull_trace(config: ClientConfig, group: str) -> AsyncTraceDispatcher:
    """A started dispatcher for lite pull consumer ``group`` (its polls are recorded)."""
    dispatcher = AsyncTraceDispatcher(config, group, "CONSUMER", config.customized_trace_topic)
    await dispatcher.start()
    return dispatcher
