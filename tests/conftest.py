"""Fixtures for every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tidemq.remoting.log_limit import bad_frame_log, bad_request_log

# Property tests check properties, not speed: on a shared 2-core VM a stall of a second or two
# tripped Hypothesis's timing checks (deadline, too_slow) and failed tests whose property held.
settings.register_profile("tidemq", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tidemq")


@pytest.fixture(autouse=True)
def fresh_log_budgets() -> Iterator[None]:
    """Every test starts with the per-peer warning budgets of the rate limiter full: all tests talk
    from 127.0.0.1, so one test's bad frames must not silence the next test's expected warning."""
    bad_frame_log.flush()
    bad_request_log.flush()
    yield
    bad_frame_log.flush()
    bad_request_log.flush()
