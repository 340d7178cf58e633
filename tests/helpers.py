"""Helpers shared by the test packages: waiting on a condition with a deadline (never a bare sleep),
push consumers set up the way most integration tests want them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tidemq.client.consumer.push import AsyncPushConsumer


def poll(cond: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    """Check ``cond()`` every ``interval`` s until it holds or ``timeout`` s pass; whether it held.

    The one waiting loop of the test suite (synchronous: the condition is made true by other
    threads or processes); :func:`wait_for_sync` raises instead of returning False.
    """
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            return bool(cond())
        time.sleep(interval)
    return True


async def poll_async(cond: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    """:func:`poll` for coroutines: yields to the event loop between checks."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            return bool(cond())
        await asyncio.sleep(interval)
    return True


async def wait_for(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.01) -> float:
    """Wait until ``cond()`` holds (checked every ``interval`` s, yielding to the event loop);
    return the seconds it took.

    Raises:
        AssertionError: ``cond()`` did not hold within ``timeout`` seconds (the message names ``what``).
    """
    start = time.monotonic()
    if not await poll_async(cond, timeout, interval):
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")
    return time.monotonic() - start


async def wait_until(
    check: Callable[[], Awaitable[bool]], timeout: float, what: str, interval: float = 0.01
) -> float:
    """:func:`wait_for` for a condition that must itself await (ask the broker or name server):
    ``await check()`` every ``interval`` s until it returns True; the seconds it took.

    Raises:
        AssertionError: ``check()`` did not return True within ``timeout`` seconds (names ``what``).
    """
    start = time.monotonic()
    deadline = start + timeout
    while not await check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)
    return time.monotonic() - start


def wait_for_sync(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.01) -> float:
    """:func:`wait_for` for synchronous tests (the condition is made true by other threads or processes)."""
    start = time.monotonic()
    if not poll(cond, timeout, interval):
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")
    return time.monotonic() - start


def push_consumer(
    namesrv_addr: str,
    group: str,
    topic: str,
    listener: Any,
    expression: str = "*",
    *,
    orderly: bool = False,
    **config: Any,
) -> AsyncPushConsumer:
    """An :class:`AsyncPushConsumer` of ``group`` on ``topic`` / ``expression``, reading from the first
    offset (``CONSUME_FROM_FIRST_OFFSET``), with ``listener`` registered; not started.

    ``config`` sets more :class:`~tidemq.client.config.PushConsumerConfig` fields.
    """
    consumer = AsyncPushConsumer(
        namesrv_addr=namesrv_addr,
        consumer_group=group,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        **config,
    )
    consumer.subscribe(topic, expression)
    consumer.register_message_listener(listener, orderly=orderly)
    return consumer


async def start_push_consumer(
    namesrv_addr: str,
    group: str,
    topic: str,
    listener: Any,
    expression: str = "*",
    *,
    orderly: bool = False,
    **config: Any,
) -> AsyncPushConsumer:
    """:func:`push_consumer`, started."""
    consumer = push_consumer(namesrv_addr, group, topic, listener, expression, orderly=orderly, **config)
    await consumer.start()
    return consumer


SQL92_SELECTOR = "a > 5 AND b = 'x'"
"""The selector transactions.md §2.3's vectors are written for."""
SQL92_VECTORS: list[tuple[str | None, str | None, str | None, bool]] = [
    ("7", "x", None, True),
    ("5", "x", None, False),
    (None, "x", None, False),
    ("abc", "x", None, False),
    ("7.5", "x", None, False),
    ("3000000000", "x", None, False),
    ("9", "X", None, False),
    ("9", "x", "another", True),
]
"""transactions.md §2.3's test vectors: ``(a, b, tag, matches SQL92_SELECTOR)``, None = absent."""


def sql92_props(a: str | None, b: str | None) -> dict[str, str]:
    """The user properties of one :data:`SQL92_VECTORS` row (absent ones left out)."""
    return {k: v for k, v in (("a", a), ("b", b)) if v is not None}
