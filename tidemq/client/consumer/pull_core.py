"""The pull kernel: one queue's pull state and what a pull's answer does to it. Sans-I/O.

Every consumer that pulls runs this code: the push consumer (its loop's ``PullMessageService`` and
its queue lanes, ``pull_kernel.py`` / ``queue_lane.py``), the lite pull consumer (its pull tasks and
the pulls a blocking ``commit_sync`` sends along, ``lite_pulls.py`` / ``pull_caller.py``) and the
Spark source's blocking range reads. They differ only in how they wait for an answer (asyncio, a lane's
thread, a blocking socket) and in what they do with the messages; the state and its transitions
are here, with no socket, no asyncio and no clock.

:class:`QueuePull` mirrors the per-queue half of RocketMQ's ``PullRequest`` and the status switch
shared by ``DefaultMQPushConsumerImpl``'s ``PullCallback`` and ``DefaultLitePullConsumerImpl``'s
``PullTaskImpl`` (``PullAPIWrapper.processPullResult`` decodes; see ``pull_api.py``):

============== ============================================== ==========================
answer         next offset                                    verdict
============== ============================================== ==========================
FOUND          ``nextBeginOffset`` (always past the pulled    :attr:`PullVerdict.FOUND`:
               offset)                                        hand the messages over
NO_NEW_MSG     ``nextBeginOffset``                            :attr:`PullVerdict.EMPTY`
NO_MATCHED_MSG ``nextBeginOffset``                            :attr:`PullVerdict.EMPTY`
OFFSET_ILLEGAL ``nextBeginOffset`` (the broker's correction)  :attr:`PullVerdict.ILLEGAL`
============== ============================================== ==========================

On ILLEGAL the runner applies its policy: the push consumer drops the queue, stores the corrected
offset and rebalances after 10 s (``PullCallback``); the lite pull consumer goes on from the
corrected offset (``PullTaskImpl``). After EMPTY a runner with nothing cached moves the stored
offset to :attr:`QueuePull.next_offset` (``correctTagsOffset``).

A *bounded* queue pull (``end`` set: a range ``[start, end)`` to read once, as the Spark source
does) never goes back and never past ``end``; an answer showing that part of the range is no longer
in the queue is :attr:`PullVerdict.LOST` with the lost offsets in :attr:`QueuePull.lost`:

* OFFSET_ILLEGAL below the queue's min offset: ``[offset, min(min_offset, end))`` was deleted; the
  read goes on from there;
* NO_NEW_MSG, or OFFSET_ILLEGAL at or above the max: the queue ends before the range does:
  ``[offset, end)`` is lost and the read is done;
* NO_MATCHED_MSG that does not move forward: the rest of the range holds nothing that matches
  (done, nothing lost).

Flow control: :meth:`FlowLimits.check` says whether a queue's next pull waits, from what its
ProcessQueue holds (cached count, size, offset span), for every runner.

Pipelining: a runner may keep up to ``depth`` pulls in flight (:meth:`QueuePull.fill`); the ones
after the first start where the previous one would end if it came back full (``step`` messages
on). An answer is used only when it starts at :attr:`QueuePull.next_offset`; after a short answer
the pulls in flight are stale (:meth:`QueuePull.stale`) and the window is refilled from there.
Push and lite pull keep one pull in flight per queue (``depth`` 1, no window: they await it).

How a blocking runner uses it (the Spark source's range reader): :func:`run_pipelined` is the whole
loop, with the I/O passed in as three functions over a blocking socket (a
:class:`~tidemq.remoting.blocking.BlockingConnection`; ``spark/conn.py``'s ``_RangeReader``)::

    q = QueuePull(mq, start, end=end, depth=4, step=32)

    def send(offset):                      # write the pull at offset; a token for its answer
        request = pull_request(offset)
        sock.send([request], time.monotonic() + timeout)
        return request.opaque

    def receive(token, offset):            # (PullResult, what the runner wants of the answer)
        response, body = sock.answer(token, time.monotonic() + timeout)
        return parse(response, offset), body

    def skip(token):                       # an answer nobody will use
        sock.answer(token, time.monotonic() + timeout)

    for verdict, result, body in run_pipelined(q, send, receive, skip):
        if verdict is PullVerdict.LOST:
            report_data_loss(*q.lost)
        elif verdict is PullVerdict.FOUND:
            use(body)                      # the next pulls are in flight meanwhile

A transport error raised by ``send`` / ``receive`` / ``skip`` ends the generator with the state
intact: ``q.clear()`` (the tokens are void), reconnect, and call :func:`run_pipelined` again; it
goes on from ``q.next_offset`` (an answer already yielded is not pulled again). Written out, the
loop is::

    while not q.done:
        for token in q.stale():            # answers nobody will use: read past them
            skip(token)
        q.fill(send)                       # (re)start at next_offset
        offset, token = q.take()           # the pull that starts at q.next_offset
        result, body = receive(token, offset)
        verdict = q.on_result(result)      # next_offset moves on
        for token in q.stale():            # a short answer: the pulls after it are stale
            skip(token)
        q.fill(send)                       # the broker works meanwhile
        ...use the answer...

An asyncio runner (push, lite pull) has one pull in flight and awaits it: it sends at
``q.next_offset``, then calls ``q.on_result(result)`` and acts on the verdict.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Generic, Protocol, TypeVar

from tidemq.client.api import PullResult, PullStatus
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.protocol.message import MessageQueue

__all__ = [
    "FLOW_CONTROL_DELAY_S",
    "FlowControl",
    "FlowLimits",
    "PullRequest",
    "PullVerdict",
    "QueuePull",
    "run_pipelined",
]

T = TypeVar("T")
P = TypeVar("P")


FLOW_CONTROL_DELAY_S = 0.05
"""Seconds a pull waits when flow control holds its queue (RocketMQ: 50 ms)."""


class FlowConfig(Protocol):
    """The consumer settings flow control reads (``PushConsumerConfig`` / ``PullConsumerConfig``)."""

    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int
    consume_concurrently_max_span: int


@dataclass(frozen=True, slots=True)
class FlowControl:
    """Why a pull is postponed, and for how long (seconds). Result of :meth:`FlowLimits.check`."""

    reason: str
    delay: float


@dataclass(frozen=True, slots=True)
class FlowLimits:
    """When pulling a queue waits: the checks of ``DefaultMQPushConsumerImpl.pullMessage`` and
    ``DefaultLitePullConsumerImpl.PullTaskImpl`` on the queue's ProcessQueue.

    Attributes:
        max_count: cached messages above this hold the pull (``pullThresholdForQueue``).
        max_size_mib: cached body MiB above this hold the pull (``pullThresholdSizeForQueue``).
        max_span: cached offset span above this holds the pull (``consumeConcurrentlyMaxSpan``);
            None: not checked (orderly consumption; a lite pull consumer, whose ProcessQueue keeps
            counts only).
    """

    max_count: int
    max_size_mib: int
    max_span: int | None

    @classmethod
    def of(cls, config: FlowConfig, *, span: bool) -> FlowLimits:
        """The limits of a consumer's ``config``; ``span``: check the offset span too."""
        return cls(
            config.pull_threshold_for_queue,
            config.pull_threshold_size_for_queue,
            config.consume_concurrently_max_span if span else None,
        )

    def check(self, pq: ProcessQueue) -> FlowControl | None:
        """None to pull now, else why and how long (:data:`FLOW_CONTROL_DELAY_S`) to wait."""
        if pq.msg_count > self.max_count:
            return FlowControl(
                f"cached message count {pq.msg_count} > {self.max_count}", FLOW_CONTROL_DELAY_S
            )
        size_mib = pq.msg_size >> 20
        if size_mib > self.max_size_mib:
            return FlowControl(f"cached size {size_mib} MiB > {self.max_size_mib} MiB", FLOW_CONTROL_DELAY_S)
        if self.max_span is not None and (span := pq.get_max_span()) > self.max_span:
            return FlowControl(f"offset span {span} > {self.max_span}", FLOW_CONTROL_DELAY_S)
        return None


