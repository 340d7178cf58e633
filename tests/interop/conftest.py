"""Fixtures for the C++ client interop tests: an in-process cluster and subprocess bookkeeping."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.interop.harness import CppProcess
from tidemq.testing import ClusterThread

Spawn = Callable[..., CppProcess]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    """A name server + broker on a background loop thread, store under ``tmp_path``."""
    with ClusterThread(tmp_path) as c:
        yield c


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """``spawn(script, *args, name=..., stdin=False)`` starts a C++ client script; all are stopped at teardown."""
    procs: list[CppProcess] = []

    def start(script: str, *args: str, name: str = "", stdin: bool = False) -> CppProcess:
        label = name or f"{Path(script).stem}-{len(procs)}"
        proc = CppProcess(script, list(args), tmp_path / "cpp-home" / label, label, stdin=stdin)
        procs.append(proc)
        return proc

    try:
        yield start
    finally:
        for p in procs:
            p.stop()
