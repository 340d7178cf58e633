"""POP counters per (group, topic) for /metrics and the admin tools. Pure code.

The in-flight count is not counted here: it is what the revive holds (check-points with un-acked
messages, order batches), see :meth:`tidemq.broker.pop.service.PopService.in_flight`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PopCounters:
    """Totals since the broker started.

    Attributes:
        popped: messages handed out by pops (first deliveries and redeliveries).
        acked: acks received (an ack of an expired handle counts too).
        revived: messages made visible again after their invisible time without an ack
            (re-put to the retry topic, or an order batch popped again).
        dead_lettered: messages moved to ``%DLQ%<group>`` after ``retryMaxTimes``.
    """

    popped: int = 0
    acked: int = 0
    revived: int = 0
    dead_lettered: int = 0


class PopStats:
    """:class:`PopCounters` by ``(group, topic)`` (the topic the group pops, not its retry topic)."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, str], PopCounters] = {}

    def _get(self, group: str, topic: str) -> PopCounters:
        key = (group, topic)
        counters = self.table.get(key)
        if counters is None:
            counters = self.table[key] = PopCounters()
        return counters

    def on_pop(self, group: str, topic: str, n: int) -> None:
        """Count ``n`` messages popped by ``group`` from ``topic``."""
        self._get(group, topic).popped += n

    def on_ack(self, group: str, topic: str, n: int) -> None:
        """Count ``n`` messages acked by ``group`` on ``topic``."""
        self._get(group, topic).acked += n

    def on_revive(self, group: str, topic: str, n: int) -> None:
        """Count ``n`` un-acked messages of ``group`` on ``topic`` put back for another delivery."""
        self._get(group, topic).revived += n

    def on_dead_letter(self, group: str, topic: str, n: int) -> None:
        """Count ``n`` messages of ``group`` on ``topic`` moved to ``%DLQ%<group>``."""
        self._get(group, topic).dead_lettered += n

    def snapshot(self) -> dict[tuple[str, str], PopCounters]:
        """A copy of the table."""
        return {k: PopCounters(v.popped, v.acked, v.revived, v.dead_lettered) for k, v in self.table.items()}
