"""SendMessage. Mirrors RocketMQ 5's ``SendMessageActivity`` + ``ProducerProcessor`` (rocketmq5.md §5).

Each message of a request becomes a SEND_MESSAGE_V2 to the broker holding its queue: a message
group always maps to the same writable queue (FIFO: a group's messages stay in order on one
queue), other messages go round robin. A message whose type the topic does not accept (topic
attribute ``message.type``) is refused with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, as RocketMQ 5's
proxy refuses it; retry and dead-letter topics are not checked.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import SendMessageRequestHeader
from tidemq.protocol.message import properties_to_string
from tidemq.protocol.topic import AUTO_CREATE_TOPIC_KEY, is_retry_topic
from tidemq.proxy import codes
from tidemq.proxy.backend import AUTO_CREATE_QUEUE_NUMS, Backend, TopicRoute
from tidemq.proxy.convert import SendItem, check_type, to_send
from tidemq.proxy.names import resource_name
from tidemq.proxy.pb import s

if TYPE_CHECKING:
    from tidemq.proxy.context import RequestContext

SEND_TIMEOUT_S = 3.0
"""How long a send waits for the broker (a v5 client's default request timeout)."""


@dataclass(slots=True, frozen=True)
class SentMessage:
    """Where a message went: for the answer and for EndTransaction."""

    broker_name: str
    queue_id: int
    queue_offset: int
    offset_msg_id: str
    transaction_id: str


def writable_queues(route: TopicRoute) -> list[tuple[str, int]]:
    """``(broker_name, queue_id)`` of every writable queue, in a stable order."""
    out: list[tuple[str, int]] = []
    for q in sorted(route.queues, key=lambda q: q.broker_name):
        if q.perm & 2:
            out.extend((q.broker_name, i) for i in range(q.write_queue_nums))
    return out


class ProducerActivity:
    """SendMessage for both backends.

    Args:
        backend: where the broker requests go.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._round_robin = itertools.count()
        self.sent_hook: Any = None
        """Called with (context, SendItem, SentMessage) after each accepted message (transactions)."""

    def select_queue(self, route: TopicRoute, group: str) -> tuple[str, int]:
        """A message group's queue (the same for every message of the group), else the next one.

        Raises:
            ProxyError: FORBIDDEN when the topic has no writable queue.
        """
        queues = writable_queues(route)
        if not queues:
            raise codes.ProxyError(codes.FORBIDDEN, "no writable queue")
        if group:
            return queues[zlib.crc32(group.encode()) % len(queues)]
        return queues[next(self._round_robin) % len(queues)]

    async def send_message(self, request: Any, ctx: RequestContext) -> Any:
        """The ``SendMessageResponse`` to ``request``: one entry per message, MULTIPLE_RESULTS when
        their codes differ.

        Raises:
            ProxyError: MESSAGE_CORRUPTED (no message, or topics differ), TOPIC_NOT_FOUND, and the
                message checks of :func:`~tidemq.proxy.convert.to_send`.
        """
        if not request.messages:
            raise codes.ProxyError(codes.MESSAGE_CORRUPTED, "no message to send")
        first = request.messages[0].topic
        if len(request.messages) > 1 and any(m.topic != first for m in request.messages[1:]):
            raise codes.ProxyError(codes.MESSAGE_CORRUPTED, "topic in message is not same")
        topic = resource_name(first, ctx.namespace)
        route = await self.backend.topic_route(topic)
        if route is None:
            raise codes.ProxyError(codes.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        items = [to_send(m, topic, ctx.remote_ip, self.backend.max_body_size) for m in request.messages]
        if not is_retry_topic(topic) and not topic.startswith("%DLQ%"):
            for item in items:
                check_type(route.types, item.properties, topic)
        entries = [await self._send_one(item, route, ctx) for item in items]
        response = s.SendMessageResponse(entries=entries)
        kinds = {e.status.code for e in entries}
        if len(kinds) == 1:
            response.status.CopyFrom(entries[0].status)
        else:
            response.status.CopyFrom(
                codes.status(codes.MULTIPLE_RESULTS, "send message has multiple results")
            )
        return response

    def _request(self, item: SendItem, queue_id: int, auto_create: bool) -> RemotingCommand:
        header = SendMessageRequestHeader(
            producer_group=item.topic,
            topic=item.topic,
            default_topic=AUTO_CREATE_TOPIC_KEY,
            default_topic_queue_nums=AUTO_CREATE_QUEUE_NUMS,
            queue_id=queue_id,
            sys_flag=item.sys_flag,
            born_timestamp=item.born_timestamp,
            flag=0,
            properties=properties_to_string(item.properties),
            reconsume_times=int(item.properties.get("RECONSUME_TIME", "0") or 0),
        )
        return RemotingCommand.create_request(
            RequestCode.SEND_MESSAGE_V2, header.to_v2_ext_fields(), item.body
        )

    async def _send_one(self, item: SendItem, route: TopicRoute, ctx: RequestContext) -> Any:
        entry = s.SendResultEntry(message_id=item.message_id)
        try:
            broker_name, queue_id = self.select_queue(route, item.message_group)
            resp = await self.backend.invoke(
                broker_name,
                self._request(item, queue_id, route.auto_create),
                SEND_TIMEOUT_S,
                ctx.client_id,
                ctx.remote_addr,
            )
        except codes.ProxyError as exc:
            entry.status.CopyFrom(codes.status(exc.code, exc.message))
            return entry
        if resp.code != ResponseCode.SUCCESS:
            remark = resp.remark or f"send message failed, code {resp.code}"
            entry.status.CopyFrom(codes.status(codes.code_of_remoting(resp.code), remark))
            return entry
        ext = resp.ext_fields
        offset = int(ext.get("queueOffset", "0") or 0)
        entry.offset = offset
        entry.recall_handle = ext.get("recallHandle", "")  # a delay message's (proxy/recall.py)
        entry.status.CopyFrom(codes.status(codes.OK))
        if item.message_type == 4:  # TRANSACTION: the id EndTransaction names
            entry.transaction_id = item.message_id
        if self.sent_hook is not None:
            sent = SentMessage(
                broker_name,
                int(ext.get("queueId", queue_id)),
                offset,
                ext.get("msgId", ""),
                entry.transaction_id,
            )
            self.sent_hook(ctx, item, sent)
        return entry
