"""Per-process connections of the Spark connector, and the executor-side pull loop.

Spark reuses its Python worker processes across tasks and micro-batches, so one background event
loop (:class:`~tidemq.remoting.loop.LoopThread`) and one :class:`~tidemq.remoting.RemotingClient`
per process serve every read and write of that process: connections to brokers survive between
batches. A forked child gets its own (the cache is keyed by pid).

:func:`read_queue_range` pulls ``[start, end)`` of one queue straight from its broker: large pulls,
no long polling (``suspendTimeoutMillis`` 0, no suspend flag), no commit flag (reading never moves a
group's offset), a window of pulls in flight (``pulls_in_flight``) while a body is decoded into Arrow.
"""

from __future__ import annotations

import collections
import concurrent.futures
import gc
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tidemq.admin.client import AsyncAdminClient
from tidemq.client.api import ClientAPI, PullResult, PullStatus
from tidemq.errors import RemotingError
from tidemq.protocol import record_layout
from tidemq.protocol.filter import SUB_ALL
from tidemq.protocol.headers import PullSysFlag
from tidemq.protocol.message import MessageQueue
from tidemq.remoting.client import RemotingClient
from tidemq.remoting.loop import LoopThread
from tidemq.spark.arrow import RecordBatchBuilder, tag_predicate
from tidemq.spark.offsets import QueueRange

log = logging.getLogger(__name__)

_READ_FLAG = PullSysFlag.build_sys_flag(
    commit_offset=False, suspend=False, subscription=True, class_filter=False
)
"""Pull flags of the connector: never commit, never long-poll."""


class DataLossError(RuntimeError):
    """Offsets a query needs are gone from the broker (retention, truncation) and failOnDataLoss is true."""


@dataclass
class ProcessConnections:
    """The loop thread and transport shared by every task of this worker process."""

    loop: LoopThread
    remoting: RemotingClient
    api: ClientAPI
    admins: dict[str, AsyncAdminClient] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)

    def admin(self, namesrv: str) -> AsyncAdminClient:
        """An :class:`AsyncAdminClient` for ``namesrv`` sharing this process's transport."""
        client = self.admins.get(namesrv)
        if client is None:
            client = AsyncAdminClient(namesrv, remoting=self.remoting)
            self.admins[namesrv] = client
        return client


_lock = threading.Lock()
_cache: dict[int, ProcessConnections] = {}
_frozen: set[int] = set()


def connections() -> ProcessConnections:
    """This process's :class:`ProcessConnections`, created on first use."""
    pid = os.getpid()
    with _lock:
        conns = _cache.get(pid)
        if conns is None or not conns.loop.is_running:
            loop = LoopThread(f"tidemq-spark-{pid}")
            remoting = RemotingClient()
            conns = ProcessConnections(loop, remoting, ClientAPI(remoting))
            _cache.clear()
            _cache[pid] = conns
            if pid not in _frozen:
                # PySpark's daemon runs a full gc.collect() after every task of a reused Python
                # worker; it walks every object the process holds (pyspark, pyarrow, numpy and
                # tidemq's modules: 17-37 ms a task). The objects alive now live as long as the
                # process; freezing them takes them out of every later collection (0.3 ms).
                _frozen.add(pid)
                gc.freeze()
        return conns


@dataclass(frozen=True, slots=True)
class ReadSettings:
    """What an executor needs besides the range (picklable; built on the driver)."""

    namesrv: str
    group: str
    sub_expression: str = SUB_ALL
    fail_on_data_loss: bool = True
    pull_batch_size: int = 8192
    pull_timeout: float = 10.0
    include_properties: bool = True
    columns: tuple[str, ...] | None = None
    pulls_in_flight: int = 2


def _data_loss(rng: QueueRange, lost_from: int, lost_to: int, reason: str, settings: ReadSettings) -> None:
    text = (
        f"data loss in queue {rng.mq.topic}/{rng.mq.broker_name}:{rng.mq.queue_id}: offsets "
        f"[{lost_from}, {lost_to}) of the requested [{rng.start}, {rng.end}) are no longer available "
        f"({reason})"
    )
    if settings.fail_on_data_loss:
        raise DataLossError(
            text + ". Set failOnDataLoss=false to skip to the queue's min offset instead of failing."
        )
    log.warning("%s; skipping them because failOnDataLoss=false", text)


