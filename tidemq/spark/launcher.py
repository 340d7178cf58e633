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
  has no bytecode cached next to its source each time it imports it; for tidemq itself (an editable or
  source checkout) that is about 0.1 s per process. :func:`install_bytecode_cache` keeps the bytecode
  of tidemq's own modules (``tidemq``, ``pyspark_tidemq``) in the launcher's cache directory instead
  (``<cache>/pycache``, laid out as ``PYTHONPYCACHEPREFIX`` would be): never next to the sources,
  checked against each source's modification time and size as Python checks its own ``.pyc`` files.
  Other modules, and processes without ``PYTHONDONTWRITEBYTECODE``, load as usual.

This file is run as a script by path (stdlib only, nothing of tidemq imported in the launched
process); :func:`python_launcher` is the driver-side helper that writes the executable.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

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


_PACKAGES = ("tidemq", "pyspark_tidemq")
"""Top-level packages whose bytecode :func:`install_bytecode_cache` keeps."""


def _bytecode_path(cache_dir: str, source: str, tag: str) -> str:
    """Where the bytecode of ``source`` lives in ``cache_dir``: the ``PYTHONPYCACHEPREFIX`` layout
    (the source's absolute directory under the cache, ``name.<cache tag>.pyc``)."""
    head, name = os.path.split(os.path.abspath(source))
    rest = os.path.splitdrive(head)[1]
    return os.path.join(cache_dir, rest.lstrip(os.sep), f"{os.path.splitext(name)[0]}.{tag}.pyc")


def _own_private_dir(path: str) -> bool:
    """Whether ``path`` is a directory of this user that no one else may write to (its bytecode is
    code this process will run)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    getuid = getattr(os, "getuid", None)
    return getuid is not None and st.st_uid == getuid() and not st.st_mode & 0o022


def install_bytecode_cache(cache_dir: str, packages: Sequence[str] = _PACKAGES) -> bool:
    """Keep the bytecode of ``packages``' modules in ``cache_dir`` when Python itself would not cache
    it (``sys.dont_write_bytecode``, from ``PYTHONDONTWRITEBYTECODE`` or ``-B``); returns whether it
    did (puts a finder first on ``sys.meta_path``).

    A module's bytecode is read from ``cache_dir`` when its header matches the source (Python's own
    check: magic number, source modification time and size); otherwise the module loads as usual (the
    ``.pyc`` next to it if valid, else compiled) and its bytecode is written to ``cache_dir`` (write
    to a temporary file, then rename). ``cache_dir`` is created private to this user; a directory
    that others can write to, or that belongs to someone else, is not used. Modules found by other
    means than the path finder's source loader (zip, namespace, extension, editable-install finders)
    are left alone.
    """
    import importlib.machinery

    tag = sys.implementation.cache_tag
    if not sys.dont_write_bytecode or tag is None or not packages:
        return False
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    except OSError:
        return False
    if not _own_private_dir(cache_dir):
        return False
    roots = frozenset(packages)
    import marshal
    from importlib.util import MAGIC_NUMBER

    class CachedSourceLoader(importlib.machinery.SourceFileLoader):
        def get_code(self, fullname: str) -> Any:
            source = self.get_filename(fullname)
            try:
                st = os.stat(source)
            except OSError:
                return super().get_code(fullname)
            header = b"".join(
                [
                    MAGIC_NUMBER,
                    (0).to_bytes(4, "little"),  # flags: a timestamp-checked pyc
                    (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little"),
                    (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"),
                ]
            )
            cached = _bytecode_path(cache_dir, source, tag)
            try:
                with open(cached, "rb") as f:
                    data = f.read()
                if data[:16] == header:
                    return marshal.loads(memoryview(data)[16:])
            except (OSError, ValueError, EOFError, TypeError):
                pass
            code = super().get_code(fullname)
            try:
                os.makedirs(os.path.dirname(cached), mode=0o700, exist_ok=True)
                tmp = f"{cached}.{os.getpid()}.tmp"
                with open(tmp, "wb") as f:
                    f.write(header + marshal.dumps(code))
                os.replace(tmp, cached)
            except (OSError, ValueError):
                pass
            return code

    class BytecodeCacheFinder:
        @staticmethod
        def find_spec(fullname: str, path: Any = None, target: Any = None) -> Any:
            if fullname.partition(".")[0] not in roots:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            loader = getattr(spec, "loader", None)
            if spec is None or type(loader) is not importlib.machinery.SourceFileLoader:
                return spec
            spec.loader = CachedSourceLoader(loader.name, loader.path)
            spec.cached = _bytecode_path(cache_dir, loader.path, tag)  # the module's __cached__
            return spec

    sys.meta_path.insert(0, BytecodeCacheFinder)  # type: ignore[arg-type]
    return True


def main(argv: Sequence[str]) -> None:
    """Run ``argv`` (a Python command line without the interpreter) as ``python`` would.

    ``[--bytecode-cache DIR] -m module args...``: ``OMP_NUM_THREADS=1`` unless set,
    :func:`install_bytecode_cache` with ``DIR`` when given, :func:`prefer_installed` on ``sys.path``,
    then the module as ``__main__`` (``sys.path[0]`` the working directory, as ``python -m`` sets it).
    Anything else: ``exec`` of this interpreter with the same arguments (``--bytecode-cache DIR``
    left out).
    """
    args = list(argv)
    bytecode_cache = None
    if len(args) >= 2 and args[0] == "--bytecode-cache":
        bytecode_cache, args = args[1], args[2:]
    if len(args) < 2 or args[0] != "-m":
        exe = sys.executable or "python3"
        os.execv(exe, [exe, *args])
    module = args[1]
    # Running this file as a script put its own directory first on sys.path; `python -m` puts the
    # working directory there instead (nothing at all under -P / PYTHONSAFEPATH).
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
        del sys.path[0]
    if not getattr(sys.flags, "safe_path", False):
        sys.path.insert(0, os.getcwd())
    # what Spark's PythonRunner sets for task workers (SPARK-28843); see the module docstring
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        if bytecode_cache:
            install_bytecode_cache(bytecode_cache)
        prefer_installed(sys.path)
    except Exception:  # never stop Spark's process over an optimisation
        pass
    import runpy

    sys.argv = [module, *args[2:]]
    run_as_main = getattr(runpy, "_run_module_as_main", None)
    if run_as_main is not None:
        run_as_main(module, alter_argv=True)  # exactly what `python -m module` does
    else:  # pragma: no cover - every CPython 3.x has it
        runpy.run_module(module, run_name="__main__", alter_sys=True)


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
            pycache = shlex.quote(str(directory / "pycache"))
            text = (
                f"#!/bin/sh\n{_MARK}\n"
                f'exec {shlex.quote(python)} {shlex.quote(script)} --bytecode-cache {pycache} "$@"\n'
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
