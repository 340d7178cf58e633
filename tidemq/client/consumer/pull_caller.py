"""What the blocking ``PullConsumer`` does on its caller's thread: poll, commit, and pull along.

Holds :class:`CallerSide`, owned by :class:`~tidemq.client.consumer.pull.PullConsumer` over its
:class:`~tidemq.client.consumer.pull.AsyncPullConsumer`, and :class:`CallerPull`, a pull it sent.
They keep the client loop's thread out of the steady state: ``poll`` takes from the consumer's
buffer and decodes on the caller's thread, and ``commit_sync`` sends the offsets on the caller's own
connection, decodes the next batch while the broker answers, and sends the next pull of a queue with
room and a known backlog along with it (on a second connection; its answer is read by the next
commit). The loop's pull tasks still own every queue (see ``pull.py``).

Mirrors the caller-thread halves of RocketMQ's ``DefaultLitePullConsumerImpl.poll`` and
``commitSync`` (both ``synchronized`` there); the pulls sent along a commit have no RocketMQ
counterpart (its pulls all run on the ``PullTaskImpl`` threads).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemq.client.api import ClientAPI, PullResult
from tidemq.client.consumer.failure_log import FailureLog
from tidemq.client.consumer.pull_api import process_pull_result
from tidemq.client.consumer.pull_core import PullRequest
from tidemq.client.consumer.pull_table import caller_pull
from tidemq.client.direct import DirectConnection, DirectPool
from tidemq.errors import ClientError, RemotingError, TideMQError
from tidemq.protocol.body import SubscriptionData
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import MessageExt, MessageQueue

if TYPE_CHECKING:
    from tidemq.client.consumer.lite_poll import PulledBatch
    from tidemq.client.consumer.pull import AsyncPullConsumer

__all__ = ["CallerPull", "CallerSide"]

log = logging.getLogger(__name__)

_AlongPull = tuple[RemotingCommand, Callable[[RemotingCommand | None], object]]
"""A request a committer writes on its pull connection, with the callback for its answer."""


class CallerPull:
    """A PULL_MESSAGE a blocking ``commit_sync`` sent with its offsets (on its own connection) and
    whose answer is not handled yet: the token of its PullRequest's in-flight entry
    (``QueuePull.window``) until then."""

    __slots__ = ("addr", "conn", "offset", "pr", "started", "sub")

    def __init__(
        self, pr: PullRequest, sub: SubscriptionData | None, offset: int, addr: str, conn: DirectConnection
    ) -> None:
        self.pr = pr
        self.sub = sub
        self.offset = offset
        self.addr = addr
        self.conn = conn
        self.started = time.monotonic()


class CallerSide:
    """The blocking ``poll`` / ``commit_sync`` of a :class:`PullConsumer`, run on the caller's thread.

    Args:
        core: the consumer whose buffer, ProcessQueues and offsets these work on (under its
            ``table.lock``, as its loop does).
    """

    def __init__(self, core: AsyncPullConsumer) -> None:
        self._core = core
        self._commit_failures = FailureLog(log, f"persisting offsets of {core.group_name}")
        self._take_lock = threading.Lock()
        """Serialises the blocking pollers' take + decode + bookkeeping (RocketMQ's ``poll`` is
        synchronized): a queue's batches are counted as consumed in the order they were pulled."""
        self._predecoded: tuple[PulledBatch, list[MessageExt] | None] | None = None
        """The cache's next batch, taken and decoded by :meth:`commit` while it waited for the broker
        (under :attr:`_take_lock`); the next :meth:`poll` returns it."""

    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """``AsyncPullConsumer.poll`` for another thread than the loop's: takes from the cache and
        does the offset bookkeeping on the calling thread (under the core's lock; no hop to the
        loop). ``timeout`` in seconds (default ``poll_timeout``); [] on timeout. A due auto-commit is
        handed to the loop."""
        core = self._core
        timeout = core.config.poll_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            with self._take_lock:
                pre, self._predecoded = self._predecoded, None
                item: PulledBatch | None
                decoded: list[MessageExt] | None
                if pre is not None:
                    item, decoded = pre
                else:
                    item, decoded = core.buffer.cache.take_blocking(deadline - time.monotonic()), None
                if item is None:
                    self._auto_commit_soon()
                    return []
                msgs = core.buffer.consumed(item, decoded)
            if msgs:
                self._auto_commit_soon()
                return msgs

    def _auto_commit_soon(self) -> None:
        """From a poller's thread: start a commit on the loop when auto-commit is due."""
        core = self._core
        if core.committer.take_auto_commit():
            try:
                core.instance.loop.call_soon_threadsafe(core.committer.spawn_commit)
            except (RuntimeError, ClientError):  # the loop is closed or the consumer stopped
                pass

    def _predecode(self) -> None:
        """While a blocking commit waits for the broker: take the cache's next batch and decode it
        for the next :meth:`poll` (not counted as consumed until that poll returns it). Skipped
        when a poller is busy or a batch is already waiting; never raises (a batch that does not
        decode is left for the poll to decode again and report)."""
        if self._predecoded is not None or not self._take_lock.acquire(blocking=False):
            return
        try:
            if self._predecoded is None and (item := self._core.buffer.cache.take_nowait()) is not None:
                mq, pq, result, sub, _, _ = item
                msgs = None
                if not pq.dropped:
                    try:
                        msgs = process_pull_result(mq, result, sub).msg_found_list
                    except Exception:  # ProtocolError...: poll() decodes it again and raises
                        msgs = None
                self._predecoded = (item, msgs)
        finally:
            self._take_lock.release()

    def commit(self, pool: DirectPool) -> list[tuple[MessageQueue, int]]:
        """``AsyncPullConsumer.commit_sync`` on the calling thread (not the loop's): the changed
        offsets go over ``pool``'s blocking connection to each broker, one write per broker (the
        requests are pipelined). Failures are logged and leave the queue to the next commit, as
        ``commit_sync``. While the broker answers, the next cached batch is decoded for the next
        poll (:meth:`_predecode`); the call still returns only after the broker's answers.
        Returns what must still go through the loop (a broker whose address is not known yet, or
        whose connection another thread is using)."""
        core = self._core
        core.committer.last_commit = time.monotonic()
        changed = core.committer.changed_offsets()
        if not changed:
            return []
        inst = core.instance
        api = inst.api
        table = core.pulls.table
        by_addr: dict[str, list[tuple[MessageQueue, int]]] = {}
        rest: list[tuple[MessageQueue, int]] = []
        for mq, off in changed:
            addr = inst.find_broker_address_in_admin(mq.broker_name)
            if addr is None:
                rest.append((mq, off))
            else:
                by_addr.setdefault(addr, []).append((mq, off))
        for addr, items in by_addr.items():
            conn = pool.try_acquire(addr)
            if conn is None:
                rest.extend(items)
                continue
            pull_conn = pool.try_acquire(addr, lane=1)
            try:
                requests = [
                    api.build_update_consumer_offset_request(core.group_name, mq, off) for mq, off in items
                ]
                while_waiting: Callable[[], None] = self._predecode
                if pull_conn is not None:
                    pull_conn.read_pending()  # the answers to the pulls sent by earlier commits
                    along = self._pull_along(addr, pull_conn)
                    if along:
                        while_waiting = functools.partial(self._pull_and_predecode, pull_conn, along)
                responses = conn.invoke_many(requests, core.config.mq_client_api_timeout, while_waiting)
            except (RemotingError, ClientError) as exc:
                for name in {mq.broker_name for mq, _ in items}:
                    self._commit_failures.failed(name, exc)
                continue
            finally:
                conn.lock.release()
                if pull_conn is not None:
                    pull_conn.lock.release()
            for (mq, off), response in zip(items, responses, strict=True):
                try:
                    api.check_update_consumer_offset_response(response, addr)
                except TideMQError as exc:
                    self._commit_failures.failed(mq.broker_name, exc)
                    continue
                self._commit_failures.succeeded(mq.broker_name)
                with table.lock:
                    table.committed[mq] = off
        return rest

    def _pull_and_predecode(self, conn: DirectConnection, along: list[_AlongPull]) -> None:
        """While a blocking commit waits for its answer: write the pull chosen by
        :meth:`_pull_along` on ``conn``, then :meth:`_predecode`."""
        conn.send(along, self._core.config.mq_client_api_timeout)
        self._predecode()

    def _pull_along(self, addr: str, conn: DirectConnection) -> list[_AlongPull]:
        """The next pull a blocking commit to ``addr`` sends right after its offsets, on ``conn``
        (a second connection to the broker: the broker answers the commit without waiting for the
        pull's work; the answer is read by the next commit, see :meth:`_caller_pulled`): of the
        queue with the fewest cached messages among those the loop would pull now (under flow
        control's thresholds, a backlog known on the broker, no pull in flight, pulled from this
        master). Queues without a known backlog stay with the loop's long polling. The request is
        the pull task's (:meth:`LitePulls.pull_fields`). The pull then costs no wake-up of the loop
        thread and no round trip of its own."""
        core = self._core
        cfg = core.config
        if len(core.buffer.cache) * cfg.pull_batch_size > cfg.pull_threshold_for_all:
            return []
        table, limits = core.pulls.table, core.pulls.limits
        with table.lock:
            best: PullRequest | None = None
            for pr in table.requests.values():
                pq = pr.process_queue
                if (  # the loop's flow limits (FlowLimits.check, written out: a call per queue)
                    pr.window  # a pull in flight (the loop's or a caller's)
                    or pq.dropped
                    or pq.msg_count > limits.max_count
                    or pq.msg_size >> 20 > limits.max_size_mib
                    or pr.max_offset <= pr.next_offset
                ):
                    continue
                if best is None or pq.msg_count < best.process_queue.msg_count:
                    best = pr
            if best is None:
                return []
            mq = best.message_queue
            sub = core.rebalancer.subscription_inner.get(mq.topic)
            built = core.pull_api.build_pull_request(mq, **core.pulls.pull_fields(best, sub))
            if built is None or built[0].slave or built[0].broker_addr != addr:
                return []
            request = built[1]
            pending = CallerPull(best, sub, best.next_offset, addr, conn)
            best.window.append((best.next_offset, pending))
        return [(request, functools.partial(self._caller_pulled, pending))]

    def _caller_pulled(self, pending: CallerPull, response: RemotingCommand | None) -> None:
        """The answer to a pull sent by :meth:`_pull_along` (None: the connection closed first),
        on whichever thread read it. Handled as the pull task handles its own, unless the queue
        was dropped, re-seeked or given up meanwhile. A failed pull is left to the pull task (the
        queue is not pulled along again until the task's next answer)."""
        core = self._core
        pr = pending.pr
        mq = pr.message_queue
        result: PullResult | None = None
        if response is not None:
            try:
                result = ClientAPI.parse_pull_message_response(response, pending.offset, pending.addr)
            except TideMQError as exc:
                log.debug("pull of %s along a commit failed: %s", mq, exc)
        table = core.pulls.table
        with table.lock:
            if caller_pull(pr) is not pending:
                return  # given up or dropped: the pull task pulls this range again
            try:
                if result is None:
                    pr.max_offset = -1  # backlog unknown: not pulled along until the loop pulls it
                elif not pr.process_queue.dropped:
                    core.pulls.pulled(pr, result, pending.sub, core.buffer.cache.put_from_thread)
            except Exception:  # a bug: never let it break the connection that read the answer
                log.exception("handling the pull of %s sent along a commit failed", mq)
                pr.max_offset = -1
            finally:
                pr.window.clear()
