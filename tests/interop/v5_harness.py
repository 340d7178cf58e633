"""Run RocketMQ 5's official clients (Python and Node) as subprocesses for the gRPC interop tests.

``run_v5(lang, spec)`` runs ``v5_python_client.py`` with ``.venv-v5``'s interpreter (``make
v5-venv``) or ``v5_node_client.js`` with node (``make node-check``) on one JSON spec and returns the
JSON it printed. A test calls :func:`require` first, which skips with the reason when a client is
not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
V5_PYTHON = ROOT / ".venv-v5" / "bin" / "python"
NODE_CLIENT = HERE / "node" / "node_modules" / "rocketmq-client-nodejs"
LANGS = ("python", "node")


def missing(lang: str) -> str | None:
    """Why the ``lang`` v5 client cannot run here, or None."""
    if lang == "python":
        if not V5_PYTHON.exists():
            return f"no {V5_PYTHON} (make v5-venv installs rocketmq-python-client 5.1.2)"
        return None
    if shutil.which("node") is None:
        return "no node on PATH (make node-check installs it)"
    if not NODE_CLIENT.exists():
        return f"no {NODE_CLIENT} (make node-check installs rocketmq-client-nodejs 1.0.8)"
    return None


def require(*langs: str) -> None:
    """Skip the test, saying why, unless every client in ``langs`` can run."""
    for lang in langs:
        reason = missing(lang)
        if reason:
            pytest.skip(reason)


def run_v5(lang: str, spec: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """Run one client action; returns its JSON output.

    Raises:
        AssertionError: the client exited non-zero or printed no JSON (its stderr tail included).
    """
    if lang == "python":
        cmd = [str(V5_PYTHON), str(HERE / "v5_python_client.py"), json.dumps(spec)]
    else:
        cmd = ["node", str(HERE / "v5_node_client.js"), json.dumps(spec)]
    with tempfile.TemporaryDirectory(prefix="v5-home-") as home:
        env = dict(os.environ, HOME=home)  # both clients write logs under ~/logs/rocketmq
        env.pop("PYTHONPATH", None)
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env, check=False)
    lines = [ln for ln in proc.stdout.decode(errors="replace").splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, (
        f"{lang} v5 client failed (exit {proc.returncode}): {proc.stderr.decode(errors='replace')[-2000:]}"
    )
    out: dict[str, Any] = json.loads(lines[-1])
    return out
