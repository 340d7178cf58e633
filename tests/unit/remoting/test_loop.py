"""LoopThread: a background event loop used by the blocking facades."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tidemq.remoting.loop import LoopThread, new_event_loop, uvloop_available


async def _thread_name() -> str:
    return threading.current_thread().name


async def _fail() -> None:
    raise ValueError("bad input")


def test_run_returns_the_coroutine_result_from_the_loop_thread() -> None:
    """run() executes on the named daemon thread and hands back the result."""
    with LoopThread("tidemq-test") as lt:
        assert lt.run(_thread_name(), timeout=5.0) == "tidemq-test"
        assert lt.is_running


def test_run_propagates_exceptions() -> None:
    """An exception inside the coroutine is raised in the calling thread."""
    with LoopThread() as lt, pytest.raises(ValueError, match="bad input"):
        lt.run(_fail(), timeout=5.0)


def test_run_times_out_and_cancels() -> None:
    """A coroutine that outlives the timeout raises TimeoutError and is cancelled."""
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with LoopThread() as lt:
        with pytest.raises(TimeoutError, match=r"0\.05"):
            lt.run(forever(), timeout=0.05)
        assert cancelled.wait(5.0)


def test_run_from_its_own_thread_raises() -> None:
    """Calling run() on the loop's own thread would deadlock, so it raises RuntimeError."""
    with LoopThread() as lt:

        async def nested() -> str:
            try:
                lt.run(_thread_name(), timeout=1.0)
            except RuntimeError as exc:
                return str(exc)
            return "no error"

        assert "own loop thread" in lt.run(nested(), timeout=5.0)


def test_stop_is_idempotent_and_refuses_new_work() -> None:
    """After stop() the thread is gone and run() raises RuntimeError."""
    lt = LoopThread()
    lt.stop()
    lt.stop()
    assert not lt.is_running
    with pytest.raises(RuntimeError, match="stopped"):
        lt.run(_thread_name(), timeout=1.0)


def test_stop_cancels_pending_tasks() -> None:
    """Tasks still running at stop() are cancelled, not left dangling."""
    cancelled = threading.Event()

    async def background() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    lt = LoopThread()
    lt.submit(background())
    lt.stop()
    assert cancelled.is_set()


def test_new_event_loop_prefers_uvloop() -> None:
    """new_event_loop() gives a uvloop loop when uvloop is installed."""
    loop = new_event_loop()
    try:
        assert type(loop).__module__.startswith("uvloop") == uvloop_available()
    finally:
        loop.close()
