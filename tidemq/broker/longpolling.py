"""Long polling: hold empty pulls until a message arrives or the hold times out.

Mirrors RocketMQ's ``PullRequestHoldService`` / ``ManyPullRequest`` / ``longpolling.PullRequest``
(named ``HeldPullRequest`` here, as the client has its own ``PullRequest``).

A PULL_MESSAGE that finds nothing (PULL_NOT_FOUND) with FLAG_SUSPEND is parked here, keyed by
``(topic, queue_id)``. It is re-executed -- the normal pull logic, without suspend and without the
piggy-backed offset commit -- as soon as one of these happens:

* a put stores records at exactly the request's offset: :meth:`PullRequestHoldService.notify_message_put`
  answers it from the put's own bytes, right after the put and before the producer's answer is
  written (RocketMQ re-reads the store once the consume queue is dispatched; answering from the put
  takes the consume-queue dispatch, the store read and a loop turn off the way to the consumer);
* the dispatch of a put calls :meth:`PullRequestHoldService.notify_message_arriving` with a max offset
  past the request's offset (and, when known, a tag hash the subscription accepts);
* its own deadline passes (a per-request timer, so a 2 s hold answers after 2 s, not at the next tick);
* the periodic re-check (every 5 s with long polling, ``short_polling_time_mills`` without) finds the
  queue's max offset past the request offset (a safety net for arrivals nobody announced).

No sleeping loops: arrivals wake requests directly; the periodic task waits on an event with a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tidemq.errors import RemotingError
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import PullMessageRequestHeader
from tidemq.store.dispatcher import PutRecords, PutRun

log = logging.getLogger(__name__)

TopicQueueKey = tuple[str, int]


@dataclass(slots=True, eq=False)
class HeldPullRequest:
    """One parked PULL_MESSAGE. Mirrors RocketMQ's broker-side ``longpolling.PullRequest``.

    Attributes:
        channel: the client connection the answer goes to (a ``tidemq.remoting`` Channel).
        request: the original request (re-executed on wake-up).
        topic / queue_id / pull_from_this_offset: what was asked for.
        tag_codes: tag hash codes the subscription accepts; ``None`` = every message.
        timeout_s: how long it may be held (seconds).
        header: the request's parsed header, kept so a wake-up does not parse it again; None
            when unknown.
    """

    channel: Any
    request: RemotingCommand
    topic: str
    queue_id: int
    pull_from_this_offset: int
    tag_codes: frozenset[int] | None
    timeout_s: float
    header: PullMessageRequestHeader | None = None
    deadline: float = 0.0
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    def matches(self, tags_code: int | None) -> bool:
        """True if a message with ``tags_code`` (None = unknown) may interest this request."""
        return self.tag_codes is None or tags_code is None or tags_code in self.tag_codes


WakeupCallback = Callable[[HeldPullRequest], RemotingCommand | None]
MaxOffsetGetter = Callable[[str, int], int]
PutAnswer = Callable[[HeldPullRequest, PutRun, PutRecords], RemotingCommand | None]


class PullRequestHoldService:
    """Parks empty pulls and re-executes them on arrival or timeout. Mirrors ``PullRequestHoldService``.

    Args:
        get_max_offset: ``(topic, queue_id) -> max logical offset`` (the store's).
        wakeup: re-executes a request and returns its answer (None: no answer); RocketMQ's
            ``PullMessageProcessor.executeRequestWhenWakeup``. The answer is written inside the
            wake-up itself (no task, no loop turn between the put and the consumer's answer); a
            connection whose writes are paused gets it from a task that waits for the drain.
        answer_from_put: the answer to a request waiting at exactly the first offset of a put's
            run, made from the put's records, or None to keep waiting for the dispatch (see
            :meth:`notify_message_put`); None: puts are not looked at.
        check_interval: period of the safety-net re-check (seconds; 5 s like RocketMQ).

    Must be used from one event loop (the broker's); :meth:`start` binds it.
    """

    def __init__(
        self,
        get_max_offset: MaxOffsetGetter,
        wakeup: WakeupCallback,
        *,
        answer_from_put: PutAnswer | None = None,
        check_interval: float = 5.0,
    ) -> None:
        self._get_max_offset = get_max_offset
        self._wakeup = wakeup
        self._answer_from_put = answer_from_put
        self.check_interval = check_interval
        self._table: dict[TopicQueueKey, list[HeldPullRequest]] = {}
        self.held: Mapping[TopicQueueKey, list[HeldPullRequest]] = self._table
        """The held requests by queue (read only; empty: nobody to answer from a put)."""
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the periodic re-check task on the running loop."""
        self._stop.clear()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pull-request-hold")

    async def shutdown(self) -> None:
        """Stop the re-check task and drop every held request (their connections are closing)."""
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for held_list in self._table.values():
            for held in held_list:
                if held.timer is not None:
                    held.timer.cancel()
        self._table.clear()
        for task in list(self._inflight):
            task.cancel()

    def wakeup(self) -> None:
        """Run a re-check now (RocketMQ's ``ServiceThread.wakeup``)."""
        self.check_hold_request()

    @property
    def held_count(self) -> int:
        """Number of requests currently held."""
        return sum(len(v) for v in self._table.values())

    # -- holding -------------------------------------------------------------------------------

    def suspend_pull_request(self, topic: str, queue_id: int, held: HeldPullRequest) -> None:
        """Park ``held`` until a message arrives for (topic, queue_id) or its timeout passes."""
        loop = asyncio.get_running_loop()
        held.deadline = loop.time() + held.timeout_s
        held.timer = loop.call_later(held.timeout_s, self._expire, held)
        self._table.setdefault((topic, queue_id), []).append(held)

    def notify_message_arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None
    ) -> None:
        """Re-execute every request on (topic, queue_id) that the new ``max_offset`` satisfies.

        Called by the send path after each put. ``tags_code`` is the new message's tag hash (None =
        unknown); requests whose subscription rejects it keep waiting.
        """
        held_list = self._table.get((topic, queue_id))
        if not held_list:
            return
        now = asyncio.get_running_loop().time()
        keep: list[HeldPullRequest] = []
        for held in held_list:
            if (max_offset > held.pull_from_this_offset and held.matches(tags_code)) or now >= held.deadline:
                self._fire(held)
            else:
                keep.append(held)
        if keep:
            self._table[(topic, queue_id)] = keep
        else:
            self._table.pop((topic, queue_id), None)

    def notify_message_put(self, put: PutRecords) -> None:
        """Answer the requests waiting at exactly the first queue offset of one of ``put``'s runs
        from the put's records (``answer_from_put``); the others, and those it declines, keep
        waiting for the dispatch's :meth:`notify_message_arriving`. Called by the store right after
        each put (``message_put_listener``), on the broker's loop."""
        table = self._table
        answer_from_put = self._answer_from_put
        if not table or answer_from_put is None:
            return
        for run in put.queues:
            key = (run[0], run[1])
            held_list = table.get(key)
            if not held_list:
                continue
            keep: list[HeldPullRequest] = []
            for held in held_list:
                response = None
                if held.pull_from_this_offset == run[2]:
                    try:
                        response = answer_from_put(held, run, put)
                    except Exception:
                        log.exception("answering held pull on %s:%d from a put failed", *key)
                if response is None:
                    keep.append(held)
                else:
                    self._answer(held, response)
            if keep:
                table[key] = keep
            else:
                table.pop(key, None)

    def check_hold_request(self) -> None:
        """Re-check every held queue against the store's max offset. Mirrors ``checkHoldRequest``."""
        for topic, queue_id in list(self._table):
            try:
                max_offset = self._get_max_offset(topic, queue_id)
            except Exception:
                log.exception("cannot read max offset of %s:%d", topic, queue_id)
                continue
            self.notify_message_arriving(topic, queue_id, max_offset)

    # -- internals -----------------------------------------------------------------------------

    def _expire(self, held: HeldPullRequest) -> None:
        held.timer = None
        key = (held.topic, held.queue_id)
        held_list = self._table.get(key)
        if held_list is None or held not in held_list:
            return
        held_list.remove(held)
        if not held_list:
            del self._table[key]
        self._fire(held)

    def _fire(self, held: HeldPullRequest) -> None:
        try:
            response = self._wakeup(held)
        except Exception:
            log.exception("re-executing held pull on %s:%d failed", held.topic, held.queue_id)
            response = None
        self._answer(held, response)

    def _answer(self, held: HeldPullRequest, response: RemotingCommand | None) -> None:
        """Write ``response`` (None: nothing) to a request that has left the table."""
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        channel, request = held.channel, held.request
        if response is None or not channel.is_active:
            return
        if channel.write_paused:
            task = asyncio.get_running_loop().create_task(
                self._answer_after_drain(channel, request, response)
            )
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
            return
        try:
            channel.respond_now(request, response)
        except RemotingError as exc:
            log.debug("answering held pull to %s failed: %s", channel.remote_addr, exc)

    @staticmethod
    async def _answer_after_drain(channel: Any, request: RemotingCommand, response: RemotingCommand) -> None:
        try:
            await channel.send_response(request, response)
        except RemotingError as exc:
            log.debug("answering held pull to %s failed: %s", channel.remote_addr, exc)

    async def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.check_interval)
            if self._stop.is_set():
                break
            self.check_hold_request()
