"""`tidemq send` / `tidemq consume` against an in-process cluster."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tidemq.client.cli import consume_command, send_command
from tidemq.testing import ClusterThread


def test_send_then_consume_prints_json_lines(tmp_path: Path) -> None:
    """send prints one 'sent' line per message; consume prints assignment + every message, then exits."""
    with ClusterThread(tmp_path) as cluster:
        runner = CliRunner()
        sent = runner.invoke(
            send_command,
            [
                "--namesrv",
                cluster.namesrv_addr,
                "--topic",
                "CliT",
                "--tag",
                "T1",
                "--count",
                "3",
                "--size",
                "16",
            ],
        )
        assert sent.exit_code == 0, sent.output
        lines = [json.loads(line) for line in sent.output.splitlines()]
        assert [line["body"] for line in lines] == [
            "tidemq-msg-0....",
            "tidemq-msg-1....",
            "tidemq-msg-2....",
        ]
        assert all(line["event"] == "sent" and line["status"] == "SEND_OK" for line in lines)
        got = runner.invoke(
            consume_command,
            [
                "--namesrv",
                cluster.namesrv_addr,
                "--topic",
                "CliT",
                "--group",
                "cli-g",
                "--from",
                "first",
                "--count",
                "3",
                "--duration",
                "20",
                "--json",
            ],
        )
        assert got.exit_code == 0, got.output
        events = [json.loads(line) for line in got.output.splitlines()]
        msgs = [e for e in events if e["event"] == "message"]
        assert sorted(m["body"] for m in msgs) == sorted(line["body"] for line in lines)
        assert all(m["tags"] == "T1" for m in msgs)
        assert any(e["event"] == "assignment" and e["queues"] for e in events)
