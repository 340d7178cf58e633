"""Broker statistics: per-topic and per-group put/get counts and sizes. Mirrors ``BrokerStatsManager``.

The send and pull processors call :meth:`BrokerStatsManager.inc_put` / :meth:`inc_get` once per
request (with the request's message count and bytes); each call is a few dict lookups and integer
additions (O(1), no allocation after the first request of a key). A periodic task calls
:meth:`BrokerStatsManager.sample` every 10 s; windows are computed from those samples:

=============  ====================  ============  ===================================
window         sample every          samples kept  RocketMQ's ``StatsItem``
=============  ====================  ============  ===================================
minute         10 s                  7             ``csListMinute`` / ``getStatsDataInMinute``
hour           10 min                7             ``csListHour`` / ``getStatsDataInHour``
day            1 h                   25            ``csListDay`` / ``getStatsDataInDay``
=============  ====================  ============  ===================================

A window's snapshot compares the current totals with the oldest sample inside the window (or the
item's creation, when younger), so figures move at once rather than at the next sample.

Stats names and keys are RocketMQ's: ``TOPIC_PUT_NUMS`` / ``TOPIC_PUT_SIZE`` keyed by topic,
``GROUP_GET_NUMS`` / ``GROUP_GET_SIZE`` keyed by ``topic@group``, ``BROKER_PUT_NUMS`` /
``BROKER_GET_NUMS`` keyed by the cluster name (VIEW_BROKER_STATS_DATA, request code 315).
"""

from __future__ import annotations

import datetime as dt
import time
from collections import deque
from dataclasses import dataclass

__all__ = [
    "BROKER_GET_NUMS",
    "BROKER_PUT_NUMS",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "STATS_NAMES",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "BrokerStatsManager",
    "StatsItem",
    "StatsSnapshot",
]

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = (
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    BROKER_PUT_NUMS,
    BROKER_GET_NUMS,
)

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
_WINDOWS = {MINUTE: (10.0, 7), HOUR: (600.0, 7), DAY: (3600.0, 25)}


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """Figures of one window. Mirrors ``StatsSnapshot``.

    Attributes:
        sum: value added within the window (messages or bytes).
        tps: ``sum`` per second over the window's elapsed time.
        avgpt: value per request (``sum / requests``), 0 without requests.
    """

    sum: int
    tps: float
    avgpt: float

    def to_json(self) -> dict[str, float | int]:
        """``{"sum", "tps", "avgpt"}`` as in RocketMQ's ``BrokerStatsItem``."""
        return {"sum": self.sum, "tps": self.tps, "avgpt": self.avgpt}


class StatsItem:
    """Totals of one key (``value``: messages or bytes; ``times``: requests) and their samples.

    Mirrors ``StatsItem``. Args: ``now``: creation time (monotonic seconds).
    """

    __slots__ = ("_samples", "created", "times", "value")

    def __init__(self, now: float) -> None:
        self.value = 0
        self.times = 0
        self.created = now
        self._samples: dict[float, deque[tuple[float, int, int]]] = {
            w: deque([(now, 0, 0)], maxlen=keep) for w, (_, keep) in _WINDOWS.items()
        }

    def add(self, value: int, times: int = 1) -> None:
        """Add ``value`` over ``times`` requests."""
        self.value += value
        self.times += times

    def sample(self, now: float) -> None:
        """Record a sample in each window whose sampling period has passed."""
        for w, (period, _) in _WINDOWS.items():
            samples = self._samples[w]
            if now - samples[-1][0] >= period - 0.5:
                samples.append((now, self.value, self.times))

    def _base(self, span: float, now: float) -> tuple[float, int, int]:
        window = MINUTE if span <= MINUTE else HOUR if span <= HOUR else DAY
        samples = self._samples[window]
        for s in samples:
            if now - s[0] <= span + 0.5:
                return s
        return samples[-1]

    def rate(self, span: float, now: float) -> float:
        """Value per second over about the last ``span`` seconds."""
        base = self._base(span, now)
        return (self.value - base[1]) / max(now - base[0], 1.0)

    def snapshot(self, window: float, now: float) -> StatsSnapshot:
        """The figures of the last ``window`` seconds (60, 3600 or 86400)."""
        base = self._base(window, now)
        elapsed = max(now - base[0], 1.0)
        dv, dt_ = self.value - base[1], self.times - base[2]
        return StatsSnapshot(dv, dv / elapsed, dv / dt_ if dt_ else 0.0)


