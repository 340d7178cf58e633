"""An embedded ``tidemq serve`` (name server + broker) for the pipelines, as a child process.

The broker runs in its own process so it gets its own interpreter (and core) next to the
publisher, the push consumer and the Spark driver. On Linux the child asks the kernel for
SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), so killing the pipeline (even with SIGKILL)
stops the broker cleanly and the next run can reopen the same store. The child runs in its own
session, so a Ctrl-C in the terminal interrupts the pipeline, which then stops the broker after
everything that uses it.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
from pathlib import Path

from tidemq.serve_process import log_tail, serve_command, spawn_serve, stop_serve, wait_ready

__all__ = ["EmbeddedBroker"]

BROKER_CONF = """\
# Written by tidemq's pipelines for the embedded broker (RocketMQ broker.conf keys).
brokerName=broker-a
# Large pulls for the Spark source and the alert consumer (RocketMQ's defaults are 32 / 8).
maxTransferCountOnMessageInMemory=8192
maxTransferBytesOnMessageInMemory=8388608
maxTransferCountOnMessageInDisk=8192
maxTransferBytesOnMessageInDisk=8388608
"""
"""The ``broker.conf`` the embedded broker runs with."""
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class EmbeddedBroker:
    """``python -m tidemq serve`` on 127.0.0.1 with free ports and a store under ``store``.

    Args:
        store: the broker's store directory (created).
        log_path: where the child's stderr goes (default ``<store>/../serve.log``).
        conf_path: where :data:`BROKER_CONF` is written (default ``<store>/../broker.conf``).
        ready_timeout: seconds to wait for the ``tidemq ready`` line.

    Attributes (after :meth:`start`): ``namesrv_addr``, ``broker_addr`` (``"127.0.0.1:port"``).

    Raises (from :meth:`start`):
        RuntimeError: the child exited or did not print its ready line in time (with its log tail).
    """

    def __init__(
        self,
        store: str | Path,
        *,
        log_path: str | Path | None = None,
        conf_path: str | Path | None = None,
        ready_timeout: float = 60.0,
    ) -> None:
        self.store = Path(store)
        self.log_path = Path(log_path) if log_path else self.store.parent / "serve.log"
        self.conf_path = Path(conf_path) if conf_path else self.store.parent / "broker.conf"
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.namesrv_addr = ""
        self.broker_addr = ""

    def command(self) -> list[str]:
        """The child's command line."""
        return serve_command(self.store, "-c", str(self.conf_path), host="127.0.0.1")

    def start(self) -> EmbeddedBroker:
        """Start the child and wait until it accepts connections; returns self."""
        self.store.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.conf_path.parent.mkdir(parents=True, exist_ok=True)
        self.conf_path.write_text(BROKER_CONF, encoding="utf-8")
        self.proc = spawn_serve(
            self.command(),
            self.log_path,
            start_new_session=True,  # Ctrl-C reaches the pipeline, which stops the broker last
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        fields, _ = wait_ready(self.proc, self.ready_timeout)
        if fields is None:
            code = self.proc.poll()
            self.stop()
            raise RuntimeError(
                f"embedded tidemq serve did not become ready within {self.ready_timeout:g}s (exit code {code}); "
                f"log {self.log_path}:\n{self.log_tail()}"
            )
        self.namesrv_addr = fields.get("namesrv", "")
        self.broker_addr = fields.get("broker", "")
        return self

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the child's log."""
        return log_tail(self.log_path, lines)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (clean shutdown: flush, checkpoint) and wait; SIGKILL after ``timeout`` s. Idempotent."""
        proc, self.proc = self.proc, None
        if proc is None:
            return 0
        return stop_serve(proc, timeout)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
