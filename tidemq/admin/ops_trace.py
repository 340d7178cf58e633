"""A message's trace, looked up the way mqadmin's ``queryMsgTraceById`` does.

QUERY_MESSAGE on the trace topic (default ``RMQ_SYS_TRACE_TOPIC``) with the message id as the key
(trace messages are keyed by the ids they describe), up to 64 per broker over all time, decoded
by :func:`tidemq.client.trace.build_message_trace`. When the Pub record names the stored message
(its offset msg id), the message itself is looked up for its real store time and host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemq.client.trace.view import MessageTrace, build_message_trace
from tidemq.errors import ClientError, TideMQError
from tidemq.protocol.topic import TRACE_TOPIC

if TYPE_CHECKING:
    from tidemq.admin.client import AsyncAdminClient

__all__ = ["query_msg_trace_by_id"]


async def query_msg_trace_by_id(
    admin: AsyncAdminClient, msg_id: str, trace_topic: str | None = None
) -> MessageTrace:
    """The trace of ``msg_id`` (the producer's msg id, i.e. its UNIQ_KEY) in ``trace_topic``.

    Returns an empty :class:`MessageTrace` (``found`` False) when no trace names the id, or the
    trace topic does not exist (nobody traced anything yet).

    Raises:
        TideMQError: the name server or a broker could not be asked.
    """
    topic = trace_topic or TRACE_TOPIC
    try:
        msgs = await admin.query_message_by_key(topic, msg_id, 64, 0)
    except ClientError:  # nothing found, or no route for the trace topic
        return MessageTrace(msg_id)
    trace = build_message_trace(msg_id, msgs)
    for pub in trace.pubs:
        if not pub.offset_msg_id or pub.offset_msg_id == "null":
            continue
        try:
            stored = await admin.view_message(pub.offset_msg_id)
        except TideMQError:
            continue
        trace.store_time = stored.store_timestamp
        pub.store_host = stored.store_host or pub.store_host
        break
    return trace
