"""Where the proxy's remoting requests go: the broker in this process, or the brokers of a cluster.

Mirrors RocketMQ 5's ``LocalMessageService`` / ``ClusterMessageService`` and the metadata services
beside them. Both backends take the broker's own remoting requests (SEND_MESSAGE_V2, POP_MESSAGE,
ACK_MESSAGE, END_TRANSACTION...), so every RPC handler is the same in both modes:

* :class:`~tidemq.proxy.local.LocalBackend` (``tidemq serve --grpc-port``) calls the broker's
  request processors directly, with a ``LocalChannel`` standing for the v5 client: no socket, no
  frame encoding.
* :class:`~tidemq.proxy.cluster.ClusterBackend` (``tidemq proxy --namesrv``) sends them over
  remoting to the broker that holds the queue, with routes from the name servers and topic
  attributes from the brokers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import MessageExt
from tidemq.proxy import codes
from tidemq.proxy.route import BrokerQueues

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


@dataclass(frozen=True, slots=True)
class PopSpec:
    """What one ReceiveMessage pops: POP_MESSAGE (200050) of every queue of ``topic`` on a broker.

    Attributes:
        group, topic: stored (namespaced) names.
        max_nums: messages at most (1..32).
        invisible_ms: how long popped messages stay invisible (ms).
        poll_ms: how long the broker may hold an empty pop (ms, long polling).
        order: a FIFO pop (the group is ``consumeMessageOrderly``).
        expression_type, expression: the filter, ``TAG`` (``*`` = all) or ``SQL92``.
    """

    group: str
    topic: str
    max_nums: int
    invisible_ms: int
    poll_ms: int
    order: bool = False
    expression_type: str = "TAG"
    expression: str = "*"
    attempt_id: str | None = None
    """The receive's ``attempt_id``: a FIFO retry with it gets the same messages (POP ``attemptId``)."""


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

    async def pop(self, broker_name: str, spec: PopSpec) -> list[MessageExt]:
        """Pop as ``spec`` says from every queue of its topic on ``broker_name``; each
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
