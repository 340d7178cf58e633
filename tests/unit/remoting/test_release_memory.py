"""release_free_memory: libc is looked up when first needed, not when tidemq.remoting is imported."""

from __future__ import annotations

import subprocess
import sys

from tidemq.remoting.idle import release_free_memory


def test_importing_remoting_looks_up_no_library() -> None:
    # ctypes.util.find_library starts /sbin/ldconfig: no process may pay it just for importing the
    # client side (each Spark streaming query starts a Python process that does)
    code = "import sys, tidemq.remoting; print('ctypes.util' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_release_free_memory_runs_twice() -> None:
    release_free_memory()
    release_free_memory()
