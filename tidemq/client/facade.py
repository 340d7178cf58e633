"""The blocking facades' shared part: an asyncio client run on its client id's background loop.

:class:`~tidemq.client.producer.producer.Producer`,
:class:`~tidemq.client.consumer.pull.PullConsumer` and
:class:`~tidemq.client.consumer.push.PushConsumer` wrap ``AsyncProducer`` / ``AsyncPullConsumer`` /
``AsyncPushConsumer`` (the ``core``) and run every call on the
:class:`~tidemq.remoting.loop.LoopThread` shared by all clients with the same client id
(:func:`~tidemq.client.instance.acquire_loop_thread`, reference counted), as RocketMQ's
``MQClientInstance`` is shared by the producers and consumers of one client id.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, Self, TypeVar

from tidemq.client.instance import acquire_loop_thread, release_loop_thread
from tidemq.remoting.loop import LoopThread

__all__ = ["BlockingFacade", "run_on_loop"]

T = TypeVar("T")


class _Hop:
    """One call handed from a caller thread to the loop thread and its answer handed back.

    Cheaper than ``asyncio.run_coroutine_threadsafe`` + ``concurrent.futures.Future`` (which
    chains two futures and waits on a pure-Python ``threading.Condition``): the caller blocks on a
    plain ``threading.Lock`` that the task's done callback releases -- one wake-up each way.
    """

    __slots__ = ("coro", "lock", "ok", "task", "value")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.lock = threading.Lock()
        self.lock.acquire()
        self.task: asyncio.Task[Any] | None = None
        self.ok = False
        self.value: Any = None

    def start(self) -> None:
        """On the loop thread: run the coroutine as a task."""
        task = asyncio.ensure_future(self.coro)
        self.task = task
        task.add_done_callback(self.done)

    def done(self, task: asyncio.Task[Any]) -> None:
        """On the loop thread: keep the outcome and wake the caller."""
        if task.cancelled():
            self.value = asyncio.CancelledError()
        else:
            exc = task.exception()
            if exc is None:
                self.ok, self.value = True, task.result()
            else:
                self.value = exc
        self.lock.release()

    def cancel(self) -> None:
        """On the loop thread: cancel the task (after the caller gave up waiting)."""
        if self.task is not None:
            self.task.cancel()
        else:
            self.coro.close()


def run_on_loop(lt: LoopThread, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on ``lt``'s loop from another thread and return its result (the facades' hop).

    Same contract as :meth:`LoopThread.run` at about half its cost per call (see :class:`_Hop`).

    Args:
        lt: the loop thread.
        coro: the coroutine.
        timeout: seconds to wait; None waits forever.

    Raises:
        RuntimeError: called on the loop's own thread, or the loop is stopped.
        TimeoutError: ``timeout`` passed (the coroutine is cancelled).
        Exception: whatever ``coro`` raised.
    """
    if lt.in_loop_thread():
        coro.close()
        raise RuntimeError(f"blocking client call on its own loop thread {lt.name!r}; await the async client")
    hop = _Hop(coro)
    try:
        lt.loop.call_soon_threadsafe(hop.start)
    except RuntimeError:  # loop closed
        coro.close()
        raise RuntimeError(f"loop thread {lt.name!r} is stopped") from None
    if not hop.lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
        try:
            lt.loop.call_soon_threadsafe(hop.cancel)
        except RuntimeError:
            pass
        raise TimeoutError(f"coroutine did not finish within {timeout:g}s on {lt.name!r}")
    if hop.ok:
        return hop.value  # type: ignore[no-any-return]
    raise hop.value


class AsyncCore(Protocol):
    """What a facade needs of its asyncio client."""

    @property
    def client_id(self) -> str: ...

    async def start(self) -> None: ...


CoreT = TypeVar("CoreT", bound=AsyncCore)


class BlockingFacade(Generic[CoreT]):
    """Base of the blocking clients: ``core`` runs on the client id's shared background loop.

    Subclasses define ``shutdown`` through :meth:`_shutdown_core`; the facade is a context manager
    (``start`` on enter, ``shutdown`` on exit).
    """

    def __init__(self, core: CoreT) -> None:
        self._core = core
        self._loop = acquire_loop_thread(core.client_id)
        self._released = False

    @property
    def core(self) -> CoreT:
        """The asyncio client underneath (runs on this facade's loop thread: call its coroutines
        there, e.g. through the facade's own methods)."""
        return self._core

    @property
    def client_id(self) -> str:
        """The client id (``ip@instance``) shared with the ``ClientInstance``."""
        return self._core.client_id

    def start(self) -> None:
        """Start the asyncio client underneath (its ``start``), blocking until it is started."""
        self._run(self._core.start())

    def shutdown(self) -> None:
        """Shut the asyncio client down; also stops the background loop when unused. Idempotent."""
        raise NotImplementedError

    def _shutdown_core(self, shutdown: Callable[[], Coroutine[Any, Any, None]], timeout: float) -> None:
        """Run ``shutdown()`` on the loop (at most ``timeout`` s), then drop this facade's reference
        to the loop thread (the last one stops it), even if the shutdown failed. Only the first
        call does anything."""
        if self._released:
            return
        try:
            self._run(shutdown(), timeout)
        finally:
            self._released = True
            release_loop_thread(self._core.client_id)

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """``coro`` on the client loop, blocking until done (see :func:`run_on_loop`)."""
        return run_on_loop(self._loop, coro, timeout)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the loop thread (for the core's non-async methods); returns its result."""

        async def call() -> Any:
            return fn(*args)

        return self._run(call())

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
