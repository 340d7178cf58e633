"""Run ``python -m tidemq serve`` as a child process and wait for its ready line.

The pieces shared by :class:`tidemq.testing.ServeProcess` (tests, benchmarks) and
:class:`tidemq.pipelines.embedded.EmbeddedBroker` (the pipelines' broker). Standard library only,
so importing it pulls in no broker, store or test code.

``tidemq serve`` prints one line ``tidemq ready namesrv=HOST:PORT broker=HOST:PORT`` on stdout
once both servers accept connections (see ``tidemq/cli.py``); its log goes to stderr.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = [
    "READY_PREFIX",
    "log_tail",
    "serve_command",
    "spawn_serve",
    "stop_serve",
    "wait_ready",
]

READY_PREFIX = "tidemq ready "
"""How the ready line that ``tidemq serve`` prints on stdout begins."""


def serve_command(store: str | Path, *extra_args: str, host: str = "127.0.0.1") -> list[str]:
    """``python -m tidemq serve`` on ``host`` with free ports (name server and broker port 0).

    Args:
        store: the broker's store directory (``--store``).
        extra_args: more ``tidemq serve`` options, appended as given.
        host: the listen host (``--host``).
    """
    return [
        sys.executable,
        "-m",
        "tidemq",
        "serve",
        "--store",
        str(store),
        "--host",
        host,
        "--namesrv-port",
        "0",
        "--broker-port",
        "0",
        *extra_args,
    ]


def spawn_serve(command: list[str], log_path: Path, **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """Start ``command`` with stdout piped (for :func:`wait_ready`) and stderr appended to ``log_path``.

    The child runs with ``PYTHONUNBUFFERED=1`` so its log is current. ``popen_kwargs`` go to
    :class:`subprocess.Popen` as they are (e.g. ``start_new_session``, ``preexec_fn``).

    Raises:
        OSError: the log could not be opened or the command not started.
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log_path, "ab") as log_file:  # the child keeps its own descriptor
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log_file, env=env, **popen_kwargs)


def wait_ready(proc: subprocess.Popen[bytes], timeout: float) -> tuple[dict[str, str] | None, bytes]:
    """Read ``proc``'s stdout until its ready line, for at most ``timeout`` seconds.

    Returns:
        ``(fields, stdout)``: the ready line's ``key=value`` fields (e.g. ``{"namesrv":
        "127.0.0.1:40123", "broker": "127.0.0.1:40125"}``), or None when the child closed its
        stdout (exited) or printed no ready line in time; ``stdout`` is everything read so far.
    """
    assert proc.stdout is not None, "spawn the child with stdout=PIPE"
    deadline = time.monotonic() + timeout
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            for raw in buf.split(b"\n")[:-1]:
                text = raw.decode(errors="replace").strip()
                if text.startswith(READY_PREFIX):
                    fields = text[len(READY_PREFIX) :].split()
                    return dict(part.split("=", 1) for part in fields if "=" in part), buf
    return None, buf


def stop_serve(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """SIGTERM (clean shutdown: flush, checkpoint) and wait; SIGKILL after ``timeout`` seconds.

    Closes the child's stdout pipe. Returns the exit code (0 after a clean stop).
    """
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    return code


def log_tail(log_path: Path, lines: int) -> str:
    """The last ``lines`` lines of the child's log (empty if it cannot be read)."""
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
