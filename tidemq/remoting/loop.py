"""Event-loop helpers: the fastest available loop, and a loop running in a background thread.

``LoopThread`` is what the blocking facades (``Producer``, ``PushConsumer``, ``ClusterThread``)
use: one daemon thread runs an asyncio loop, other threads submit coroutines to it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def uvloop_available() -> bool:
    """True when ``uvloop`` can be imported."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when importable, else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def use_best_event_loop() -> bool:
    """Install uvloop's event-loop policy process-wide when importable.

    Call it once at program start (the CLI does); libraries should not.

    Returns:
        True if uvloop was installed, False if asyncio's default loop stays.
    """
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


class LoopThread:
    """An event loop running in a daemon thread; other threads hand it coroutines.

    Args:
        name: thread name (shows up in logs and ``threading.enumerate()``).
        use_uvloop: use uvloop when importable (default True).

    Example::

        lt = LoopThread("tidemq-client")
        result = lt.run(client.invoke(addr, request, 3.0), timeout=5.0)
        lt.stop()
    """

    def __init__(self, name: str = "tidemq-loop", *, use_uvloop: bool = True) -> None:
        self.name = name
        self.loop = new_event_loop() if use_uvloop else asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._started.wait()

    def __enter__(self) -> LoopThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def is_running(self) -> bool:
        """True while the thread and its loop are running."""
        return self._thread.is_alive() and self.loop.is_running()

    def in_loop_thread(self) -> bool:
        """True when called from this loop's own thread."""
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; returns a ``concurrent.futures.Future``.

        Raises:
            RuntimeError: the loop thread is stopped.
        """
        if not self._thread.is_alive() or self.loop.is_closed():
            coro.close()
            raise RuntimeError(f"loop thread {self.name!r} is stopped")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block until it finishes; returns its result.

        Args:
            coro: the coroutine to run.
            timeout: seconds to wait; None waits forever.

        Raises:
            RuntimeError: called from the loop's own thread (it would deadlock) or the loop is stopped.
            TimeoutError: ``timeout`` passed (the coroutine is cancelled).
            Exception: whatever ``coro`` raised.
        """
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError(
                f"LoopThread.run() called from its own loop thread {self.name!r}; await the coroutine instead"
            )
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"coroutine did not finish within {timeout:g}s on {self.name!r}") from None

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        """Call ``callback(*args)`` on the loop thread (thread-safe)."""
        self.loop.call_soon_threadsafe(callback, *args)

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel remaining tasks, stop the loop and join the thread. Idempotent.

        Must not be called from the loop thread itself (raises RuntimeError).
        """
        if self.in_loop_thread():
            raise RuntimeError("LoopThread.stop() called from its own loop thread")
        if not self._thread.is_alive():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("loop thread %r did not stop within %gs", self.name, timeout)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                tasks = asyncio.all_tasks(self.loop)
                for task in tasks:
                    task.cancel()
                if tasks:
                    self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()
