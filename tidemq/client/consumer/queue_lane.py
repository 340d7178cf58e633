"""Queue lanes: a push consumer's queue pulled and consumed by a thread of its own.

With a plain-function listener, RocketMQ's design moves every pulled batch across two threads:
the pull's answer is read and decoded on the client's I/O thread (here the ClientInstance's event
loop), then the listener runs on a consume-pool thread. In CPython each such hand-off is a thread
wake-up plus a wait for the GIL, which the loop holds while it sends the next pull; together
about 0.1 ms of every message's produce-to-consume latency, more than the broker's own work.

A :class:`QueueLane` removes both hops in the steady state. Its thread owns one queue's
``PullRequest`` and a blocking connection (:class:`~tidemq.client.direct.DirectConnection`) to the
queue's broker, and repeats: read the (long-polled) answer of its pull, decode it, cache the
messages in the ProcessQueue, consume them and send the next pull (in that order when the
listener runs on the lane, which is what the message waits for; the other way round when the pool
consumes, so that the broker works on the next pull meanwhile). A batch the listener consumed
whole on the lane is acknowledged there (ProcessQueue and offset store are thread-safe); other
results (retries, send-back of failures) are handled on the loop exactly as a pool thread's are.

Where the listener runs: on the lane's own thread when the pulled batch is one listener call
(``consume_message_batch_max_size``) and nothing else of the queue is cached (waiting or being
consumed) -- the latency case; otherwise every call goes to the consume pool, straight from the
lane's thread (one hop, as from the loop). While the lane runs the listener it does not read its
next pull's answer, so a slow listener would hold the queue back: after an inline call longer
than :data:`INLINE_SLOW_S` the lane sends everything to the pool for :data:`INLINE_COOLDOWN_S`.

Lanes are for a queue that is caught up (each answer leaves nothing more on the broker): a
message reaches the listener soonest. A backlog is read faster by the loop's single pull path
(measured: 141k vs 129k msg/s, batches of 32, eight queues; eight threads waking for every batch
cost more than the hops they save), so a lane whose answer shows more messages waiting hands the
queue back to the loop, which starts a lane again once a pull finds the queue caught up
(``AsyncPushConsumer._pull_next``). A newly assigned queue's first pull is a lane's: most queues
are caught up then, and a backlog goes back to the loop with that first answer. The loop also
takes over whatever is not the steady state: a failed or timed-out pull, a broker error, an
unknown broker address or subscription, OFFSET_ILLEGAL; it retries and recovers. Flow control and
``suspend()`` make the lane wait on its own thread.

A lane ends when its queue is dropped (rebalance), the consumer shuts down (its socket is shut
down so that a held pull does not keep it), or it hands the queue back.
No RocketMQ counterpart: the Java client's pull and consume threads run without a global lock.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from tidemq.client.api import ClientAPI, PullResult
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_core import PullRequest, PullVerdict
from tidemq.client.direct import DirectConnection
from tidemq.errors import TideMQError
from tidemq.protocol.body import SubscriptionData
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import MessageExt, MessageQueue

__all__ = ["LaneHost", "QueueLane"]

log = logging.getLogger(__name__)

INLINE_SLOW_S = 0.01
"""A listener call on a lane's thread longer than this (seconds) turns inline calls off for a while."""

INLINE_COOLDOWN_S = 60.0
"""Seconds a lane sends every pulled message to the consume pool after a slow inline call."""


