"""Start a coroutine at once, in the caller's loop turn, as Python 3.12's eager tasks do.

``start_eagerly(coro)`` runs ``coro`` up to its first real suspension inside the call; only a
coroutine that then has to wait gets a Task (which resumes it where it stopped). Work that usually
completes without waiting (a broker request, a consumer's next pull up to the write of its request)
so costs no Task and no loop turn. Used by the remoting channel and the push consumer's pull service.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["start_eagerly"]


@types.coroutine
def _resume(coro: Coroutine[Any, Any, None], yielded: Any) -> Generator[Any, Any, None]:
    """The rest of ``coro``, started eagerly and suspended on ``yielded``, as a task's body: hands
    what ``coro`` waits on to the task and forwards results, exceptions and cancellation back."""
    while True:
        try:
            value = yield yielded
        except BaseException as exc:  # cancellation too: the coroutine decides what it means
            try:
                yielded = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                yielded = coro.send(value)
            except StopIteration:
                return


def start_eagerly(
    coro: Coroutine[Any, Any, None], loop: asyncio.AbstractEventLoop | None = None
) -> asyncio.Task[None] | None:
    """Run ``coro`` now up to its first suspension; returns the Task that runs the rest, or None
    when it finished (or raised) within the call.

    The eager part runs in the caller's context (``asyncio.current_task()`` is the caller's task):
    it must not rely on being its own task before it first waits. An exception raised there
    propagates to the caller, as a plain call's would.
    """
    try:
        yielded = coro.send(None)
    except StopIteration:
        return None
    return (loop or asyncio.get_running_loop()).create_task(_resume(coro, yielded))