class BrokerStatsManager:
    """The broker's statistics. Mirrors ``BrokerStatsManager`` + ``BrokerStats`` (day totals).

    Args:
        cluster_name: key of the ``BROKER_*`` items.

    Attributes:
        put_total / get_total: messages stored / handed to consumers since start.
        put_total_today_morning / put_total_yesterday_morning (and ``get_*``): totals at the last
            two local midnights (0 before the first), RocketMQ's ``msgPutTotalTodayMorning`` etc.
        boot_timestamp: ms since the epoch at construction.
    """

    def __init__(self, cluster_name: str = "DefaultCluster") -> None:
        self.cluster_name = cluster_name
        self.tables: dict[str, dict[str, StatsItem]] = {name: {} for name in STATS_NAMES}
        self.put_total = 0
        self.get_total = 0
        self.put_total_today_morning = 0
        self.put_total_yesterday_morning = 0
        self.get_total_today_morning = 0
        self.get_total_yesterday_morning = 0
        self.boot_timestamp = time.time_ns() // 1_000_000
        self._today = dt.date.today()
        # per-request fast path: one lookup finds both items of a topic (or topic and group)
        self._put_items: dict[str, tuple[StatsItem, StatsItem]] = {}
        self._get_items: dict[tuple[str, str], tuple[StatsItem, StatsItem]] = {}
        self._broker_put = self._item(BROKER_PUT_NUMS, cluster_name)
        self._broker_get = self._item(BROKER_GET_NUMS, cluster_name)

    def _item(self, name: str, key: str) -> StatsItem:
        table = self.tables[name]
        item = table.get(key)
        if item is None:
            item = table[key] = StatsItem(time.monotonic())
        return item

    def inc_put(self, topic: str, nums: int, size: int) -> None:
        """A send request stored ``nums`` messages of ``size`` bytes in ``topic``. O(1): one dict lookup."""
        items = self._put_items.get(topic)
        if items is None:
            items = self._put_items[topic] = (
                self._item(TOPIC_PUT_NUMS, topic),
                self._item(TOPIC_PUT_SIZE, topic),
            )
        n, b, broker = items[0], items[1], self._broker_put
        n.value += nums
        n.times += 1
        b.value += size
        b.times += 1
        broker.value += nums
        broker.times += 1
        self.put_total += nums

    def inc_get(self, group: str, topic: str, nums: int, size: int) -> None:
        """A pull request of ``group`` returned ``nums`` messages of ``size`` bytes from ``topic``. O(1)."""
        key = (topic, group)
        items = self._get_items.get(key)
        if items is None:
            name = f"{topic}@{group}"
            items = self._get_items[key] = (
                self._item(GROUP_GET_NUMS, name),
                self._item(GROUP_GET_SIZE, name),
            )
        n, b, broker = items[0], items[1], self._broker_get
        n.value += nums
        n.times += 1
        b.value += size
        b.times += 1
        broker.value += nums
        broker.times += 1
        self.get_total += nums

    def sample(self, now: float | None = None, today: dt.date | None = None) -> None:
        """Take the periodic samples (call every 10 s) and roll the day totals at midnight."""
        now = time.monotonic() if now is None else now
        for table in self.tables.values():
            for item in table.values():
                item.sample(now)
        today = dt.date.today() if today is None else today
        if today != self._today:
            self._today = today
            self.put_total_yesterday_morning = self.put_total_today_morning
            self.get_total_yesterday_morning = self.get_total_today_morning
            self.put_total_today_morning = self.put_total
            self.get_total_today_morning = self.get_total

    def get(self, name: str, key: str) -> StatsItem | None:
        """The item of ``name`` (one of :data:`STATS_NAMES`) and ``key``, or None.

        Raises:
            KeyError: unknown stats name.
        """
        return self.tables[name].get(key)

    def snapshot(self, name: str, key: str, window: float = MINUTE) -> StatsSnapshot:
        """The window's figures of an item (zeros for an unknown key)."""
        item = self.get(name, key)
        if item is None:
            return StatsSnapshot(0, 0.0, 0.0)
        return item.snapshot(window, time.monotonic())

    def stats_data(self, name: str, key: str) -> dict[str, dict[str, float | int]] | None:
        """VIEW_BROKER_STATS_DATA's body (``BrokerStatsData``): minute, hour and day snapshots.

        Returns None when the item does not exist.
        """
        item = self.get(name, key)
        if item is None:
            return None
        now = time.monotonic()
        return {
            "statsMinute": item.snapshot(MINUTE, now).to_json(),
            "statsHour": item.snapshot(HOUR, now).to_json(),
            "statsDay": item.snapshot(DAY, now).to_json(),
        }

    def tps_triplet(self, name: str) -> str:
        """``"tps10s tps60s tps600s"`` over every key of ``name`` (the runtime-info ``putTps`` form)."""
        now = time.monotonic()
        figures = []
        for span in (10.0, 60.0, 600.0):
            total = sum(item.rate(span, now) for item in self.tables[name].values())
            figures.append(f"{total:.2f}")
        return " ".join(figures)