class LaneHost(Protocol):
    """What a lane needs from its push consumer (``AsyncPushConsumer``); the methods named
    ``lane_*`` are called on the lane's thread, the others are scheduled on the loop."""

    def lane_pull_delay(self, pr: PullRequest) -> float | None:
        """None: pull now; else seconds to wait first; a negative value: stop (the queue is gone)."""
        ...

    def lane_pull_request(self, pr: PullRequest) -> tuple[str, RemotingCommand, SubscriptionData] | None:
        """``(broker address, PULL_MESSAGE request, subscription)`` of ``pr``'s next pull, or None
        when the loop must make it (no subscription or no broker address known)."""
        ...

    def lane_process_pull_result(
        self, mq: MessageQueue, result: PullResult, sub: SubscriptionData
    ) -> PullResult:
        """Remember the suggested node, decode and filter (``PullAPIWrapper.process_pull_result``)."""
        ...

    def lane_consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, inline: bool) -> None:
        """Consume ``msgs`` (already cached in ``pq``): in one listener call on this thread when
        ``inline``, else through the consume pool."""
        ...

    def lane_handed_back(self, pr: PullRequest, delay: float) -> None:
        """On the loop: pull ``pr`` on the loop's path after ``delay`` seconds."""
        ...

    def lane_offset_illegal(self, pr: PullRequest) -> None:
        """On the loop: apply the consumer's OFFSET_ILLEGAL policy to ``pr`` (its offset already
        corrected by :meth:`~tidemq.client.consumer.pull_core.QueuePull.on_result`), as for the loop's
        own pulls."""
        ...

    def lane_empty_pull(self, mq: MessageQueue, offset: int) -> None:
        """On the loop: an empty pull of a queue with nothing cached moves its offset."""
        ...

    def lane_exited(self, lane: QueueLane) -> None:
        """On the loop: ``lane``'s thread is ending."""
        ...


@dataclass(slots=True)
class _Pull:
    """A pull the lane wrote and whose answer it has not read yet."""

    addr: str
    offset: int
    sub: SubscriptionData
    answer: list[RemotingCommand | None]


_LATER = _Pull("", -1, SubscriptionData(topic="", sub_string=""), [])
"""What ``_send_next(wait=False)`` returns when the next pull must wait."""


