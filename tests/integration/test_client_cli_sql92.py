"""`tidemq send --property` / `tidemq consume --sql` against an in-process cluster."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tidemq.client.cli import consume_command, send_command
from tidemq.testing import ClusterThread


def test_consume_with_sql_prints_only_matching_messages(tmp_path: Path) -> None:
    with ClusterThread(tmp_path) as cluster:
        runner = CliRunner()
        common = ["--namesrv", cluster.namesrv_addr, "--topic", "CliSql"]
        for a in ("3", "7", "9"):
            sent = runner.invoke(send_command, [*common, "--body", f"a{a}", "--property", f"a={a}"])
            assert sent.exit_code == 0, sent.output
        consume = [*common, "--group", "cli-sql", "--from", "first", "--duration", "20", "--json"]
        got = runner.invoke(consume_command, [*consume, "--sql", "a > 5", "--count", "2"])
        assert got.exit_code == 0, got.output
        bodies = [e["body"] for e in map(json.loads, got.output.splitlines()) if e["event"] == "message"]
        assert sorted(bodies) == ["a7", "a9"]
        bad = runner.invoke(consume_command, [*consume, "--sql", "a >"])
        assert bad.exit_code == 2 and "Invalid MessageSelector" in bad.output
        bad_property = runner.invoke(send_command, [*common, "--property", "novalue"])
        assert bad_property.exit_code == 2 and "NAME=VALUE" in bad_property.output
