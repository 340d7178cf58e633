"""QueryRoute and QueryAssignment answers. Mirrors RocketMQ's ``RouteActivity`` (rocketmq5.md §3).

Every queue is given on the master (``broker.id`` 0) with the proxy's own endpoints: a client
sends every later RPC to the endpoints named in the route, and those are this endpoint whichever
broker holds the queue (the proxy forwards). Queues: ``min(read, write)`` READ_WRITE first in
RocketMQ's order (read-only, then write-only, then read-write ids). Pure code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from tidemq.protocol.topic import PermName
from tidemq.proxy.pb import d

NONE, READ, WRITE, READ_WRITE = 1, 2, 3, 4
"""``apache.rocketmq.v2.Permission`` values."""
MESSAGE_TYPE_NAMES: Final = {
    "NORMAL": (1,),
    "FIFO": (2,),
    "DELAY": (3,),
    "TRANSACTION": (4,),
    "MIXED": (1, 2, 3, 4),
}
"""``message.type`` topic attribute -> accepted v5 types (RocketMQ's ``TopicMessageType``)."""
MESSAGE_TYPE_ATTRIBUTE: Final = "message.type"


def accepted_types(attributes: dict[str, str] | None) -> tuple[int, ...]:
    """The v5 message types a topic accepts, from its ``message.type`` attribute.

    A topic without the attribute accepts every type (tidemq's choice, so topics made by 4.x tools
    and auto-created topics serve FIFO, delay and transactional v5 producers; RocketMQ 5 reads a
    missing attribute as NORMAL). An unknown value accepts every type too.
    """
    value = (attributes or {}).get(MESSAGE_TYPE_ATTRIBUTE, "").upper()
    return MESSAGE_TYPE_NAMES.get(value, MESSAGE_TYPE_NAMES["MIXED"])


@dataclass(slots=True, frozen=True)
class BrokerQueues:
    """A topic's queues on one broker (a route's ``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int


def endpoints(host: str, port: int) -> Any:
    """``Endpoints`` for ``host:port`` (scheme IPv4 for a dotted address, else DOMAIN_NAME)."""
    parts = host.split(".")
    ipv4 = len(parts) == 4 and all(p.isdigit() for p in parts)
    scheme = 1 if ipv4 else (2 if ":" in host else 3)
    return d.Endpoints(scheme=scheme, addresses=[d.Address(host=host, port=port)])


def _permission(perm: int) -> int:
    readable, writable = bool(perm & PermName.PERM_READ), bool(perm & PermName.PERM_WRITE)
    if readable and writable:
        return READ_WRITE
    return READ if readable else (WRITE if writable else NONE)


def message_queues(topic: Any, queues: list[BrokerQueues], eps: Any, types: tuple[int, ...]) -> list[Any]:
    """The QueryRoute queues (``RouteActivity.genMessageQueueFromQueueData``) of every broker."""
    out: list[Any] = []
    for q in sorted(queues, key=lambda q: q.broker_name):
        broker = d.Broker(name=q.broker_name, id=0, endpoints=eps)
        readable, writable = bool(q.perm & PermName.PERM_READ), bool(q.perm & PermName.PERM_WRITE)
        r = w = rw = n = 0
        if readable and writable:
            rw = min(q.read_queue_nums, q.write_queue_nums)
            r, w = q.read_queue_nums - rw, q.write_queue_nums - rw
        elif writable:
            w = q.write_queue_nums
        elif readable:
            r = q.read_queue_nums
        else:
            n = max(1, q.read_queue_nums, q.write_queue_nums)
        kinds = [READ] * r + [WRITE] * w + [READ_WRITE] * rw + [NONE] * n
        for queue_id, permission in enumerate(kinds):
            out.append(
                d.MessageQueue(
                    topic=topic, id=queue_id, permission=permission, broker=broker, accept_message_types=types
                )
            )
    return out


def assignments(topic: Any, queues: list[BrokerQueues], eps: Any, fifo: bool) -> list[Any]:
    """QueryAssignment: one assignment per readable broker with queue id -1 (pop from any queue), or
    one per readable queue for a FIFO group (``RouteActivity.queryAssignment``)."""
    out: list[Any] = []
    for q in sorted(queues, key=lambda q: q.broker_name):
        if not q.perm & PermName.PERM_READ or q.read_queue_nums <= 0:
            continue
        broker = d.Broker(name=q.broker_name, id=0, endpoints=eps)
        permission = _permission(q.perm)
        ids = range(q.read_queue_nums) if fifo else (-1,)
        for queue_id in ids:
            mq = d.MessageQueue(topic=topic, id=queue_id, permission=permission, broker=broker)
            out.append(d.Assignment(message_queue=mq))
    return out
