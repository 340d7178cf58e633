"""Fixtures for every test package."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tidemq.remoting.log_limit import bad_frame_log, bad_request_log

# Property tests check properties, not speed: on a shared 2-core VM a stall of a second or two
# tripped Hypothesis's timing checks (deadline, too_slow) and failed tests whose property held.
settings.register_profile("tidemq", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tidemq")

_SPARK_DIRS = ("spark", "pipelines")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the group into the node id
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` runs the suite in two processes (pytest-xdist, ``--dist loadgroup``): every
    test that starts Spark (tests/spark, tests/pipelines) goes to one of them, in order, so one
    JVM runs at a time and the session-scoped SparkSession is started once; the other process
    takes everything else."""
    here = Path(__file__).parent
    for item in items:
        parts = Path(str(item.fspath)).relative_to(here).parts
        if parts and parts[0] in _SPARK_DIRS:
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(autouse=True)
def fresh_log_budgets() -> Iterator[None]:
    """Every test starts with the per-peer warning budgets of the rate limiter full: all tests talk
    from 127.0.0.1, so one test's bad frames must not silence the next test's expected warning."""
    bad_frame_log.flush()
    bad_request_log.flush()
    yield
    bad_frame_log.flush()
    bad_request_log.flush()