class PullVerdict(IntEnum):
    """What a pull's answer means for its runner (module docstring)."""

    FOUND = 0
    """Messages found: hand them over (a tag filter may have kept none of them)."""
    EMPTY = 1
    """Nothing new (NO_NEW_MSG / NO_MATCHED_MSG): the offset moved to the broker's next one."""
    ILLEGAL = 2
    """OFFSET_ILLEGAL on an unbounded queue pull: the offset is the broker's correction; the runner
    applies its policy."""
    LOST = 3
    """Bounded only: :attr:`QueuePull.lost` is no longer in the queue (data loss)."""


class QueuePull(Generic[T]):
    """One queue's pull state and its transitions (module docstring). Not thread-safe: one runner
    at a time (the lite pull consumer's two runners hand it over under their lock).

    Args:
        message_queue: the queue.
        next_offset: the offset of the next pull (queue offset, a message count).
        end: bounded reads: the offset the read stops at (exclusive); None (default): unbounded.
        depth: pulls in flight at most (:meth:`fill`; default 1).
        step: messages per pull, where the next pipelined pull starts after the previous one
            (``pullBatchSize``; default 32).

    Attributes:
        next_offset: where the next pull starts.
        max_offset: the broker's max offset of the queue from the latest answer (-1: none yet);
            the queue has a backlog while it is above ``next_offset``.
        suggest_which_broker_id: the node the latest answer suggested (0: the master).
        lost: after :attr:`PullVerdict.LOST`: the lost offsets ``(from, to)`` (to exclusive).
        window: pulls in flight as ``(offset, token)``, oldest first (:meth:`fill`).
    """

    __slots__ = (
        "depth",
        "end",
        "lost",
        "max_offset",
        "message_queue",
        "next_offset",
        "step",
        "suggest_which_broker_id",
        "window",
    )

    def __init__(
        self,
        message_queue: MessageQueue,
        next_offset: int,
        *,
        end: int | None = None,
        depth: int = 1,
        step: int = 32,
    ) -> None:
        self.message_queue = message_queue
        self.next_offset = next_offset
        self.end = end
        self.depth = max(1, depth)
        self.step = max(1, step)
        self.max_offset = -1
        self.suggest_which_broker_id = 0
        self.lost = (0, 0)
        self.window: collections.deque[tuple[int, T]] = collections.deque()

    @property
    def done(self) -> bool:
        """True when a bounded read has reached its ``end`` (never for an unbounded one)."""
        return self.end is not None and self.next_offset >= self.end

    def on_result(self, result: PullResult) -> PullVerdict:
        """Handle the answer to the pull that started at :attr:`next_offset`: move the offset on,
        remember the broker's max offset and suggested node, and say what the answer means.

        Returns:
            the :class:`PullVerdict` (see the module docstring's table).
        """
        offset = self.next_offset
        nxt = result.next_begin_offset
        self.max_offset = result.max_offset
        self.suggest_which_broker_id = result.suggest_which_broker_id
        status = result.pull_status
        end = self.end
        if status is PullStatus.FOUND:
            self.next_offset = nxt if nxt > offset else offset + 1
            return PullVerdict.FOUND
        if end is None:
            self.next_offset = nxt
            return PullVerdict.ILLEGAL if status is PullStatus.OFFSET_ILLEGAL else PullVerdict.EMPTY
        if status is PullStatus.NO_MATCHED_MSG:
            self.next_offset = nxt if nxt > offset else end
            return PullVerdict.EMPTY
        if status is PullStatus.OFFSET_ILLEGAL and offset < result.min_offset:
            lost_to = min(result.min_offset, end)
        else:  # NO_NEW_MSG or OFFSET_ILLEGAL at/above the max: the queue ends before the range
            lost_to = end
        self.lost = (offset, lost_to)
        self.next_offset = lost_to
        return PullVerdict.LOST

    # -- pipelining (bounded or not; push and lite pull do not use it) ----------------------------

    def fill(self, send: Callable[[int], T]) -> None:
        """Start pulls until ``depth`` are in flight: ``send(offset)`` sends the pull at ``offset``
        and returns a token for its answer. The first starts at :attr:`next_offset` (the window
        empty), each next one ``step`` after the last one in flight; none at or past ``end``.
        An exception from ``send`` propagates (the pulls sent before it stay in the window)."""
        window = self.window
        after = window[-1][0] + self.step if window else self.next_offset
        end = self.end
        while len(window) < self.depth and (end is None or after < end):
            window.append((after, send(after)))
            after += self.step

    def stale(self) -> list[T]:
        """Tokens of the pulls in flight that no longer start where they are needed (the oldest does
        not start at :attr:`next_offset`), oldest first, removed from the window: their answers are
        to be read past (or their connection closed). [] when the window is fine."""
        window = self.window
        if not window or window[0][0] == self.next_offset:
            return []
        tokens = [token for _, token in window]
        window.clear()
        return tokens

    def take(self) -> tuple[int, T]:
        """The oldest pull in flight, ``(offset, token)``, removed from the window; its answer is the
        next to pass to :meth:`on_result`.

        Raises:
            LookupError: no pull is in flight at :attr:`next_offset` (call :meth:`stale` and
                :meth:`fill` first).
        """
        window = self.window
        if not window or window[0][0] != self.next_offset:
            raise LookupError(f"no pull of {self.message_queue} in flight at offset {self.next_offset}")
        return window.popleft()

    def clear(self) -> list[T]:
        """Forget every pull in flight (their connection is gone); returns their tokens."""
        tokens = [token for _, token in self.window]
        self.window.clear()
        return tokens