def read_queue_range(rng: QueueRange, settings: ReadSettings) -> Iterator[pa.RecordBatch]:
    """Yield the messages of ``rng`` as RecordBatches (:data:`tidemq.spark.arrow.ARROW_SCHEMA`).

    Raises:
        DataLossError: offsets of the range were deleted or truncated and ``fail_on_data_loss``.
        BrokerError / RemotingError: the broker refused or could not be reached.
    """
    if rng.size <= 0:
        return
    conns = connections()
    expression = settings.sub_expression or SUB_ALL
    builder = RecordBatchBuilder(
        rng.mq.broker_name,
        tag_predicate(expression),
        include_properties=settings.include_properties,
        columns=settings.columns,
    )
    addr = rng.broker_addr

    async def resolve_addr() -> str:
        return await conns.admin(settings.namesrv).broker_addr(rng.mq.broker_name, topic=rng.mq.topic)

    async def pull_from(broker_addr: str, offset: int) -> PullResult:
        return await conns.api.pull_message(
            broker_addr,
            consumer_group=settings.group,
            mq=rng.mq,
            queue_offset=offset,
            max_msg_nums=min(settings.pull_batch_size, rng.end - offset),
            sys_flag=_READ_FLAG,
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription=expression,
            sub_version=0,
            timeout=settings.pull_timeout,
        )

    async def pull(offset: int) -> PullResult:
        nonlocal addr
        if not addr:
            addr = await resolve_addr()
        try:
            return await pull_from(addr, offset)
        except RemotingError:
            # the broker may have moved: resolve its address again once
            addr = await resolve_addr()
            return await pull_from(addr, offset)

    # A window of pulls in flight: the next ones start where the previous would end if it returns a
    # full batch (the usual case), so the broker always has a request queued while this process
    # decodes. A result is used only when it starts exactly where the previous one ended; after a
    # short answer (tag filter, byte cap, data loss) the window is dropped and refilled from there.
    window: collections.deque[tuple[int, concurrent.futures.Future[PullResult]]] = collections.deque()
    depth = max(1, settings.pulls_in_flight)
    step = settings.pull_batch_size

    def fill(after: int) -> None:
        while len(window) < depth and after < rng.end:
            window.append((after, conns.loop.submit(pull(after))))
            after += step

    def drop_window() -> None:
        while window:
            window.popleft()[1].cancel()

    offset = rng.start
    fill(offset)
    try:
        while offset < rng.end:
            if not window or window[0][0] != offset:
                drop_window()
                fill(offset)
            _, pending = window.popleft()
            result = pending.result(settings.pull_timeout * 3)
            status = result.pull_status
            body: bytes = b""
            if status is PullStatus.FOUND:
                body = result.body
                nxt = max(result.next_begin_offset, offset + 1)
            elif status is PullStatus.NO_MATCHED_MSG:
                nxt = (
                    max(result.next_begin_offset, offset + 1)
                    if result.next_begin_offset > offset
                    else rng.end
                )
            elif status is PullStatus.OFFSET_ILLEGAL and offset < result.min_offset:
                _data_loss(
                    rng,
                    offset,
                    min(result.min_offset, rng.end),
                    f"the queue's min offset is now {result.min_offset}",
                    settings,
                )
                nxt = min(result.min_offset, rng.end)
            else:  # NO_NEW_MSG or OFFSET_ILLEGAL above the max: the queue is shorter than planned
                _data_loss(
                    rng,
                    offset,
                    rng.end,
                    f"the queue's max offset is {result.max_offset}, below the range's end",
                    settings,
                )
                nxt = rng.end
            if window and window[0][0] != nxt:
                drop_window()
            fill(window[-1][0] + step if window else nxt)  # keep the broker busy while this body is decoded
            if body:
                builder.add_body(body, rng.end)  # one RecordBatch per pull body (up to pullBatchSize rows)
                batch = builder.flush()
                if batch is not None:
                    yield batch
            offset = nxt
    finally:
        drop_window()
    batch = builder.flush()
    if batch is not None:
        yield batch


def store_timestamp_at(mq: MessageQueue, broker_addr: str, offset: int, settings: ReadSettings) -> int | None:
    """STORETIMESTAMP (ms) of the message at ``offset`` of ``mq`` (one pull of one message), or None
    when the broker has no message there (deleted, or at/after the queue's end).

    A tag filter does not apply: any message counts.
    """
    conns = connections()

    async def pull() -> PullResult:
        return await conns.api.pull_message(
            broker_addr,
            consumer_group=settings.group,
            mq=mq,
            queue_offset=offset,
            max_msg_nums=1,
            sys_flag=_READ_FLAG,
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription=SUB_ALL,
            sub_version=0,
            timeout=settings.pull_timeout,
        )

    result = conns.loop.run(pull(), settings.pull_timeout * 3)
    if result.pull_status is not PullStatus.FOUND or len(result.body) < record_layout.POS_BORN_HOST + 8:
        return None
    body = result.body
    sys_flag = record_layout.HEAD.unpack_from(body, 0)[7]
    queue_offset = record_layout.HEAD.unpack_from(body, 0)[5]
    if queue_offset != offset:
        return None
    pos = record_layout.store_timestamp_position(sys_flag)
    return int.from_bytes(body[pos : pos + 8], "big", signed=True)
