"""Test harness: a name server + broker in-process, in a background thread, or as ``tidemq serve``.

* :func:`run_cluster` -- async context manager for asyncio tests (ephemeral ports, store under
  ``tmp_path``), yielding a :class:`Cluster`.
* :class:`ClusterThread` -- the same on a :class:`~tidemq.remoting.loop.LoopThread`, for sync tests and
  for subprocess clients (C++ client interop).
* :class:`ServeProcess` -- ``python -m tidemq serve`` as a real subprocess (SIGTERM / SIGKILL tests).

Example::

    async with run_cluster(tmp_path) as cluster:
        client = RemotingClient()
        await client.invoke(cluster.broker_addr, request, 3.0)

    with ClusterThread(tmp_path) as cluster:
        run_cpp_producer(cluster.namesrv_addr)

    with ServeProcess(tmp_path / "store", flush="sync") as proc:
        ...; proc.kill()
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidemq.broker.broker import Broker
from tidemq.broker.config import BrokerConfig
from tidemq.namesrv.config import NamesrvConfig
from tidemq.namesrv.server import NameServer
from tidemq.remoting.loop import LoopThread
from tidemq.serve_process import READY_PREFIX, log_tail, serve_command, spawn_serve, stop_serve, wait_ready
from tidemq.store.config import MessageStoreConfig

LOCALHOST = "127.0.0.1"


def make_broker_configs(
    store_dir: str | Path, namesrv_addr: str | None, **overrides: Any
) -> tuple[BrokerConfig, MessageStoreConfig]:
    """Test configs: broker ``broker-a`` on 127.0.0.1 port 0 (HA port 0 too), store at ``store_dir``.

    ``overrides`` name fields of :class:`BrokerConfig` or :class:`MessageStoreConfig`
    (e.g. ``flush_disk_type="SYNC_FLUSH"``, ``auto_create_topic_enable=False``).

    Raises:
        TypeError: an override names no field of either config.
    """
    broker_fields = {f.name for f in dataclasses.fields(BrokerConfig)}
    store_fields = {f.name for f in dataclasses.fields(MessageStoreConfig)}
    b_kw: dict[str, Any] = {
        "broker_name": "broker-a",
        "listen_host": LOCALHOST,
        "listen_port": 0,
        "ha_listen_port": 0,  # free HA port, also after restart_broker pins listen_port
        "namesrv_addr": namesrv_addr,
    }
    s_kw: dict[str, Any] = {"store_path_root_dir": str(store_dir)}
    for key, value in overrides.items():
        if key in broker_fields:
            b_kw[key] = value
        elif key in store_fields:
            s_kw[key] = value
        else:
            raise TypeError(f"unknown broker/store option {key!r}")
    return BrokerConfig(**b_kw), MessageStoreConfig(**s_kw)


@dataclass
class Cluster:
    """A running name server + broker.

    Attributes:
        namesrv_addr: ``"127.0.0.1:port"`` of the name server.
        broker_addr: ``"127.0.0.1:port"`` of the broker (stable across :meth:`restart_broker`).
        namesrv / broker: the server objects (for white-box assertions).
    """

    namesrv_addr: str
    broker_addr: str
    namesrv: NameServer
    broker: Broker

    async def restart_broker(self, **overrides: Any) -> Broker:
        """Stop the broker cleanly and start a new one on the same store and port."""
        old = self.broker
        await old.shutdown()
        cfg = dataclasses.replace(old.config, listen_port=old.port)
        store_cfg = dataclasses.replace(old.store_config)
        for key, value in overrides.items():
            target = cfg if hasattr(cfg, key) else store_cfg
            setattr(target, key, value)
        self.broker = Broker(cfg, store_cfg)
        await self.broker.start()
        self.broker_addr = self.broker.addr
        return self.broker


@contextlib.asynccontextmanager
async def run_cluster(tmp_path: str | Path, **broker_overrides: Any) -> AsyncIterator[Cluster]:
    """Run a name server and a broker (``broker-a``) on 127.0.0.1 with ephemeral ports.

    The store lives in ``tmp_path/store``. ``broker_overrides`` set BrokerConfig or
    MessageStoreConfig fields. Both servers are shut down cleanly on exit.
    """
    namesrv = NameServer(NamesrvConfig(), LOCALHOST, 0)
    await namesrv.start()
    try:
        ns_addr = f"{LOCALHOST}:{namesrv.port}"
        bc, sc = make_broker_configs(Path(tmp_path) / "store", ns_addr, **broker_overrides)
        broker = Broker(bc, sc)
        await broker.start()
        cluster = Cluster(ns_addr, broker.addr, namesrv, broker)
        try:
            yield cluster
        finally:
            await cluster.broker.shutdown()
    finally:
        await namesrv.shutdown()


class ClusterThread:
    """:func:`run_cluster` on a background event-loop thread, for synchronous code.

    Args:
        tmp_path: directory for the store (``tmp_path/store``).
        broker_overrides: BrokerConfig / MessageStoreConfig fields.

    Use as a context manager or call :meth:`start` / :meth:`stop`; :meth:`restart` restarts the
    broker on the same store and port. ``namesrv_addr`` / ``broker_addr`` are set once started.
    """

    def __init__(self, tmp_path: str | Path, **broker_overrides: Any) -> None:
        self.tmp_path = Path(tmp_path)
        self.overrides = broker_overrides
        self.loop_thread: LoopThread | None = None
        self.cluster: Cluster | None = None
        self._cm: contextlib.AbstractAsyncContextManager[Cluster] | None = None

    @property
    def namesrv_addr(self) -> str:
        assert self.cluster is not None, "cluster not started"
        return self.cluster.namesrv_addr

    @property
    def broker_addr(self) -> str:
        assert self.cluster is not None, "cluster not started"
        return self.cluster.broker_addr

    @property
    def broker(self) -> Broker:
        assert self.cluster is not None, "cluster not started"
        return self.cluster.broker

    def start(self, timeout: float = 30.0) -> ClusterThread:
        """Start both servers; returns self."""
        self.loop_thread = LoopThread("tidemq-cluster")
        cm = run_cluster(self.tmp_path, **self.overrides)
        self._cm = cm
        self.cluster = self.loop_thread.run(cm.__aenter__(), timeout)
        return self

    def restart(self, timeout: float = 30.0, **overrides: Any) -> None:
        """Restart the broker (clean shutdown, same store and port)."""
        assert self.loop_thread is not None and self.cluster is not None, "cluster not started"
        self.loop_thread.run(self.cluster.restart_broker(**overrides), timeout)

    def run(self, coro: Any, timeout: float | None = 30.0) -> Any:
        """Run a coroutine on the cluster's loop thread and return its result."""
        assert self.loop_thread is not None, "cluster not started"
        return self.loop_thread.run(coro, timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop both servers and the loop thread. Idempotent."""
        if self.loop_thread is None:
            return
        try:
            if self._cm is not None:
                self.loop_thread.run(self._cm.__aexit__(None, None, None), timeout)
        finally:
            self._cm = None
            self.loop_thread.stop()
            self.loop_thread = None

    def __enter__(self) -> ClusterThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ServeProcess:
    """``python -m tidemq serve`` as a subprocess on 127.0.0.1 with free ports.

    Args:
        store: store directory.
        flush: ``"async"`` or ``"sync"``.
        extra_args: more ``tidemq serve`` options.
        ready_timeout: seconds to wait for the ready line.
        log_path: where the process's stderr goes (default ``<store>/../serve-<pid>.log`` style file
            next to the store; None keeps it in a temporary file).

    Attributes (after start): ``namesrv_addr``, ``broker_addr``, ``fields`` (the ready line's), ``proc``.

    Raises (from :meth:`start`):
        RuntimeError: the process exited or printed nothing ready within ``ready_timeout``
            (the message includes the tail of its log).
    """

    READY_PREFIX = READY_PREFIX

    def __init__(
        self,
        store: str | Path,
        *,
        flush: str = "async",
        extra_args: list[str] | None = None,
        ready_timeout: float = 30.0,
        log_path: str | Path | None = None,
    ) -> None:
        self.store = Path(store)
        self.flush = flush
        self.extra_args = list(extra_args or [])
        self.ready_timeout = ready_timeout
        self.log_path = Path(log_path) if log_path else self.store.parent / f"serve-{self.store.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.namesrv_addr = ""
        self.broker_addr = ""
        self.fields: dict[str, str] = {}  # every key=value of the ready line (metrics=, dashboard=...)

    def command(self) -> list[str]:
        """The command line that is run."""
        return serve_command(self.store, "--flush", self.flush, *self.extra_args, host=LOCALHOST)

    def start(self) -> ServeProcess:
        """Start the process and wait for its ready line; returns self."""
        self.store.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.proc = spawn_serve(self.command(), self.log_path)
        fields, stdout = wait_ready(self.proc, self.ready_timeout)
        if fields is None:
            code = self.proc.poll()
            self.kill()
            raise RuntimeError(
                f"tidemq serve did not become ready within {self.ready_timeout:g}s (exit code {code}); "
                f"stdout={stdout[-500:]!r}; log tail:\n{self.log_tail()}"
            )
        self.fields = dict(fields)
        self.namesrv_addr = fields.get("namesrv", "")
        self.broker_addr = fields.get("broker", "")
        return self

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the process's stderr log."""
        return log_tail(self.log_path, lines)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait (SIGKILL after ``timeout`` seconds); returns the exit code (0 after a clean stop)."""
        if self.proc is None:
            return 0
        return stop_serve(self.proc, timeout)

    def kill(self) -> int:
        """SIGKILL (a crash) and wait; returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait()
        self._close()
        return code

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()


def serve_subprocess(store: str | Path, *, flush: str = "async", **kwargs: Any) -> ServeProcess:
    """Start ``tidemq serve`` on ``store`` and return the running :class:`ServeProcess`."""
    return ServeProcess(store, flush=flush, **kwargs).start()


# -- processes (Linux /proc), for benches and tests of the Spark launcher -------------------------


def child_pids() -> dict[int, list[int]]:
    """Every live process's children: parent pid -> child pids (Linux ``/proc``)."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            out.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    return out


def zygote_pids(owners: set[int]) -> list[int]:
    """The Spark launcher's zygotes (``tidemq.spark.launcher``, command line ``--zygote ADDRESS
    OWNER``) serving the processes ``owners`` (Spark JVMs); they run in a session of their own,
    outside their owner's process tree (Linux ``/proc``)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--zygote" in argv:
                at = argv.index(b"--zygote")
                if len(argv) > at + 2 and argv[at + 2].isdigit() and int(argv[at + 2]) in owners:
                    out.append(int(entry))
    return out
