"""`tidemq send` / `tidemq consume` as a new user meets them: exact bodies, stdin, quiet logs, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from tidemq.cli import hoist_log_level, main
from tidemq.testing import ClusterThread


def _tidemq(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidemq", *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )


def test_send_body_is_exact_and_file_dash_reads_stdin(tmp_path: Path) -> None:
    """--body TEXT is sent exactly (every message); --file - sends stdin's bytes."""
    with ClusterThread(tmp_path) as cluster:
        ns = cluster.namesrv_addr
        runner = CliRunner()
        sent = runner.invoke(
            main, ["send", "--namesrv", ns, "--topic", "ExactT", "--body", "  hello, exact  ", "--count", "2"]
        )
        assert sent.exit_code == 0, sent.output
        assert [json.loads(line)["body"] for line in sent.output.splitlines()] == ["  hello, exact  "] * 2
        piped = runner.invoke(
            main, ["send", "--namesrv", ns, "--topic", "ExactT", "--file", "-"], input="line one\nline two\n"
        )
        assert piped.exit_code == 0, piped.output
        assert json.loads(piped.output)["body"] == "line one\nline two\n"
        both = runner.invoke(
            main, ["send", "--namesrv", ns, "--topic", "ExactT", "--body", "x", "--file", "-"]
        )
        assert both.exit_code == 2 and "either --body or --file" in both.output


def test_consume_without_route_fails_fast(tmp_path: Path) -> None:
    """consume on a topic nobody created exits 1 at once and says how to create it."""
    with ClusterThread(tmp_path) as cluster:
        result = CliRunner().invoke(
            main,
            [
                "consume",
                "--namesrv",
                cluster.namesrv_addr,
                "--topic",
                "NeverMade",
                "--group",
                "g",
                "--count",
                "1",
            ],
        )
        assert result.exit_code == 1
        assert "NeverMade does not exist" in result.output and "updateTopic" in result.output


def test_client_commands_are_quiet_unless_asked(tmp_path: Path) -> None:
    """send/consume log nothing on a normal run (no warning after --count); -v and --log-level after
    the subcommand turn logs on."""
    with ClusterThread(tmp_path) as cluster:
        ns = cluster.namesrv_addr
        quiet = _tidemq("send", "--namesrv", ns, "--topic", "QuietT", "--count", "3")
        assert quiet.returncode == 0, quiet.stderr
        assert quiet.stderr == ""
        consumed = _tidemq(
            "consume",
            "--namesrv",
            ns,
            "--topic",
            "QuietT",
            "--group",
            "qg",
            "--from",
            "first",
            "--count",
            "1",
            "--json",
        )
        assert consumed.returncode == 0, consumed.stderr
        assert [json.loads(line)["event"] for line in consumed.stdout.splitlines()].count("message") == 1
        assert consumed.stderr == ""  # the held messages' cancelled drain is expected, not alarming
        verbose = _tidemq("send", "--namesrv", ns, "--topic", "QuietT", "-vv")
        assert verbose.returncode == 0 and " DEBUG " in verbose.stderr
        debug = _tidemq("send", "--namesrv", ns, "--topic", "QuietT", "--log-level", "DEBUG")
        assert debug.returncode == 0 and " DEBUG " in debug.stderr


def test_log_level_is_hoisted_only_after_the_subcommand() -> None:
    """--log-level after the subcommand moves in front of it; '--' ends the search."""
    assert hoist_log_level(["send", "--topic", "t", "--log-level", "DEBUG"]) == [
        "--log-level",
        "DEBUG",
        "send",
        "--topic",
        "t",
    ]
    assert hoist_log_level(["send", "--log-level=ERROR"]) == ["--log-level=ERROR", "send"]
    assert hoist_log_level(["send", "--", "--log-level", "x"]) == ["send", "--", "--log-level", "x"]
