"""PullMessageService; PullRequest and pull-result processing re-exported.

Mirrors RocketMQ's ``PullMessageService`` (here: each pull is an asyncio task
scheduled now or after a delay, instead of one thread draining a queue) and
``process_pull_result`` (re-exported from :mod:`tidemq.client.consumer.pull_api`, where the one
pull path lives). ``PullRequest`` lives with the pull kernel in
:mod:`tidemq.client.consumer.pull_core`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from tidemq.client.consumer.pull_api import process_pull_result
from tidemq.client.consumer.pull_core import PullRequest
from tidemq.remoting.eager import start_eagerly

__all__ = ["PullMessageService", "PullRequest", "process_pull_result"]

log = logging.getLogger(__name__)


class PullMessageService:
    """Runs pulls as tasks, now or later. Mirrors ``PullMessageService``.

    Args:
        pull: the consumer's ``pull_message(request)`` coroutine function.
    """

    def __init__(self, pull: Callable[[PullRequest], Awaitable[None]]) -> None:
        self._pull = pull
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._stopped = False

    def execute_pull_request_immediately(self, request: PullRequest) -> None:
        """Start a pull now, in this loop turn: up to the write of its request it runs inside this
        call, only the wait for the answer is a task (a consumer's next pull after a result goes
        out without a loop turn of its own). Mirrors ``executePullRequestImmediately``."""
        if self._stopped:
            return
        task = start_eagerly(self._run(request))
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def execute_pull_request_later(self, request: PullRequest, delay: float) -> None:
        """Start a pull after ``delay`` seconds. Mirrors ``executePullRequestLater``."""
        if self._stopped:
            return
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            self.execute_pull_request_immediately(request)

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    def execute_task_later(self, coro_fn: Callable[[], Awaitable[None]], delay: float) -> None:
        """Run ``coro_fn()`` after ``delay`` seconds (offset-illegal handling). Mirrors ``executeTaskLater``."""
        if self._stopped:
            return

        async def later() -> None:
            await asyncio.sleep(delay)
            await coro_fn()

        task = asyncio.ensure_future(later())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, request: PullRequest) -> None:
        try:
            await self._pull(request)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pull of %s failed unexpectedly; retrying in 1 s", request.message_queue)
            self.execute_pull_request_later(request, 1.0)

    async def shutdown(self) -> None:
        """Cancel pending and running pulls."""
        self._stopped = True
        for handle in list(self._timers):
            handle.cancel()
        self._timers.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
