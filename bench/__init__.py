"""Benchmarks: scripts that print figures (``python -m bench.<name>``); speed goals live here, not in
tests."""

from __future__ import annotations

import platform
import sys


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
