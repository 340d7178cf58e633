"""start_eagerly: a coroutine runs inside the call up to its first wait; only the rest is a task."""

from __future__ import annotations

import asyncio

import pytest

from tidemq.remoting.eager import start_eagerly


async def test_a_coroutine_that_never_waits_runs_inside_the_call_and_needs_no_task() -> None:
    done: list[str] = []

    async def work() -> None:
        done.append("ran")

    assert start_eagerly(work()) is None
    assert done == ["ran"]


async def test_the_part_before_the_first_wait_runs_inside_the_call_the_rest_in_a_task() -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[int] = loop.create_future()
    steps: list[object] = []

    async def work() -> None:
        steps.append("before")
        steps.append(await gate)

    task = start_eagerly(work())
    assert steps == ["before"] and task is not None and not task.done()
    gate.set_result(7)
    await asyncio.wait_for(task, 5)
    assert steps == ["before", 7]


async def test_errors_before_the_first_wait_reach_the_caller_later_ones_the_task() -> None:
    loop = asyncio.get_running_loop()

    async def fails_at_once() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        start_eagerly(fails_at_once())

    gate: asyncio.Future[None] = loop.create_future()

    async def fails_later() -> None:
        await gate
        raise KeyError("later")

    task = start_eagerly(fails_later())
    assert task is not None
    gate.set_result(None)
    with pytest.raises(KeyError):
        await asyncio.wait_for(task, 5)


async def test_cancelling_the_task_reaches_the_coroutine_at_its_wait() -> None:
    loop = asyncio.get_running_loop()
    cleaned: list[str] = []

    async def work() -> None:
        try:
            await loop.create_future()
        finally:
            cleaned.append("finally")

    task = start_eagerly(work())
    assert task is not None
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["finally"]
