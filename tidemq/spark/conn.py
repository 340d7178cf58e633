"""Per-process connections of the Spark connector, and the executor-side pull loop.

Spark reuses its Python worker processes across tasks and micro-batches, so one background event
loop (:class:`~tidemq.remoting.loop.LoopThread`) and one :class:`~tidemq.remoting.RemotingClient`
per process serve every read and write of that process: connections to brokers survive between
batches. A forked child gets its own (the cache is keyed by pid).

:func:`read_queue_range` pulls ``[start, end)`` of one queue straight from its broker: large pulls,
no long polling (``suspendTimeoutMillis`` 0, no suspend flag), no commit flag (reading never moves a
group's offset), a window of pulls in flight (``pulls_in_flight``) while a body is decoded into Arrow.
The pulls go over a :class:`~tidemq.remoting.blocking.BlockingConnection`, a blocking connection the
task's own thread writes and reads (kept per process and broker between tasks): the answers are read
straight into the connection's receive buffer and their bodies decoded from there, with no event
loop, thread hand-off or copy in between (a third less CPU per message than the event loop's
connections, which the rest still use).
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tidemq.admin.client import AsyncAdminClient
from tidemq.client.api import ClientAPI, PullResult, PullStatus
from tidemq.client.consumer.pull_core import PullVerdict, QueuePull, run_pipelined
from tidemq.errors import RemotingError
from tidemq.protocol import record_layout
from tidemq.protocol.filter import SUB_ALL
from tidemq.protocol.headers import PullSysFlag
from tidemq.protocol.message import MessageQueue
from tidemq.remoting.blocking import BlockingConnection
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
_settled: set[int] = set()


def _settle() -> None:
    """Freeze, once per process after its first read, the objects alive then (see
    :func:`connections`): the modules the first decode imported lazily too (``pyarrow.compute``,
    and pandas, which pyarrow imports when it converts a Python object: 34,000 objects, 12 ms of
    every later ``gc.collect()``)."""
    pid = os.getpid()
    if pid not in _settled:
        _settled.add(pid)
        gc.freeze()


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
    expression_type: str = "TAG"  # or "SQL92": sub_expression is then filtered by the broker only
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


def _pull_socket(conns: ProcessConnections, addr: str, timeout: float) -> BlockingConnection:
    """An idle pull connection to ``addr`` from this process's pool, else a new one (connected within
    ``timeout`` s, at most 3 s as the event loop's connections).

    Raises:
        RemotingConnectError: cannot connect.
    """
    with _lock:
        pool: dict[str, list[BlockingConnection]] = conns.extras.setdefault("pull_sockets", {})
        free = pool.get(addr)
        while free:
            sock = free.pop()
            if sock.idle:
                return sock
    return BlockingConnection.connect(addr, timeout)


def _release(conns: ProcessConnections, sock: BlockingConnection) -> None:
    """Back to the pool when idle (every answer read), else closed."""
    if not sock.idle:
        sock.close()
        return
    with _lock:
        conns.extras.setdefault("pull_sockets", {}).setdefault(sock.addr, []).append(sock)


def read_queue_range(rng: QueueRange, settings: ReadSettings) -> Iterator[pa.RecordBatch]:
    """Yield the messages of ``rng`` as RecordBatches (:data:`tidemq.spark.arrow.ARROW_SCHEMA`).

    Raises:
        DataLossError: offsets of the range were deleted or truncated and ``fail_on_data_loss``.
        BrokerError / RemotingError: the broker refused or could not be reached (a pull that fails
            on the transport is sent again once, to the broker's address resolved anew).
    """
    if rng.size <= 0:
        return
    yield from _RangeReader(rng, settings).read()


class _RangeReader:
    """The pulls of one :class:`QueueRange` on one
    :class:`~tidemq.remoting.blocking.BlockingConnection`, run by the pull kernel: the range is a
    bounded :class:`~tidemq.client.consumer.pull_core.QueuePull` (``pullsInFlight`` deep, pulls of
    ``pullBatchSize``) and :func:`~tidemq.client.consumer.pull_core.run_pipelined` its loop, so the
    broker always has a pull queued while this thread decodes, an answer is used only when it starts
    exactly where the previous one ended, and the kernel says which offsets a short answer shows lost
    (data loss: raised or logged, ``failOnDataLoss``). A transport failure is retried once on a new
    connection to the broker's address resolved again; a second one before any answer raises."""

    def __init__(self, rng: QueueRange, settings: ReadSettings) -> None:
        self.rng, self.settings = rng, settings
        self.conns = connections()
        self.expression = settings.sub_expression or SUB_ALL
        self.builder = RecordBatchBuilder(
            rng.mq.broker_name,
            tag_predicate(self.expression) if settings.expression_type == "TAG" else None,
            include_properties=settings.include_properties,
            columns=settings.columns,
        )
        self.addr = rng.broker_addr
        self.timeout = settings.pull_timeout
        self.queue: QueuePull[int] = QueuePull(  # tokens: the pulls' opaques
            rng.mq, rng.start, end=rng.end, depth=settings.pulls_in_flight, step=settings.pull_batch_size
        )
        self.sock: BlockingConnection | None = None

    def _send(self, offset: int) -> int:
        """Write the pull at ``offset``; its opaque."""
        rng, settings = self.rng, self.settings
        pull = self.conns.api.build_pull_message_request(
            consumer_group=settings.group,
            mq=rng.mq,
            queue_offset=offset,
            max_msg_nums=min(settings.pull_batch_size, rng.end - offset),
            sys_flag=_READ_FLAG,
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription=self.expression,
            sub_version=0,
            expression_type=settings.expression_type,
        )
        assert self.sock is not None
        self.sock.send([pull], time.monotonic() + self.timeout)
        return pull.opaque

    def _receive(self, opaque: int, offset: int) -> tuple[PullResult, memoryview]:
        """The answer to the pull ``opaque`` at ``offset``: its result (messages not decoded) and body."""
        assert self.sock is not None
        response, body = self.sock.answer(opaque, time.monotonic() + self.timeout)
        return ClientAPI.parse_pull_message_response(response, offset, self.addr), body

    def _skip(self, opaque: int) -> None:
        """Read past the answer to a pull nobody will use."""
        assert self.sock is not None
        self.sock.answer(opaque, time.monotonic() + self.timeout)

    def _connect(self, resolve: bool) -> None:
        """A connection from this process's pool (the broker's address resolved again if
        ``resolve``); the pulls in flight on the previous one are forgotten."""
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        self.queue.clear()
        if resolve or not self.addr:
            mq, namesrv = self.rng.mq, self.settings.namesrv
            resolving = self.conns.admin(namesrv).broker_addr(mq.broker_name, topic=mq.topic)
            self.addr = self.conns.loop.run(resolving, self.timeout * 3)
        self.sock = _pull_socket(self.conns, self.addr, self.timeout)

    def _lost(self, result: PullResult) -> None:
        """Report the offsets the kernel found lost (:attr:`QueuePull.lost`) after ``result``."""
        lost_from, lost_to = self.queue.lost
        if result.pull_status is PullStatus.OFFSET_ILLEGAL and lost_from < result.min_offset:
            reason = f"the queue's min offset is now {result.min_offset}"
        else:  # NO_NEW_MSG or OFFSET_ILLEGAL above the max: the queue is shorter than planned
            reason = f"the queue's max offset is {result.max_offset}, below the range's end"
        _data_loss(self.rng, lost_from, lost_to, reason, self.settings)

    def read(self) -> Iterator[pa.RecordBatch]:
        """The range's RecordBatches (one per pull body, up to ``pullBatchSize`` rows)."""
        q, builder, end = self.queue, self.builder, self.rng.end
        retried = False
        try:
            while not q.done:
                try:
                    if self.sock is None or self.sock.closed:
                        self._connect(resolve=retried)  # the broker may have moved: resolve again
                    for verdict, result, body in run_pipelined(q, self._send, self._receive, self._skip):
                        retried = False
                        if verdict is PullVerdict.LOST:
                            self._lost(result)
                        elif verdict is PullVerdict.FOUND and body:
                            builder.add_body(body, end)
                        del body  # the connection reuses its buffer once nothing refers to the body
                        batch = builder.flush()
                        if batch is not None:
                            yield batch
                            del batch  # (a batch may share memory with the body)
                except RemotingError:
                    if retried:
                        raise
                    retried = True
                    if self.sock is not None:
                        self.sock.close()
        finally:
            if self.sock is not None:
                if q.window:  # left early (an error, or the consumer stopped reading): answers still due
                    self.sock.close()
                else:
                    _release(self.conns, self.sock)
        _settle()


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
