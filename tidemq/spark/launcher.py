"""A Python launcher for the processes Spark starts: the installed PySpark instead of ``pyspark.zip``.

Spark starts each Python process it needs with ``$SPARK_HOME/python/lib/pyspark.zip`` first on
``PYTHONPATH`` (``PythonWorkerFactory``). Python has no bytecode cache for modules imported from a
zip, so every such process compiles PySpark's modules again: about 0.4 s of CPU before it does any
work. Executors pay it once per daemon, but the driver side of a streaming query of a Python data
source pays it per query (PySpark 4.3 starts a new ``python_streaming_source_runner`` process for
each query), which is most of the fixed cost of a short ``Trigger.AvailableNow`` run.

The launcher is a small executable (``/bin/sh`` script, made by :func:`python_launcher`) that runs
``python <this file> -m <module> ...``. In the process, before the module runs,
:func:`prefer_installed` moves the zip to the end of ``sys.path`` when the PySpark installed in that
interpreter is the same PySpark as the zip's (:func:`same_pyspark`: same ``version.py``, the same
files, test modules aside); the modules then load from the installed package's cached bytecode.
When they differ, or there is no installed PySpark, nothing changes. Any command line
other than ``-m module ...`` (Spark also runs ``python -c ...`` and ``python -VV``) is handed to the
interpreter unchanged (``exec``).

Two more things happen before the module runs, both for the same fixed cost:

* ``OMP_NUM_THREADS`` is set to 1 when it is not set. Spark sets it (to the task's cores) for the
  Python workers that run tasks, but not for the processes it starts for a query's driver side, where
  importing numpy (pyarrow imports it) then starts an OpenBLAS thread per core: about 0.1 s of CPU per
  streaming query for threads nothing uses.
* Under ``PYTHONDONTWRITEBYTECODE`` (``sys.dont_write_bytecode``) Python compiles every module that
  has no bytecode cached next to its source each time it imports it: about 0.1 s per process for
  tidemq itself (an editable or source checkout). :func:`install_bytecode_cache` keeps the bytecode
  of tidemq's own modules in the launcher's cache directory instead (``<cache>/pycache``); see
  :mod:`tidemq.spark._bytecode`.

PySpark's streaming source runner (:data:`PREFORKED_MODULES`) runs in a process forked from a
*zygote* that has imported it, and ``tidemq.spark``, already: PySpark starts one such process per
query, and importing them is about 0.2 s before the query can plan anything. The first launch of the
runner for an interpreter, environment and working directory (:func:`zygote_address`) runs it itself
and starts the zygote in the background (:func:`_start_zygote`); later launches hand the zygote
their process and exit with its child's status. The zygote itself, and how a launch hands it over,
is :mod:`tidemq.spark._zygote`. ``TIDEMQ_SPARK_PREFORK=0`` turns this off.

This file is run as a script by path (stdlib only, nothing of tidemq imported in the launched
process, except by a zygote); :func:`python_launcher` is the driver-side helper that writes the
executable. The bytecode cache and the zygote, which only some launched processes need, are the
modules ``_bytecode.py`` and ``_zygote.py`` of this directory, stdlib only too, imported at first use
(:class:`_Sibling`); their public names are importable from here as well.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from tidemq.spark import _bytecode, _zygote
    from tidemq.spark._bytecode import install_bytecode_cache as install_bytecode_cache

# Only os and sys at the top: this file runs at the start of every Python process Spark launches.

__all__ = ["install_bytecode_cache", "prefer_installed", "python_launcher", "same_pyspark"]

_SKIP_DIRS = frozenset({"tests", "benchmark"})
"""Directories of ``pyspark.zip`` the PyPI package leaves out (never imported by Spark's workers)."""

_cache: dict[str, str] = {}


def _zip_contents(zip_path: str) -> tuple[dict[str, int], bytes] | None:
    """``({name: uncompressed size}, pyspark/version.py)`` of the zip (names ``/`` separated), or None
    if it cannot be read or has no ``pyspark/version.py``."""
    try:
        import zipimport

        # The import system has read the zip's directory already (it is on sys.path): reuse it.
        importer = zipimport.zipimporter(zip_path)
        toc = getattr(importer, "_files", None)
        if isinstance(toc, dict):
            sizes = {str(name).replace(os.sep, "/"): int(entry[3]) for name, entry in toc.items()}
            return sizes, importer.get_data("pyspark/version.py")
    except Exception:
        pass
    try:
        import zipfile

        with zipfile.ZipFile(zip_path) as zf:
            sizes = {i.filename: i.file_size for i in zf.infolist() if not i.is_dir()}
            return sizes, zf.read("pyspark/version.py")
    except Exception:
        return None


def same_pyspark(zip_path: str, installed_dir: str) -> bool:
    """Whether the ``pyspark`` package inside ``zip_path`` and the one at ``installed_dir`` (the
    package directory) are the same PySpark.

    Same means: ``pyspark/version.py`` byte-identical, every file of the zip's ``pyspark/`` that
    the install has (modules, error-class JSON, ...) of the same size, and no module missing there
    except in ``tests`` or ``benchmark`` directories (the PyPI package leaves those and a few data
    files out). Any error reading either side answers False.
    """
    contents = _zip_contents(zip_path)
    if contents is None:
        return False
    entries, zip_version = contents
    try:
        with open(os.path.join(installed_dir, "version.py"), "rb") as f:
            if f.read() != zip_version:
                return False
    except OSError:
        return False
    for name, size in entries.items():
        if not name.startswith("pyspark/") or name.endswith("/"):
            continue
        rel = name[len("pyspark/") :]
        try:
            if os.stat(os.path.join(installed_dir, rel)).st_size != size:
                return False
        except OSError:
            if name.endswith(".py") and _SKIP_DIRS.isdisjoint(rel.split("/")[:-1]):
                return False
    return True


def prefer_installed(path: list[str]) -> bool:
    """Move ``pyspark.zip`` entries of ``path`` (a ``sys.path``) to its end when the PySpark the rest
    of ``path`` finds is the same PySpark (:func:`same_pyspark`); returns whether it moved any.

    Only entries named ``pyspark.zip`` are considered; nothing changes when ``pyspark`` is already
    imported, when no other entry has a ``pyspark`` package, or when the two differ.
    """
    zips = [p for p in path if os.path.basename(p) == "pyspark.zip"]
    if not zips or "pyspark" in sys.modules:
        return False
    import importlib.machinery

    rest = [p for p in path if p not in zips]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", rest)
    if spec is None or not spec.submodule_search_locations:
        return False
    installed = next(iter(spec.submodule_search_locations))
    if not all(same_pyspark(z, installed) for z in zips):
        return False
    path[:] = [*rest, *zips]
    return True


PREFORKED_MODULES = frozenset({"pyspark.sql.streaming.python_streaming_source_runner"})
"""Modules run in a process forked from a zygote that has imported them (see :func:`main`)."""

_PER_PROCESS_ENV = frozenset(
    {"PYTHON_WORKER_FACTORY_SECRET", "PYTHON_WORKER_FACTORY_PORT", "PYTHON_UNIX_DOMAIN_SOCKET_PATH"}
)
"""Environment variables Spark gives each process it starts (how it connects back) that a zygote may
differ in; any other difference means another zygote."""

PREFORK_ENV = "TIDEMQ_SPARK_PREFORK"
"""Set to ``0`` to run every module in the launched process itself (no zygote)."""


class _Sibling:
    """A module of this file's directory, imported at the first use of one of its names (not every
    launched process needs ``_bytecode`` or ``_zygote``: no import for those that do not).

    Imported as ``tidemq.spark.launcher``, the module is ``tidemq.spark.<name>``. Run as a script,
    this file imports nothing of tidemq: the module is imported under its own name from this
    directory, put first on ``sys.path`` for the import (the script's directory is not there under
    ``-P`` or ``PYTHONSAFEPATH``, nor after :func:`_setup_path`); its name begins with ``_`` so that it
    is no one's top-level module.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if __package__:
            import importlib

            module = importlib.import_module(f"{__package__}.{self._name}")
        else:
            here = os.path.dirname(os.path.abspath(__file__))
            sys.path.insert(0, here)
            try:
                module = __import__(self._name)
            finally:
                sys.path.remove(here)
        return getattr(module, attr)


if not TYPE_CHECKING:
    _bytecode, _zygote = _Sibling("_bytecode"), _Sibling("_zygote")


def __getattr__(name: str) -> Any:
    """The public names that moved to ``_bytecode`` and ``_zygote``, still importable from here."""
    if name == "install_bytecode_cache":
        return _bytecode.install_bytecode_cache
    if name in ("ZYGOTE_IDLE_EXIT", "run_forked", "zygote"):
        return getattr(_zygote, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _setup_path() -> None:
    """``sys.path`` as ``python -m`` makes it, plus :func:`prefer_installed`."""
    # Running this file as a script put its own directory first on sys.path; `python -m` puts the
    # working directory there instead (nothing at all under -P / PYTHONSAFEPATH).
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
        del sys.path[0]
    if not getattr(sys.flags, "safe_path", False):
        sys.path.insert(0, os.getcwd())


def _run_module(module: str, args: Sequence[str]) -> None:
    import runpy

    sys.argv = [module, *args]
    run_as_main = getattr(runpy, "_run_module_as_main", None)
    if run_as_main is not None:
        run_as_main(module, alter_argv=True)  # exactly what `python -m module` does
    else:  # pragma: no cover - every CPython 3.x has it
        runpy.run_module(module, run_name="__main__", alter_sys=True)


def zygote_address(cache_dir: str, module: str, env: dict[str, str], cwd: str) -> str | None:
    """The Unix socket of the zygote for ``module`` started from ``env`` and ``cwd`` (under
    ``cache_dir/run``, private to this user), or None where there can be none."""
    import hashlib

    if os.name != "posix" or not hasattr(os, "fork"):
        return None
    stable = sorted((k, v) for k, v in env.items() if k not in _PER_PROCESS_ENV)
    key = repr((sys.executable, os.path.abspath(__file__), tuple(sys.flags), module, cwd, stable))
    run_dir = os.path.join(cache_dir, "run")
    path = os.path.join(run_dir, hashlib.sha256(key.encode()).hexdigest()[:24] + ".sock")
    if len(path.encode()) > 100:  # sockaddr_un holds 104-108 bytes
        return None
    try:
        os.makedirs(run_dir, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return path if _bytecode.own_private_dir(run_dir) else None


def _start_zygote(address: str, module: str, cache_dir: str | None) -> None:
    """Start a zygote for ``module`` at ``address`` in the background (its own session, no stdio)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in _PER_PROCESS_ENV}
    command = [sys.executable, os.path.abspath(__file__), "--zygote", address, str(os.getppid()), module]
    if cache_dir:
        command[2:2] = ["--cache-dir", cache_dir]
    subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def main(argv: Sequence[str]) -> None:
    """Run ``argv`` (a Python command line without the interpreter) as ``python`` would.

    ``[--cache-dir DIR] -m module args...``: ``OMP_NUM_THREADS=1`` unless set,
    :func:`install_bytecode_cache` in ``DIR/pycache`` when ``DIR`` is given, :func:`prefer_installed`
    on ``sys.path``, then the module as ``__main__`` (``sys.path[0]`` the working directory, as
    ``python -m`` sets it). For a module of :data:`PREFORKED_MODULES` (with ``DIR``) it runs in a
    child of a zygote, a process that has imported it already
    (:func:`tidemq.spark._zygote.run_forked`), when one runs for the same interpreter, environment
    and working directory (``--zygote address owner module`` runs one:
    :func:`tidemq.spark._zygote.zygote`); otherwise here, and a zygote is started in the background
    for the next time. Anything else: ``exec`` of this interpreter with the same arguments
    (``--cache-dir DIR`` left out).
    """
    args = list(argv)
    cache_dir = None
    if len(args) >= 2 and args[0] == "--cache-dir":
        cache_dir, args = args[1], args[2:]
    if len(args) >= 4 and args[0] == "--zygote":
        _prepare(cache_dir)
        _zygote.zygote(args[1], int(args[2]), args[3], _run_module)
        return
    if len(args) < 2 or args[0] != "-m":
        exe = sys.executable or "python3"
        os.execv(exe, [exe, *args])
    module = args[1]
    # what Spark's PythonRunner sets for task workers (SPARK-28843); see the module docstring
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if cache_dir and module in PREFORKED_MODULES and os.environ.get(PREFORK_ENV, "1") != "0":
        try:
            sock = zygote_address(cache_dir, module, dict(os.environ), os.getcwd())
            if sock is not None:
                status = _zygote.run_forked(sock, module, args[2:])
                if status is not None:
                    if status < 0:  # ended by a signal: end the same way
                        import signal

                        signal.signal(-status, signal.SIG_DFL)
                        os.kill(os.getpid(), -status)
                    os._exit(status if status >= 0 else 1)
                _start_zygote(sock, module, cache_dir)
        except Exception:  # never stop Spark's process over an optimisation
            pass
    _prepare(cache_dir)
    _run_module(module, args[2:])


