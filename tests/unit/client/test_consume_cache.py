"""The lite consumer's ConsumeRequestCache: FIFO, taken on the loop or from another thread."""

from __future__ import annotations

import asyncio
import threading

from tidemq.client.consumer.consume_cache import ConsumeRequestCache


async def test_async_take_waits_for_a_put_and_times_out() -> None:
    cache: ConsumeRequestCache[int] = ConsumeRequestCache()
    assert await cache.take(0.01) is None
    asyncio.get_running_loop().call_later(0.05, cache.put, 1)
    cache.put(0)
    assert [await cache.take(1.0), await cache.take(1.0)] == [0, 1]
    assert len(cache) == 0


async def test_blocking_take_from_another_thread_sees_loop_puts_in_order() -> None:
    cache: ConsumeRequestCache[int] = ConsumeRequestCache()
    got: list[int | None] = []

    def taker() -> None:
        for _ in range(3):
            got.append(cache.take_blocking(5.0))
        got.append(cache.take_blocking(0.05))  # nothing left: None after the timeout

    thread = threading.Thread(target=taker)
    thread.start()
    for i in range(3):
        cache.put(i)
        await asyncio.sleep(0)
    await asyncio.to_thread(thread.join, 10)
    assert not thread.is_alive()
    assert got == [0, 1, 2, None]


async def test_put_from_another_thread_wakes_an_async_taker() -> None:
    cache: ConsumeRequestCache[int] = ConsumeRequestCache()
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, lambda: threading.Thread(target=cache.put_from_thread, args=(7,)).start())
    assert await cache.take(5.0) == 7


async def test_put_from_another_thread_wakes_a_blocking_taker_in_order() -> None:
    cache: ConsumeRequestCache[int] = ConsumeRequestCache()
    cache.put(0)
    putter = threading.Thread(target=lambda: [cache.put_from_thread(i) for i in (1, 2)])
    putter.start()
    got = [await asyncio.to_thread(cache.take_blocking, 5.0) for _ in range(3)]
    putter.join(10)
    assert got == [0, 1, 2]
