"""Commit a streaming query's progress to a RocketMQ consumer group (driver side).

Spark's checkpoint stays the source of truth. The group offsets are for visibility (lag in
GET_CONSUME_STATS, ``tidemq admin consumer-progress``, RocketMQ dashboards) and hand-over: a tidemq
or RocketMQ consumer of the group continues where Spark stopped. ``reader.commit`` cannot do this
(it lags one trigger and never runs for the last batch), so a ``StreamingQueryListener`` in the
driver writes each batch's ``endOffset`` (exclusive end = next offset to consume, RocketMQ's meaning)
with UPDATE_CONSUMER_OFFSET as soon as the batch is committed, the last batch included.

The listener bus runs behind the query, so the committer also holds the group's queue locks while
it writes a query's offsets and frees them once it has seen the query terminate: a query started
right after with ``startingOffsets=group``, or a consumer of the group, waits for that release and
starts from the last batch's offsets (``group_handoff.py``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from tidemq.admin.client import AdminClient
from tidemq.protocol.message import MessageQueue
from tidemq.spark.group_handoff import client_id, lock_queues, unlock_queues
from tidemq.spark.offsets import OffsetError, from_offset_json

log = logging.getLogger(__name__)


class OffsetCommitter(StreamingQueryListener):  # type: ignore[misc]
    """A StreamingQueryListener writing tidemq sources' end offsets to ``group``.

    Args:
        namesrv: name-server address(es).
        group: consumer group to commit to.
        topics: only commit offsets of these topics (default: every topic in the offsets).
        query_name: only listen to the query of this name (default: every query).

    Attributes:
        committed: the last offsets written, ``{MessageQueue: offset}``.
        lag: ``latestOffset - endOffset`` per queue at the last progress event.
        batches: number of progress events that led to a commit.
        errors: commit failures (logged, never raised into Spark).
    """

    def __init__(
        self, namesrv: str, group: str, *, topics: list[str] | None = None, query_name: str | None = None
    ) -> None:
        self.namesrv = namesrv
        self.group = group
        self.topics = set(topics) if topics else None
        self.query_name = query_name
        self.committed: dict[MessageQueue, int] = {}
        self.lag: dict[MessageQueue, int] = {}
        self.batches = 0
        self.errors: list[str] = []
        self._admin: AdminClient | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._cid = client_id("committer")
        self._held: set[MessageQueue] = set()
        """Queues of the group this committer holds locked (until the query terminates)."""

    def _offsets(self, text: str | None) -> dict[MessageQueue, int]:
        if not text:
            return {}
        try:
            offsets = from_offset_json(text)
        except OffsetError:
            return {}  # not a tidemq source
        return {mq: off for mq, off in offsets.items() if self.topics is None or mq.topic in self.topics}

    def onQueryStarted(self, event: Any) -> None:
        """Nothing to do."""

    def onQueryProgress(self, event: Any) -> None:
        """Write every tidemq source's ``endOffset`` to the group (only offsets that changed)."""
        progress = event.progress
        if self.query_name is not None and progress.name != self.query_name:
            return
        end: dict[MessageQueue, int] = {}
        latest: dict[MessageQueue, int] = {}
        for source in progress.sources:
            end.update(self._offsets(source.endOffset))
            latest.update(self._offsets(source.latestOffset))
        if not end:
            return
        with self._lock:
            changed = {mq: off for mq, off in end.items() if self.committed.get(mq) != off}
            try:
                if changed:
                    if self._admin is None:
                        self._admin = AdminClient(self.namesrv)
                    self._admin.update_consumer_offsets(self.group, changed)
                    self.committed.update(changed)
                    self.batches += 1
                if self._admin is not None:  # held (and renewed) until the query terminates
                    self._held |= lock_queues(self._admin, self.group, self._cid, end)
                self.lag = {mq: max(0, latest.get(mq, off) - off) for mq, off in end.items()}
            except Exception as exc:  # never break the query; the next batch retries
                self.errors.append(f"batch {progress.batchId}: {exc}")
                log.warning("tidemq offset committer: commit of batch %s failed: %s", progress.batchId, exc)
            self._changed.notify_all()

    def onQueryIdle(self, event: Any) -> None:
        """Nothing to do."""

    def onQueryTerminated(self, event: Any) -> None:
        """Release the group's queues: every offset of the query is written (the bus delivers a
        query's progress events before its termination). Connections stay open (see :meth:`close`)."""
        with self._lock:
            held, self._held = self._held, set()
            if held and self._admin is not None:
                try:
                    unlock_queues(self._admin, self.group, self._cid, held)
                except Exception as exc:  # never raise into Spark; the broker frees them in 60 s
                    log.warning("tidemq offset committer: releasing %s failed: %s", self.group, exc)

    def wait_for(self, offsets: dict[MessageQueue, int], timeout: float = 30.0) -> bool:
        """Block until every queue in ``offsets`` was committed at or past its offset; False on timeout."""
        with self._lock:
            return self._changed.wait_for(
                lambda: all(self.committed.get(mq, -1) >= off for mq, off in offsets.items()), timeout
            )

    def close(self) -> None:
        """Close the committer's connections."""
        with self._lock:
            if self._admin is not None:
                self._admin.close()
                self._admin = None


def attach_offset_committer(
    spark: Any,
    *,
    namesrv: str,
    group: str,
    topics: list[str] | None = None,
    query_name: str | None = None,
) -> OffsetCommitter:
    """Add an :class:`OffsetCommitter` to ``spark.streams``; returns it (remove it with
    ``spark.streams.removeListener(committer)``).

    Example::

        committer = attach_offset_committer(spark, namesrv="127.0.0.1:9876", group="flights-etl")
        spark.readStream.format("tidemq").option("namesrv", ...).option("group", "flights-etl") ...
    """
    committer = OffsetCommitter(namesrv, group, topics=topics, query_name=query_name)
    spark.streams.addListener(committer)
    return committer
