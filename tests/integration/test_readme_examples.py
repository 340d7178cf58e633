"""The README's Python quick starts run as written against a real broker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tidemq.testing import ClusterThread

README = Path(__file__).resolve().parents[2] / "README.md"


PRELUDE = """\
import builtins as _builtins, threading as _threading
_expected, _printed, _printed_all = {expected!r}, [], _threading.Event()
def print(*args, **kwargs):  # records the example's output; sets _printed_all once all expected lines were printed
    _builtins.print(*args, **kwargs, flush=True)
    _printed.append(" ".join(map(str, args)))
    if all(any(e in line for line in _printed) for e in _expected):
        _printed_all.set()
"""


def _python_blocks() -> list[str]:
    """The client examples (the Spark one runs in tests/spark/test_readme_spark.py)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    return [b for b in blocks if "pyspark" not in b]


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_python_example_runs(tmp_path: Path, index: int) -> None:
    """Each ```python block of the README runs to completion against `tidemq serve`'s broker."""
    code = _python_blocks()[index]
    with ClusterThread(tmp_path / "store") as cluster:
        code = code.replace("127.0.0.1:9876", cluster.namesrv_addr)
        # Every example sends and then consumes what it sent: its output shows the bodies it got.
        expected = ["SEND_OK", "b'{\"id\": 1}'"] if "send_status" in code else ["b'order-0'", "b'order-31'"]
        # "..." (and the async example's sleep) stand for "your program runs here": run until the
        # expected lines have been printed (a condition with a deadline), not for a fixed time.
        code = code.replace("\n...\n", "\n_printed_all.wait(60)\n")
        code = code.replace(
            "await asyncio.sleep(5)",
            "await asyncio.get_running_loop().run_in_executor(None, _printed_all.wait, 60)",
        )
        script = tmp_path / "example.py"
        script.write_text(PRELUDE.format(expected=expected) + code)
        proc = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
    assert proc.returncode == 0, f"README example {index} failed:\n{proc.stdout}\n{proc.stderr}"
    for needle in expected:
        assert needle in proc.stdout, f"README example {index} did not print {needle}:\n{proc.stdout}"
