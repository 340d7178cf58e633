"""The README's Python quick starts run as written against a real broker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tidemq.testing import ClusterThread

README = Path(__file__).resolve().parents[2] / "README.md"


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
        # "..." stands for "your program runs here": give the consumer a moment of real work.
        code = code.replace("\n...\n", "\nimport time; time.sleep(2)\n")
        script = tmp_path / "example.py"
        script.write_text(code)
        proc = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
    assert proc.returncode == 0, f"README example {index} failed:\n{proc.stdout}\n{proc.stderr}"
    # Every example sends and then consumes what it sent: its output shows the bodies it got.
    expected = ["SEND_OK", "b'{\"id\": 1}'"] if "send_status" in code else ["b'order-0'", "b'order-31'"]
    for needle in expected:
        assert needle in proc.stdout, f"README example {index} did not print {needle}:\n{proc.stdout}"
