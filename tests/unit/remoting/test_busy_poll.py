"""IdlePoller: while reads come close together the loop polls (zero-timeout iterations) for its
window after each, then sleeps; sparse reads never start it."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.helpers import wait_for
from tidemq.remoting.busy_poll import POLL_WHEN_HIT, IdlePoller
from tidemq.remoting.loop import LoopThread, uvloop_available


def burst(poller: IdlePoller, reads: int = 12) -> None:
    """``reads`` reads in quick succession (each well within the window of the one before)."""
    for _ in range(reads):
        poller.touch()


async def test_polls_for_its_window_after_a_burst_of_reads_then_stops() -> None:
    poller = IdlePoller(20_000)  # 20 ms
    assert not poller.polling and poller.polls == 0
    burst(poller, 11)
    assert not poller.polling  # 11 close reads after an idle spell are not enough yet
    touched = time.monotonic()
    poller.touch()
    assert poller.polling and poller.hit_ratio >= POLL_WHEN_HIT
    await wait_for(lambda: not poller.polling, 5.0, "the polling to stop")
    assert time.monotonic() - touched >= 0.020
    assert poller.polls > 1  # the loop went round many times without sleeping
    done = poller.polls
    await asyncio.sleep(0.05)
    assert poller.polls == done  # and it sleeps again: nothing more until the next read


async def test_timers_and_other_callbacks_still_run_while_polling() -> None:
    poller = IdlePoller(200_000)
    burst(poller)
    fired = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.01, fired.set_result, "timer")
    assert await asyncio.wait_for(fired, 5.0) == "timer"
    assert poller.polling
    poller.close()
    await wait_for(lambda: not poller.polling, 5.0, "close to end the polling")


async def test_close_ends_polling_and_later_touches_do_nothing() -> None:
    poller = IdlePoller(10_000_000)  # 10 s: only close() can end it within the test
    burst(poller)
    await wait_for(lambda: poller.polls > 0, 5.0, "polling to start")
    poller.close()
    await wait_for(lambda: not poller.polling, 5.0, "close to end the polling")
    poller.touch()
    assert not poller.polling


@pytest.mark.parametrize("window", [0, -5])
async def test_a_window_that_is_not_positive_is_refused(window: int) -> None:
    with pytest.raises(ValueError, match=f"must be > 0 µs, got {window}"):
        IdlePoller(window)


@pytest.mark.skipif(not uvloop_available(), reason="uvloop is not installed")
def test_works_on_uvloop() -> None:
    async def run() -> int:
        poller = IdlePoller(20_000)
        burst(poller)
        await wait_for(lambda: not poller.polling, 5.0, "the polling to stop")
        return poller.polls

    with LoopThread("busy-poll-test") as lt:
        assert lt.run(run(), timeout=10.0) > 1


async def test_pause_stops_polling_until_resumed_and_pauses_nest() -> None:
    poller = IdlePoller(10_000_000)
    burst(poller)
    poller.pause()
    poller.pause()
    await wait_for(lambda: not poller.polling, 5.0, "pause to end the polling")
    poller.touch()
    assert not poller.polling  # a read while paused does not start it
    poller.resume()
    poller.touch()
    assert not poller.polling  # still paused once
    poller.resume()
    poller.touch()
    assert poller.polling
    poller.close()


async def test_reads_further_apart_than_the_window_never_start_polling() -> None:
    """A client that sends every few ms would only waste the CPU: no polling, however many reads."""
    poller = IdlePoller(1_000)  # 1 ms
    for _ in range(20):
        poller.touch()
        await asyncio.sleep(0.003)  # the next read comes 3 ms later
    assert poller.polls == 0 and not poller.polling and poller.hit_ratio < POLL_WHEN_HIT
    burst(poller)  # then requests come close together: polling starts
    assert poller.polling
    poller.close()


async def test_reads_alternately_close_and_far_apart_do_not_start_polling() -> None:
    """One client at 1,000 msg/s: its pull comes soon after its send, its next send long after the
    pull. Half the polls would be wasted: no polling."""
    poller = IdlePoller(2_000)  # 2 ms
    for _ in range(20):
        poller.touch()
        poller.touch()  # the pull, right after the send
        await asyncio.sleep(0.006)  # the next send
    assert 0.4 < poller.hit_ratio < POLL_WHEN_HIT
    assert poller.polls == 0
    poller.close()
