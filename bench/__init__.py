"""Benchmarks: scripts that print figures (``python -m bench.<name>``); speed goals live here, not in
tests."""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidemq.remoting.client import RemotingClient


def interpreter() -> dict[str, str]:
    """The Python the figures were measured on: ``{"python": "3.11.2", "executable": path, "compiler":
    ..., "build": ...}``. CPython's speed depends on how it was built (PGO and LTO or not), so
    figures from two interpreters do not compare."""
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "compiler": platform.python_compiler(),
        "build": " ".join(platform.python_build()),
    }


def loopback_round_trip_us(count: int = 3000) -> dict[str, float]:
    """A bare loopback TCP ping-pong between this process and a forked child: ``{"p50_us": ...,
    "p99_us": ...}`` over ``count`` round trips of 64 bytes.

    What it tells: how expensive waking another process is on this machine right now. On the
    2-vCPU VM the figures come from, it is 18-27 us while both vCPUs are busy and 130-150 us while
    they idle (an idle vCPU halts and is woken through the hypervisor), and every shape that waits
    for another process moves with it, Redis's as much as tidemq's. Print it beside figures that
    are compared across runs.

    Raises:
        OSError: the child did not connect or echo within 10 s (``TimeoutError``) or closed early
            (``ConnectionError``).
    """
    import os
    import socket
    import statistics
    import time

    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10.0)  # a child that cannot connect fails the call instead of hanging it
    port = server.getsockname()[1]
    pid = os.fork()
    if pid == 0:  # the child echoes until the parent closes
        try:
            server.close()
            peer = socket.create_connection(("127.0.0.1", port))
            peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := peer.recv(64):
                peer.sendall(data)
        finally:
            os._exit(0)
    rtts: list[float] = []
    try:
        try:
            conn, _ = server.accept()
        finally:
            server.close()
        with conn:
            conn.settimeout(10.0)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ping = b"x" * 64
            for _ in range(count):
                start = time.perf_counter()
                conn.sendall(ping)
                got = 0
                while got < len(ping):
                    data = conn.recv(64)
                    if not data:
                        raise ConnectionError("the echoing child closed the connection")
                    got += len(data)
                rtts.append((time.perf_counter() - start) * 1e6)
    finally:
        os.waitpid(pid, 0)  # the child ends once the connection is closed (or never made)
    q = statistics.quantiles(rtts, n=100)
    return {"p50_us": round(q[49], 1), "p99_us": round(q[98], 1)}


def rss(pid: int) -> dict[str, float]:
    """``VmRSS``, ``RssAnon``, ``RssFile`` of ``pid`` in MiB (Linux ``/proc``)."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


async def create_topic(
    client: RemotingClient, addr: str, topic: str, queues: int, timeout: float = 10.0
) -> None:
    """UPDATE_AND_CREATE_TOPIC ``topic`` with ``queues`` read and write queues (perm RW) on the
    broker at ``addr``, waiting at most ``timeout`` seconds.

    Raises:
        RuntimeError: the broker refused (its code and remark).
        TideMQError, OSError: the request failed (timeout, connection).
    """
    from tidemq.protocol.codes import RequestCode, ResponseCode
    from tidemq.protocol.command import RemotingCommand
    from tidemq.protocol.headers import CreateTopicRequestHeader

    h = CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues,
        write_queue_nums=queues,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    request = RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext_fields())
    r = await client.invoke(addr, request, timeout)
    if r.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"create topic {topic} failed: {r.code} {r.remark}")


def spark_session(app_name: str) -> Any:
    """A ``local[2]`` SparkSession for the Spark benches: Spark's Python processes through
    tidemq's launcher, no UI, errors-only log, the tidemq format registered."""
    import os

    import tidemq.spark

    os.environ["PYSPARK_PYTHON"] = tidemq.spark.python_launcher(sys.executable)
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    tidemq.spark.register(spark)
    return spark
