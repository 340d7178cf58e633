"""The ``tidemq`` command line: ``namesrv`` and ``broker`` run apart, ``serve`` options, usage errors."""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from tidemq.cli import main
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.remoting import RemotingClient
from tidemq.testing import ServeProcess


def start(args: list[str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``python -m tidemq ARGS``; return the process and its ready line."""
    with open(log, "ab") as err:
        proc = subprocess.Popen([sys.executable, "-m", "tidemq", *args], stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in buf:
            assert time.monotonic() < deadline, log.read_text()
            if sel.select(timeout=deadline - time.monotonic()):
                chunk = os.read(proc.stdout.fileno(), 4096)
                assert chunk, f"exited early: {log.read_text()}"
                buf += chunk
    return proc, buf.decode().splitlines()[0]


def stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(30)
    if proc.stdout is not None:
        proc.stdout.close()
    return code


def test_help_lists_commands() -> None:
    """``tidemq --help`` lists serve, namesrv and broker."""
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in ("serve", "namesrv", "broker"):
        assert name in result.output


def test_broker_without_namesrv_is_a_usage_error(tmp_path: Path) -> None:
    """``tidemq broker`` with no name server exits 2 with a message saying what is missing."""
    result = CliRunner().invoke(main, ["broker", "--store", str(tmp_path / "s"), "--port", "0"])
    assert result.exit_code == 2
    assert "--namesrv" in result.output


def test_namesrv_and_broker_run_apart(tmp_path: Path) -> None:
    """``tidemq namesrv`` + ``tidemq broker --namesrv`` register, and the name server serves TBW102."""
    ns, line = start(["namesrv", "--host", "127.0.0.1", "--port", "0"], tmp_path / "ns.log")
    try:
        assert line.startswith("tidemq ready namesrv=127.0.0.1:")
        ns_addr = line.split("=", 1)[1]
        args = ["broker", "--namesrv", ns_addr, "--store", str(tmp_path / "store"), "--host", "127.0.0.1"]
        br, bline = start([*args, "--port", "0", "--broker-name", "cli-b"], tmp_path / "br.log")
        try:
            assert bline.startswith("tidemq ready broker=127.0.0.1:")

            async def route() -> bytes:
                client = RemotingClient()
                try:
                    req = RemotingCommand.create_request(
                        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
                    )
                    r = await client.invoke(ns_addr, req, 5)
                    assert r.code == ResponseCode.SUCCESS
                    return r.body
                finally:
                    await client.close()

            assert b"cli-b" in asyncio.run(route())
        finally:
            assert stop(br) == 0
    finally:
        assert stop(ns) == 0


def test_serve_with_broker_conf(tmp_path: Path) -> None:
    """``tidemq serve -c broker.conf`` takes brokerName from the file; --store wins over storePathRootDir."""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=conf-broker\nstorePathRootDir={tmp_path / 'ignored'}\n")
    store = tmp_path / "store"
    with ServeProcess(store, extra_args=["-c", str(conf)]) as proc:

        async def cluster_info() -> bytes:
            client = RemotingClient()
            try:
                req = RemotingCommand.create_request(RequestCode.GET_BROKER_CLUSTER_INFO)
                r = await client.invoke(proc.namesrv_addr, req, 5)
                return r.body
            finally:
                await client.close()

        assert b"conf-broker" in asyncio.run(cluster_info())
    assert (store / "checkpoint").exists() and not (tmp_path / "ignored").exists()
