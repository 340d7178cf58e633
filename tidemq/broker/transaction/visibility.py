"""Pending half messages as operators see them: the runtime-info key, /metrics families.

``pending_rows`` is read on the broker's loop (the pending table changes there); the rest are pure.

* GET_BROKER_RUNTIME_INFO carries ``transactionHalfPending``: a JSON list of
  ``{"producerGroup", "topic", "count", "oldestAgeMs"}`` (``tidemq admin transaction-pending``
  and the dashboard read it);
* /metrics: ``tidemq_transaction_half_pending`` and ``tidemq_transaction_half_oldest_age_seconds``
  per cluster, broker, producer group and topic, plus the counters
  ``tidemq_transaction_checks`` and ``tidemq_transaction_discarded``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from tidemq.broker.broker import Broker

__all__ = ["RUNTIME_KEY", "metric_families", "pending_rows", "runtime_value"]

RUNTIME_KEY = "transactionHalfPending"


def pending_rows(broker: Broker) -> dict[str, Any]:
    """``{"rows": [...], "checks": n, "discarded": n}`` of the broker's transaction service (on its loop)."""
    service = broker.transaction_service
    if service is None:
        return {"rows": [], "checks": 0, "discarded": 0}
    return {"rows": service.pending_stats(), "checks": service.checks_sent, "discarded": service.discarded}


def runtime_value(broker: Broker) -> str:
    """The ``transactionHalfPending`` runtime-info value (JSON text)."""
    return orjson.dumps(pending_rows(broker)["rows"]).decode()


def metric_families(cluster: str, broker: str, snapshot: dict[str, Any]) -> Iterator[Metric]:
    """The transaction families from a :func:`pending_rows` snapshot."""
    labels = ["cluster", "broker", "group", "topic"]
    pending = GaugeMetricFamily(
        "tidemq_transaction_half_pending", "Half messages with no commit or rollback yet", labels=labels
    )
    age = GaugeMetricFamily(
        "tidemq_transaction_half_oldest_age_seconds",
        "Age of the oldest pending half message (since its producer sent it)",
        labels=labels,
    )
    for row in snapshot["rows"]:
        values = [cluster, broker, str(row["producerGroup"]), str(row["topic"])]
        pending.add_metric(values, float(row["count"]))
        age.add_metric(values, float(row["oldestAgeMs"]) / 1000.0)
    yield pending
    yield age
    for name, doc, key in (
        ("tidemq_transaction_checks", "CHECK_TRANSACTION_STATE requests sent to producers", "checks"),
        ("tidemq_transaction_discarded", "Half messages moved to TRANS_CHECK_MAX_TIME_TOPIC", "discarded"),
    ):
        family = CounterMetricFamily(name, doc, labels=["cluster", "broker"])
        family.add_metric([cluster, broker], float(snapshot[key]))
        yield family
