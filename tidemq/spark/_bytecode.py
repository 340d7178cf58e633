"""The bytecode cache of the Python processes Spark starts (:mod:`tidemq.spark.launcher`).

Under ``PYTHONDONTWRITEBYTECODE`` (``sys.dont_write_bytecode``) Python compiles every module that has
no bytecode cached next to its source each time it imports it; for tidemq itself (an editable or
source checkout) that is about 0.1 s per process. :func:`install_bytecode_cache` keeps the bytecode
of tidemq's own modules (``tidemq``, ``pyspark_tidemq``) in the launcher's cache directory instead
(``<cache>/pycache``, laid out as ``PYTHONPYCACHEPREFIX`` would be): never next to the sources,
checked against each source's modification time and size as Python checks its own ``.pyc`` files.
Other modules, and processes without ``PYTHONDONTWRITEBYTECODE``, load as usual.

Like the launcher, this module is stdlib only and imports nothing of tidemq: the launcher run as a
script by path imports it from its own directory as ``_bytecode`` (hence the leading underscore: no
one's top-level module), at first use; everyone else as ``tidemq.spark._bytecode``, or
:func:`install_bytecode_cache` from ``tidemq.spark.launcher``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

_PACKAGES = ("tidemq", "pyspark_tidemq")
"""Top-level packages whose bytecode :func:`install_bytecode_cache` keeps."""


def _bytecode_path(cache_dir: str, source: str, tag: str) -> str:
    """Where the bytecode of ``source`` lives in ``cache_dir``: the ``PYTHONPYCACHEPREFIX`` layout
    (the source's absolute directory under the cache, ``name.<cache tag>.pyc``)."""
    head, name = os.path.split(os.path.abspath(source))
    rest = os.path.splitdrive(head)[1]
    return os.path.join(cache_dir, rest.lstrip(os.sep), f"{os.path.splitext(name)[0]}.{tag}.pyc")


def own_private_dir(path: str) -> bool:
    """Whether ``path`` is a directory of this user that no one else may write to (what it holds is
    code this process will run: bytecode here, a zygote's socket for the launcher)."""
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
    if not own_private_dir(cache_dir):
        return False
    roots = frozenset(packages)

    class CachedSourceLoader(importlib.machinery.SourceFileLoader):
        def get_code(self, fullname: str) -> Any:
            source = self.get_filename(fullname)
            try:
                header = _pyc_header(os.stat(source))
            except OSError:
                return super().get_code(fullname)
            cached = _bytecode_path(cache_dir, source, tag)
            code = _read_pyc(cached, header)
            if code is None:
                code = super().get_code(fullname)
                _write_pyc(cached, header, code)
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


def _pyc_header(st: os.stat_result) -> bytes:
    """The 16-byte header of a timestamp-checked ``.pyc`` of a source with stat ``st``."""
    from importlib.util import MAGIC_NUMBER

    return b"".join(
        [
            MAGIC_NUMBER,
            (0).to_bytes(4, "little"),  # flags: a timestamp-checked pyc
            (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little"),
            (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"),
        ]
    )


def _read_pyc(cached: str, header: bytes) -> Any:
    """The code object in ``cached`` when its header is ``header``; None when missing, stale or bad."""
    import marshal

    try:
        with open(cached, "rb") as f:
            data = f.read()
        if data[:16] == header:
            return marshal.loads(memoryview(data)[16:])
    except (OSError, ValueError, EOFError, TypeError):
        pass
    return None


def _write_pyc(cached: str, header: bytes, code: Any) -> None:
    """Write ``header`` + ``code`` to ``cached`` (a temporary file, then rename); errors are ignored."""
    import marshal

    try:
        os.makedirs(os.path.dirname(cached), mode=0o700, exist_ok=True)
        tmp = f"{cached}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(header + marshal.dumps(code))
        os.replace(tmp, cached)
    except (OSError, ValueError):
        pass
