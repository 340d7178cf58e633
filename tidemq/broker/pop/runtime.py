"""POP groups as operators see them: the ``popGroupStats`` runtime-info key.

GET_BROKER_RUNTIME_INFO (28) carries ``popGroupStats`` (a tidemq key, as ``transactionHalfPending``
is): a JSON list, one object per (consumer group, popped topic) with the figures /metrics exports
as ``tidemq_pop_*``::

    [{"group": "g", "topic": "T", "inFlight": 1, "popped": 3, "acked": 1,
      "redelivered": 1, "deadLettered": 0}]

``inFlight``: popped and not acked yet (acks are merged within ``reviveInterval``); the others are
totals since the broker started. ``tidemq admin pop-status`` and the dashboard's ``/pop`` read it
(:mod:`tidemq.admin.pop_status`); a RocketMQ broker has no such key. Read on the broker's loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

__all__ = ["RUNTIME_KEY", "runtime_value"]

RUNTIME_KEY = "popGroupStats"
FIELDS = ("group", "topic", "inFlight", "popped", "acked", "redelivered", "deadLettered")


def runtime_value(broker: Broker) -> str:
    """The ``popGroupStats`` runtime-info value (JSON text), sorted by group and topic."""
    from tidemq.broker.pop.service import pop_metric_rows

    return orjson.dumps([dict(zip(FIELDS, row, strict=True)) for row in pop_metric_rows(broker)]).decode()