class QueueLane:
    """The thread that pulls and consumes one queue (see the module docstring).

    Args:
        host: the push consumer.
        pr: the queue's pull request; the lane owns it (``next_offset``) while it runs.
        loop: the ClientInstance's loop, where results and hand-backs go.
        retry_delay: seconds before the loop pulls a queue the lane handed back after a failure
            (``pull_time_delay_when_exception``).
        batch_size: messages per listener call (``consume_message_batch_max_size``).
        pull_timeout: seconds to wait for a pull's answer (``consumer_pull_timeout``).
    """

    def __init__(
        self,
        host: LaneHost,
        pr: PullRequest,
        loop: asyncio.AbstractEventLoop,
        *,
        retry_delay: float,
        batch_size: int,
        pull_timeout: float,
    ) -> None:
        self.host = host
        self.pr = pr
        self.loop = loop
        self.retry_delay = retry_delay
        self.batch_size = batch_size
        self.pull_timeout = pull_timeout
        self.inline_after = 0.0
        """``time.monotonic()`` before which the listener does not run on this lane's thread."""
        self._stop = threading.Event()
        self._conn: DirectConnection | None = None
        mq = pr.message_queue
        self.thread = threading.Thread(
            target=self._run, name=f"tidemq-lane-{mq.topic}-{mq.broker_name}-{mq.queue_id}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """From any thread: end the lane soon (a held pull is cut short)."""
        self._stop.set()
        conn = self._conn
        if conn is not None:
            conn.abort()

    # -- on the lane's thread -----------------------------------------------------------------

    def _to_loop(self, fn: object, *args: object) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)  # type: ignore[arg-type]
        except RuntimeError:  # the loop is closed: the consumer is gone
            self._stop.set()

    def _run(self) -> None:
        try:
            self._pull_loop()
        except Exception:  # a bug: give the queue back rather than leave it unpulled
            log.exception("queue lane of %s failed; the loop pulls it", self.pr.message_queue)
            self._hand_back(self.retry_delay)
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            self._to_loop(self.host.lane_exited, self)

    def _hand_back(self, delay: float) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._to_loop(self.host.lane_handed_back, self.pr, delay)

    def _pull_loop(self) -> None:
        pr = self.pr
        pq, mq = pr.process_queue, pr.message_queue
        host = self.host
        inflight = self._send_next()
        while inflight is not None:
            answer = self._read_answer(inflight)
            pull, inflight = inflight, None
            if self._stop.is_set() or pq.dropped:
                return
            if answer is None:
                log.debug("pull of %s from %s failed; the loop retries it", mq, pull.addr)
                self._hand_back(self.retry_delay)
                return
            try:
                result = ClientAPI.parse_pull_message_response(answer, pull.offset, pull.addr)
                result = host.lane_process_pull_result(mq, result, pull.sub)
            except TideMQError as exc:
                log.warning("pull of %s failed: %s; retrying in %gs", mq, exc, self.retry_delay)
                self._hand_back(self.retry_delay)
                return
            verdict = pr.on_result(result)  # the kernel's status switch (pull_core.py)
            if verdict is PullVerdict.ILLEGAL:
                self._stop.set()
                self._to_loop(host.lane_offset_illegal, pr)
                return
            msgs = result.msg_found_list if verdict is PullVerdict.FOUND else None
            if msgs:
                pq.put_messages(msgs)
                if pr.max_offset > pr.next_offset:  # a backlog: the loop's job
                    host.lane_consume(msgs, pq, mq, False)
                    self._hand_back(0.0)
                    return
                if self._inline_ok(msgs):  # the listener first: it is what the message waits for
                    self._consume_inline(msgs)
                    inflight = self._send_next()
                    continue
                # the pool consumes while the broker works on the next pull, unless flow control
                # holds that pull: then it waits until the batch is handed to the pool
                ahead = self._send_next(wait=False)
                host.lane_consume(msgs, pq, mq, False)
                inflight = self._send_next() if ahead is _LATER else ahead
            else:
                if pq.msg_count == 0:  # correctTagsOffset
                    self._to_loop(host.lane_empty_pull, mq, pr.next_offset)
                inflight = self._send_next()

    def _inline_ok(self, msgs: list[MessageExt]) -> bool:
        """Whether ``msgs`` (just cached) are consumed on this thread: one listener call, nothing
        else of the queue cached, no slow call lately."""
        n = len(msgs)
        return (
            n <= self.batch_size
            and self.pr.process_queue.msg_count == n
            and time.monotonic() >= self.inline_after
        )

    def _consume_inline(self, msgs: list[MessageExt]) -> None:
        pq, mq = self.pr.process_queue, self.pr.message_queue
        start = time.monotonic()
        self.host.lane_consume(msgs, pq, mq, True)
        took = time.monotonic() - start
        if took > INLINE_SLOW_S:
            self.inline_after = start + took + INLINE_COOLDOWN_S
            log.info(
                "listener of %s took %.3fs on its queue lane; consuming in the pool for %gs",
                mq,
                took,
                INLINE_COOLDOWN_S,
            )

    def _send_next(self, *, wait: bool = True) -> _Pull | None:
        """Write the queue's next pull, after waiting out flow control or a suspension (with
        ``wait=False`` it returns :data:`_LATER` instead of waiting); None when the lane ends
        instead (stopped, queue gone, handed back)."""
        pr, host = self.pr, self.host
        while True:
            if self._stop.is_set():
                return None
            delay = host.lane_pull_delay(pr)
            if delay is None:
                break
            if delay >= 0 and not wait:
                return _LATER
            if delay < 0 or self._stop.wait(delay):
                return None
        planned = host.lane_pull_request(pr)
        if planned is None:
            self._hand_back(0.0)
            return None
        addr, request, sub = planned
        conn = self._conn
        if conn is None or conn.addr != addr:
            if conn is not None:
                conn.close()
            conn = self._conn = DirectConnection(addr)
            if self._stop.is_set():  # stop() may have missed the new connection
                return None
        answer: list[RemotingCommand | None] = []
        with conn.lock:
            conn.send([(request, answer.append)], self.pull_timeout)
            if self._stop.is_set():  # stop() came while this connection was being made
                conn.close()
                return None
        return _Pull(addr, pr.next_offset, sub, answer)

    def _read_answer(self, pull: _Pull) -> RemotingCommand | None:
        conn = self._conn
        if not pull.answer and conn is not None:
            with conn.lock:
                conn.read_answers(self.pull_timeout)
        return pull.answer[0] if pull.answer else None
