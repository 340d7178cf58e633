"""Commit-log retention that never costs an unconsumed or unexpired message unless told to.

Mirrors the decisions of RocketMQ's ``CleanCommitLogService`` with one difference: RocketMQ deletes
every expired segment (``fileReservedTime``, 72 h) at ``deleteWhen`` or when the disk is above
``diskMaxUsedSpaceRatio``, consumed or not, and unexpired ones too above
``diskSpaceCleanForciblyRatio`` (``cleanFileForciblyEnable`` is on by default there). tidemq deletes a
segment, oldest first and never the one being written, only when

* it has expired **and** every consumer group has consumed every message in it (the consumers'
  progress comes from :attr:`CommitLogRetention.floor_providers`: committed offsets of the
  subscribed groups, the delay-level service's progress, ...), or
* the operator opted in (``clean_file_forcibly_enable`` in the store config, or one forced run from
  ``tidemq admin deleteExpiredCommitLog --force``): then expired segments go whether consumed or
  not, and unexpired ones while the disk is above ``disk_space_clean_forcibly_ratio``.

Deletion stops at the first segment that must stay. A deletion that drops messages some group has
not consumed is one ERROR line naming topics, queues, offset ranges and groups, and adds to
:attr:`CommitLogRetention.unconsumed_deleted` (the broker's ``/metrics`` counter).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidemq.store.consume_queue import ConsumeQueue
from tidemq.store.disk import disk_usage
from tidemq.store.dispatcher import TopicQueueKey
from tidemq.store.mapped_file import MappedFile

if TYPE_CHECKING:
    from tidemq.store.message_store import MessageStore

log = logging.getLogger(__name__)

ConsumerFloors = Mapping[TopicQueueKey, Mapping[str, int]]
"""``{(topic, queue_id): {consumer: next queue offset it will consume}}``."""
FloorProvider = Callable[[], ConsumerFloors]
"""Tells retention how far consumers got; called on the cleaning thread (make it thread-safe)."""
OffsetProvider = Callable[[], int | None]
"""The lowest commit-log offset a service still needs (None: nothing); for services that keep
their own references into the commit log rather than a consume-queue offset (a timer log, say)."""


@dataclass(frozen=True, slots=True)
class LostRange:
    """Messages of one queue a forced deletion removed before some consumer had them.

    Attributes:
        topic, queue_id: the queue.
        first, last: queue offsets, inclusive.
        consumers: who had not consumed them (groups, ``delay level N``...), sorted.
    """

    topic: str
    queue_id: int
    first: int
    last: int
    consumers: tuple[str, ...]

    @property
    def count(self) -> int:
        """How many messages the range holds (``last - first + 1``)."""
        return self.last - self.first + 1

    def describe(self) -> str:
        """One line for the log: topic, queue, offsets, count and the consumers behind."""
        return (
            f"{self.topic} queue {self.queue_id} offsets {self.first}..{self.last} "
            f"({self.count} message(s); consumers {', '.join(self.consumers)})"
        )


def first_offset_at_or_after(cq: ConsumeQueue, low: int, high: int, phy: int) -> int:
    """The smallest queue offset in ``[low, high)`` whose commit-log offset is >= ``phy`` (``high`` if
    none): a binary search, as entries are in commit-log order."""
    while low < high:
        mid = (low + high) // 2
        unit = cq.get_unit(mid)
        if unit is not None and unit.commit_log_offset >= phy:
            high = mid
        else:
            low = mid + 1
    return low


class CommitLogRetention:
    """Decides which commit-log segments may go, deletes them, reports forced losses, and cleans the
    consume queues and the index after them (RocketMQ's ``CleanCommitLogService`` and
    ``CleanConsumeQueueService``).

    Args:
        store: the owning store (its config, commit log, consume queues, index and disk guard are
            read at each run).

    Attributes:
        floor_providers: where consumers' progress comes from (the broker adds the committed offsets
            of subscribed groups and the delay-level service's progress).
        offset_providers: ``{name: provider}`` of services that still need the commit log from some
            offset on; no segment ending after it goes unforced (a forced deletion names them).
        unconsumed_deleted: messages deleted before a consumer had them (forced runs only).
    """

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.floor_providers: list[FloorProvider] = []
        self.offset_providers: dict[str, OffsetProvider] = {}
        self.unconsumed_deleted = 0

    def consumer_floors(self) -> dict[TopicQueueKey, dict[str, int]]:
        """Every provider's floors merged: ``{(topic, queue_id): {consumer: offset}}``."""
        merged: dict[TopicQueueKey, dict[str, int]] = {}
        for provider in list(self.floor_providers):  # one failing: the run fails, nothing goes
            for key, consumers in provider().items():
                merged.setdefault(key, {}).update(consumers)
        return merged

    def protected_offset(self, floors: ConsumerFloors) -> int:
        """The commit-log offset of the oldest message some consumer has not consumed (the commit
        log's max offset when there is none): no segment ending after it goes unforced."""
        store = self._store
        protected = store.commit_log.get_max_offset()
        for key, consumers in floors.items():
            cq = store.consume_queue_table.get(key)
            if cq is None or not consumers:
                continue
            floor = max(min(consumers.values()), cq.get_min_offset_in_queue())
            if floor >= cq.get_max_offset_in_queue():
                continue
            unit = cq.get_unit(floor)
            if unit is not None:
                protected = min(protected, unit.commit_log_offset)
        for needed in self.needed_offsets().values():
            protected = min(protected, needed)
        return protected

    def needed_offsets(self) -> dict[str, int]:
        """``{service: lowest commit-log offset it still needs}`` from :attr:`offset_providers`."""
        out: dict[str, int] = {}
        for name, provider in list(self.offset_providers.items()):
            needed = provider()
            if needed is not None:
                out[name] = needed
        return out

    def lost_ranges(self, floors: ConsumerFloors, phy_end: int) -> list[LostRange]:
        """What deleting the commit log below ``phy_end`` takes from consumers that have not had it."""
        out: list[LostRange] = []
        for key, consumers in sorted(floors.items()):
            cq = self._store.consume_queue_table.get(key)
            if cq is None or not consumers:
                continue
            low = max(min(consumers.values()), cq.get_min_offset_in_queue())
            high = cq.get_max_offset_in_queue()
            if low >= high:
                continue
            end = first_offset_at_or_after(cq, low, high, phy_end)
            if end > low:
                behind = tuple(sorted(c for c, off in consumers.items() if off < end))
                out.append(LostRange(key[0], key[1], low, end - 1, behind))
        return out

    def disk_used_ratio(self) -> float:
        """Percent used of the commit log's file system, as ``df`` computes it (``used = blocks -
        bfree``, ``used / (used + bavail)``: ``tidemq/store/disk.py``); 0.0 if unknown. Retention
        reads it here (tests may replace it); the put path's disk guard reads statvfs itself."""
        try:
            return disk_usage(self._store.config.commit_log_dir).percent
        except OSError:
            return 0.0

    def delete_expired_files(
        self, force: bool = False, *, scheduled: bool = True, now_ms: int | None = None
    ) -> int:
        """One retention pass (``CleanCommitLogService.deleteExpiredFiles``); returns the number of
        commit-log segments deleted (never the one being written), then moves the consume queues'
        min offsets (:meth:`clean_expired_consume_queue`).

        Unforced, a segment goes only when it is older than ``file_reserved_time`` hours at
        ``now_ms`` (default: the store's clock) and every consumer known to :attr:`floor_providers`
        and :attr:`offset_providers` has consumed it. ``force`` (or ``clean_file_forcibly_enable``)
        lets expired segments go whoever still needs them and unexpired ones while the disk is above
        ``disk_space_clean_forcibly_ratio``; a loss is one ERROR line. ``scheduled`` False: only when
        the disk is above ``disk_max_used_space_ratio`` (the broker's periodic check outside
        ``delete_when``); True: it is a ``delete_when`` hour or an operator asked (expired, consumed
        segments go even when the disk has room).
        """
        deleted = self._delete_segments(scheduled=scheduled, force=force, now_ms=now_ms)
        if deleted:
            self.clean_expired_consume_queue()
            store = self._store
            store.disk_guard.check(store.commit_log.get_max_offset())
        return deleted

    def clean_expired_consume_queue(self) -> None:
        """Drop consume-queue and index files pointing only below the commit log's min offset; move
        the queues' min offsets (``CleanConsumeQueueService``)."""
        store = self._store
        queues = store.consume_queues.settled_queues()
        min_phy = store.commit_log.get_min_offset()
        for cq in queues:
            cq.delete_expired_file(min_phy)
        if store.index_service is not None:
            store.index_service.delete_expired_file(min_phy)

    def _delete_segments(self, *, scheduled: bool, force: bool, now_ms: int | None) -> int:
        """The segments part of :meth:`delete_expired_files`; returns how many went."""
        store = self._store
        cfg = store.config
        percent = self.disk_used_ratio()
        if not (scheduled or force or percent > cfg.disk_max_used_space_ratio):
            return 0
        now = store.clock_ms() if now_ms is None else now_ms
        expired_ms = cfg.file_reserved_time * 3_600_000
        forcible = force or cfg.clean_file_forcibly_enable
        files = store.commit_log.queue.files[:-1]
        if not files or (not forcible and now < files[0].last_modified_ms() + expired_ms):
            return 0  # nothing expired: no need to ask the consumers (one read per queue)
        floors = self.consumer_floors()
        protected = self.protected_offset(floors)
        deleted: list[MappedFile] = []
        lost: list[LostRange] = []
        services: dict[str, int] = {}
        for mf in files:
            end = mf.file_from_offset + mf.file_size
            expired = now >= mf.last_modified_ms() + expired_ms
            consumed = end <= protected
            if not (expired and consumed):
                if not forcible:
                    break
                if not expired and percent <= cfg.disk_space_clean_forcibly_ratio:
                    break
                if not consumed:
                    lost = self.lost_ranges(floors, end)  # cumulative: everything below ``end``
                    services = {n: o for n, o in self.needed_offsets().items() if o < end}
            store.commit_log.queue.delete_files([mf])
            deleted.append(mf)
            percent = self.disk_used_ratio()
        if deleted:
            self._report(deleted, lost, services, force)
        return len(deleted)

    def _report(
        self, deleted: list[MappedFile], lost: list[LostRange], services: dict[str, int], force: bool
    ) -> None:
        first, last = deleted[0], deleted[-1]
        span = f"{first.file_from_offset}..{last.file_from_offset + last.file_size}"
        end = last.file_from_offset + last.file_size
        needed = [
            f"{name} still needed commit-log offsets {o}..{end}" for name, o in sorted(services.items())
        ]
        if not lost and not needed:
            log.info(
                "deleted %d commit-log segment(s) (offsets %s) in %s: expired and consumed",
                len(deleted),
                span,
                self._store.root,
            )
            return
        count = sum(r.count for r in lost)
        self.unconsumed_deleted += count
        why = "tidemq admin deleteExpiredCommitLog --force" if force else "cleanFileForciblyEnable=true"
        log.error(
            "retention deleted %d commit-log segment(s) (offsets %s) holding %d message(s) not yet "
            "consumed (%s): %s",
            len(deleted),
            span,
            count,
            why,
            "; ".join([*(r.describe() for r in lost), *needed]),
        )