def _prepare(cache_dir: str | None) -> None:
    _setup_path()
    try:
        if cache_dir and sys.dont_write_bytecode:  # else it does nothing: not even imported
            _bytecode.install_bytecode_cache(os.path.join(cache_dir, "pycache"))
        prefer_installed(sys.path)
    except Exception:  # never stop Spark's process over an optimisation
        pass


_MARK = "# tidemq.spark.launcher: python_launcher()"
"""The second line of every launcher script."""


def _is_launcher(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return head.startswith(b"#!/bin/sh\n" + _MARK.encode() + b"\n")


def _cache_dir() -> Path:
    from pathlib import Path

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "tidemq")


def python_launcher(python: str | None = None) -> str:
    """Path of an executable that runs ``python`` for Spark's Python processes through this launcher
    (installed PySpark instead of ``pyspark.zip`` when they are the same; see the module docstring).

    Meant for ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``) of a *local* session, set before the
    session is built; on a cluster the path must exist on every worker, which this helper does not
    arrange. The executable is a small ``/bin/sh`` script written once per interpreter under
    ``$XDG_CACHE_HOME/tidemq`` (default ``~/.cache/tidemq``, else the temp dir) and checked by
    running it (``-c pass``); under ``PYTHONDONTWRITEBYTECODE`` the processes it starts keep the
    bytecode of tidemq's modules in ``pycache`` there (:func:`install_bytecode_cache`).

    Args:
        python: the interpreter to run (default: ``$PYSPARK_PYTHON``, else this interpreter); a
            launcher is returned as it is.

    Returns:
        The launcher's path; ``python`` itself where a launcher cannot work (not POSIX, no
        ``/bin/sh``, no writable cache directory, or the check run fails).
    """
    import hashlib
    import shlex
    import stat
    import subprocess
    import tempfile
    from pathlib import Path

    python = python or os.environ.get("PYSPARK_PYTHON") or sys.executable
    cached = _cache.get(python)
    if cached is not None:
        return cached
    if _is_launcher(python):  # e.g. PYSPARK_PYTHON set by an earlier call: no launcher of a launcher
        _cache[python] = python
        return python
    result = python
    if os.name == "posix" and os.path.exists("/bin/sh"):
        script = os.path.abspath(__file__)
        for directory in (_cache_dir(), Path(tempfile.gettempdir(), f"tidemq-{os.getuid()}")):
            text = (
                f"#!/bin/sh\n{_MARK}\n"
                f"exec {shlex.quote(python)} {shlex.quote(script)} --cache-dir {shlex.quote(str(directory))}"
                ' "$@"\n'
            )
            name = "pyspark-python-" + hashlib.sha256(text.encode()).hexdigest()[:16]
            target = directory / name
            try:
                if not target.exists() or target.read_text() != text:
                    directory.mkdir(parents=True, exist_ok=True)
                    tmp = directory / f".{name}.{os.getpid()}"
                    tmp.write_text(text)
                    tmp.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
                    os.replace(tmp, target)
                check = subprocess.run([str(target), "-c", "pass"], capture_output=True, timeout=60)
            except (OSError, subprocess.SubprocessError):
                continue
            if check.returncode == 0:
                result = str(target)
                break
    _cache[python] = result
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
