"""POP consumer groups of a cluster, for ``tidemq admin pop-status`` and the dashboard's ``/pop``.

Each master's GET_BROKER_RUNTIME_INFO (28) carries ``popGroupStats`` (a tidemq key, JSON: one object
per (group, popped topic); :mod:`tidemq.broker.pop.runtime`); a RocketMQ broker has none and lists
nothing. The figures are those of /metrics' ``tidemq_pop_*`` families.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from tidemq.admin.ops_broker import BrokerOps

__all__ = ["RUNTIME_KEY", "PopGroupRow", "pop_rows_of", "pop_status"]

RUNTIME_KEY = "popGroupStats"


@dataclass(frozen=True, slots=True)
class PopGroupRow:
    """One POP consumer group on one topic of one broker.

    Attributes:
        broker: the broker's address (``host:port``).
        group / topic: the consumer group and the topic it pops (not its ``%RETRY%`` topic).
        in_flight: popped, neither acked nor visible again yet (acks counted within the broker's
            ``reviveInterval``, 1 s by default).
        popped: messages handed out by pops, redeliveries included (since the broker started).
        acked: acks received. redelivered: messages visible again after their invisible time
            without an ack. dead_lettered: messages moved to ``%DLQ%<group>`` after
            ``maxReconsumeTimes`` (all since the broker started).
    """

    broker: str
    group: str
    topic: str
    in_flight: int = 0
    popped: int = 0
    acked: int = 0
    redelivered: int = 0
    dead_lettered: int = 0

    def to_json(self) -> dict[str, Any]:
        """``{"broker", "group", "topic", "inFlight", "popped", "acked", "redelivered", "deadLettered"}``."""
        return {
            "broker": self.broker,
            "group": self.group,
            "topic": self.topic,
            "inFlight": self.in_flight,
            "popped": self.popped,
            "acked": self.acked,
            "redelivered": self.redelivered,
            "deadLettered": self.dead_lettered,
        }


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def pop_rows_of(broker: str, runtime: dict[str, str]) -> list[PopGroupRow]:
    """The POP rows of one broker's runtime table (empty when it has none or they do not parse). Pure."""
    try:
        rows = orjson.loads(runtime.get(RUNTIME_KEY) or "[]")
    except orjson.JSONDecodeError:
        return []
    if not isinstance(rows, list):
        return []
    return [
        PopGroupRow(
            broker,
            str(r.get("group", "")),
            str(r.get("topic", "")),
            _int(r.get("inFlight")),
            _int(r.get("popped")),
            _int(r.get("acked")),
            _int(r.get("redelivered")),
            _int(r.get("deadLettered")),
        )
        for r in rows
        if isinstance(r, dict)
    ]


async def pop_status(
    admin: BrokerOps,
    group: str | None = None,
    topic: str | None = None,
    broker_addrs: list[str] | None = None,
) -> list[PopGroupRow]:
    """The POP groups of ``broker_addrs`` (default: every master), only ``group`` / ``topic`` when
    given, sorted by group, topic and broker.

    Raises:
        TideMQError: a broker or the name server cannot be asked.
    """
    if broker_addrs is None:
        broker_addrs = list((await admin.all_broker_addrs(None)).values())
    rows: list[PopGroupRow] = []
    for addr in broker_addrs:
        for row in pop_rows_of(addr, await admin.fetch_broker_runtime_stats(addr)):
            if (group is None or row.group == group) and (topic is None or row.topic == topic):
                rows.append(row)
    return sorted(rows, key=lambda r: (r.group, r.topic, r.broker))
