"""Fixtures for the HA tests: local multi-process clusters (``tidemq cluster``) and C++ clients."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.harness import CppProcess
from tidemq.admin.client import AdminClient
from tidemq.cluster import LocalCluster

StartCluster = Callable[..., LocalCluster]
Spawn = Callable[..., CppProcess]

SMALL_SEGMENTS = {"mappedFileSizeCommitLog": str(4 << 20), "flushConsumerOffsetInterval": "1000"}
"""broker.conf lines for every test broker: 4 MiB commit-log segments, offsets persisted every second."""


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[StartCluster]:
    """``start_cluster(groups=, replicas=, ...)`` starts a :class:`LocalCluster` under ``tmp_path``;
    every process is stopped at teardown, also on failure."""
    started: list[LocalCluster] = []

    def start(**kwargs: Any) -> LocalCluster:
        extra = {**SMALL_SEGMENTS, **kwargs.pop("extra_conf", {})}
        cluster = LocalCluster(tmp_path / f"cluster-{len(started)}", extra_conf=extra, **kwargs)
        started.append(cluster)
        return cluster.up()

    try:
        yield start
    finally:
        for cluster in started:
            cluster.down(timeout=15)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """``spawn(script, *args, name=...)`` runs a C++ client script of tests/interop; stopped at teardown."""
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


def broker_file(cluster: LocalCluster, node: str, name: str) -> Any:
    """A broker's ``store/config/<name>`` JSON (what an operator would look at), None if absent."""
    path = Path(cluster.node(node).dir) / "store" / "config" / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def slave_has_topic(cluster: LocalCluster, node: str, topic: str) -> bool:
    """Whether the slave copied ``topic`` from its master (SlaveSynchronize, every 10 s)."""
    topics = broker_file(cluster, node, "topics.json")
    return bool(topics) and topic in topics.get("topicConfigTable", {})


def create_topic(cluster: LocalCluster, topic: str, queues: int) -> None:
    """``mqadmin updateTopic`` on every master."""
    with AdminClient(cluster.namesrv_addr) as admin:
        admin.call("create_topic", topic, queues)
