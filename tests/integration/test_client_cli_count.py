"""`tidemq consume --count N`: exactly N messages printed and acknowledged, the rest left for the group.

A message delivered after the N-th is neither printed nor acknowledged: the group's committed
offset stays at it, so the next ``tidemq consume`` of the group starts there. Running the command
repeatedly walks through a backlog with nothing skipped and nothing printed twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tidemq.client.cli import consume_command
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message
from tidemq.testing import ClusterThread

TOPIC, GROUP, TOTAL = "CliCountT", "cli-count-g", 23


def consume(ns: str, count: int, *extra: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(
        consume_command,
        [
            "--namesrv",
            ns,
            "--topic",
            TOPIC,
            "--group",
            GROUP,
            "--from",
            "first",
            "--count",
            str(count),
            "--duration",
            "20",
            "--json",
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines()]
    return [e for e in events if e["event"] == "message"]


def committed(cluster: ClusterThread) -> int:
    """Sum of the group's committed offsets on the broker (= messages acknowledged, from offset 0)."""
    table = cluster.broker.consumer_offset_manager.query_offset_table(GROUP, TOPIC)
    return sum(table.values())


@pytest.mark.parametrize("mode", ["concurrently", "orderly"])
def test_count_leaves_messages_after_the_nth_for_the_group(tmp_path: Path, mode: str) -> None:
    extra = ["--orderly"] if mode == "orderly" else []
    with ClusterThread(tmp_path) as cluster:
        producer = Producer(namesrv_addr=cluster.namesrv_addr, producer_group="cli-count-pg")
        producer.start()
        try:
            for i in range(TOTAL):
                producer.send(Message(TOPIC, f"m-{i}".encode()))
        finally:
            producer.shutdown()

        seen: list[str] = []
        queue_of: dict[str, int] = {}
        offset_of: dict[str, int] = {}
        first = consume(cluster.namesrv_addr, 5, *extra)
        assert len(first) == 5
        # the committed offset covers the printed messages and nothing more
        assert committed(cluster) == 5
        seen += [m["body"] for m in first]
        for m in first:
            queue_of[m["body"]], offset_of[m["body"]] = m["queueId"], m["queueOffset"]

        for run in range(3):  # 5 + 3 * 6 = 23: the last run ends exactly at the end of the backlog
            got = consume(cluster.namesrv_addr, 6, *extra)
            assert len(got) == 6, run
            seen += [m["body"] for m in got]
            for m in got:
                queue_of[m["body"]], offset_of[m["body"]] = m["queueId"], m["queueOffset"]
            assert committed(cluster) == 5 + 6 * (run + 1)

        assert sorted(seen) == sorted(f"m-{i}" for i in range(TOTAL)), "skipped or repeated messages"
        if mode == "orderly":  # each queue's messages were printed in queue-offset order
            by_queue: dict[int, list[int]] = {}
            for body in seen:
                by_queue.setdefault(queue_of[body], []).append(offset_of[body])
            assert all(offs == sorted(offs) for offs in by_queue.values())


def test_count_stops_at_duration_when_fewer_messages_exist(tmp_path: Path) -> None:
    with ClusterThread(tmp_path) as cluster:
        producer = Producer(namesrv_addr=cluster.namesrv_addr, producer_group="cli-count-pg")
        producer.start()
        try:
            for i in range(3):
                producer.send(Message(TOPIC, f"few-{i}".encode()))
        finally:
            producer.shutdown()
        result = CliRunner().invoke(
            consume_command,
            [
                "--namesrv",
                cluster.namesrv_addr,
                "--topic",
                TOPIC,
                "--group",
                GROUP,
                "--from",
                "first",
                "--count",
                "10",
                "--duration",
                "3",
            ],
        )
        assert result.exit_code == 0, result.output
        lines = [line for line in result.output.splitlines() if not line.startswith("assignment:")]
        assert sorted(line.rsplit(" ", 1)[1] for line in lines) == ["few-0", "few-1", "few-2"]
        assert committed(cluster) == 3
