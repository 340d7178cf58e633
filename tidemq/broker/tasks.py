"""Small helpers for the broker's background services (schedule, timer wheel): ending their
tasks and waking them from any thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any


async def cancel_and_wait(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel every task of ``tasks``, wait until each has ended (whatever it raised) and empty
    the list. Returns at once for an empty list."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task
    tasks.clear()


def set_threadsafe(event: asyncio.Event, loop: asyncio.AbstractEventLoop, loop_thread: int) -> None:
    """Set ``event`` of ``loop`` from any thread: at once when called on the loop's own thread
    (``loop_thread``, a ``threading.get_ident()``), else through ``call_soon_threadsafe``."""
    if threading.get_ident() == loop_thread:
        event.set()
    else:
        loop.call_soon_threadsafe(event.set)
