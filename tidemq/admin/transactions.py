"""Pending half messages of a cluster, for ``tidemq admin transaction-pending`` and the dashboard.

Each master's GET_BROKER_RUNTIME_INFO carries ``transactionHalfPending`` (a tidemq key, JSON:
``[{"producerGroup", "topic", "count", "oldestAgeMs"}]``); a RocketMQ broker has none and lists
nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from tidemq.admin.client import AsyncAdminClient

__all__ = ["RUNTIME_KEY", "pending_half_messages", "pending_of"]

RUNTIME_KEY = "transactionHalfPending"


def pending_of(runtime: dict[str, str]) -> list[dict[str, Any]]:
    """The pending rows of one broker's runtime table (empty when it has none or they do not parse)."""
    try:
        rows = orjson.loads(runtime.get(RUNTIME_KEY) or "[]")
    except orjson.JSONDecodeError:
        return []
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


async def pending_half_messages(
    admin: AsyncAdminClient, broker_addrs: list[str] | None = None
) -> list[dict[str, Any]]:
    """``[{"broker", "producerGroup", "topic", "count", "oldestAgeMs"}]`` over ``broker_addrs``
    (default: every master), sorted by broker, group, topic.

    Raises:
        TideMQError: a broker or the name server cannot be asked.
    """
    if broker_addrs is None:
        broker_addrs = list((await admin.all_broker_addrs(None)).values())
    rows: list[dict[str, Any]] = []
    for addr in broker_addrs:
        rows.extend(
            {"broker": addr, **row} for row in pending_of(await admin.fetch_broker_runtime_stats(addr))
        )
    return sorted(rows, key=lambda r: (r["broker"], str(r.get("producerGroup")), str(r.get("topic"))))
