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

from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, Self, TypeVar

from tidemq.client.instance import acquire_loop_thread, release_loop_thread

__all__ = ["BlockingFacade"]


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
    def client_id(self) -> str:
        """The client id (``ip@instance``) shared with the ``ClientInstance``."""
        return self._core.client_id

    def start(self) -> None:
        """Start the asyncio client underneath (its ``start``), blocking until it is started."""
        self._loop.run(self._core.start())

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
            self._loop.run(shutdown(), timeout=timeout)
        finally:
            self._released = True
            release_loop_thread(self._core.client_id)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the loop thread (for the core's non-async methods); returns its result."""

        async def call() -> Any:
            return fn(*args)

        return self._loop.run(call())

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