def run_pipelined(
    q: QueuePull[T],
    send: Callable[[int], T],
    receive: Callable[[T, int], tuple[PullResult, P]],
    skip: Callable[[T], object],
) -> Iterator[tuple[PullVerdict, PullResult, P]]:
    """Run ``q`` with up to ``q.depth`` pulls in flight until it is :attr:`~QueuePull.done` (forever
    when unbounded), yielding ``(verdict, result, payload)`` for each answer used, in queue order.

    Args:
        q: the queue's state (its ``next_offset`` moves on; it survives an error, see below).
        send: ``send(offset)`` writes the pull that starts at ``offset`` and returns a token for its
            answer.
        receive: ``receive(token, offset)`` reads that answer: ``(PullResult, payload)``, the
            payload being whatever the runner wants of it (the raw body, say).
        skip: ``skip(token)`` reads past an answer nobody will use (a pull made stale by a short
            answer before it).

    Each answer's next pulls are sent before it is yielded, so the broker works while the runner
    uses it. An exception from ``send`` / ``receive`` / ``skip`` propagates and ends the generator;
    an answer already received is yielded first (its offsets are past ``next_offset``). To go on:
    ``q.clear()``, reconnect, call again. Blocking or not depends on the three functions only.
    """
    while not q.done:
        for token in q.stale():
            skip(token)
        q.fill(send)
        offset, token = q.take()
        result, payload = receive(token, offset)
        verdict = q.on_result(result)
        try:
            for token in q.stale():
                skip(token)
            q.fill(send)
        except BaseException:
            yield verdict, result, payload  # received and counted: never pulled again
            raise
        yield verdict, result, payload
        del payload  # not held while the next answer is read (a body may pin a reusable buffer)


class PullRequest(QueuePull[object]):
    """An owned queue of a consumer: its :class:`QueuePull` state and its ProcessQueue. Mirrors
    ``PullRequest``.

    Args:
        consumer_group: the group.
        message_queue: the queue.
        process_queue: its cache (``ProcessQueue``).
        next_offset: offset of the next pull.
        previously_locked: orderly only: pulled since its queue lock was taken.
    """

    __slots__ = ("consumer_group", "previously_locked", "process_queue")

    def __init__(
        self,
        consumer_group: str,
        message_queue: MessageQueue,
        process_queue: ProcessQueue,
        next_offset: int,
        previously_locked: bool = False,
    ) -> None:
        super().__init__(message_queue, next_offset)
        self.consumer_group = consumer_group
        self.process_queue = process_queue
        self.previously_locked = previously_locked

    def __repr__(self) -> str:
        return (
            f"PullRequest(consumer_group={self.consumer_group!r}, message_queue={self.message_queue!r}, "
            f"next_offset={self.next_offset})"
        )
