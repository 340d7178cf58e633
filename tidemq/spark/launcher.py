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

PySpark's streaming source runner (:data:`PREFORKED_MODULES`) runs in a process forked from a
*zygote* that has imported it, and ``tidemq.spark``, already (as ``pyspark.daemon`` does for task
workers; Python's ``multiprocessing`` calls it a fork server): PySpark starts one such process per
query, and importing them is about 0.2 s before the query can plan anything. The first launch of the
runner for an interpreter, environment and working directory runs it itself and starts the zygote in
the background (its own session, a Unix socket in a private ``run`` directory of the cache); later
launches (:func:`run_forked`) hand the zygote their environment, working directory, arguments and
stdin/stdout/stderr, forward the signals they get to the child and exit with its status. The zygote
ends when Spark's JVM (the first launch's parent) has, or after :data:`ZYGOTE_IDLE_EXIT` seconds
without a request. ``TIDEMQ_SPARK_PREFORK=0`` turns this off.

This file is run as a script by path (stdlib only, nothing of tidemq imported in the launched
process, except by a zygote); :func:`python_launcher` is the driver-side helper that writes the
executable.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
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


PREFORKED_MODULES = frozenset({"pyspark.sql.streaming.python_streaming_source_runner"})
"""Modules run in a process forked from a zygote that has imported them (see :func:`main`)."""

_PER_PROCESS_ENV = frozenset(
    {"PYTHON_WORKER_FACTORY_SECRET", "PYTHON_WORKER_FACTORY_PORT", "PYTHON_UNIX_DOMAIN_SOCKET_PATH"}
)
"""Environment variables Spark gives each process it starts (how it connects back) that a zygote may
differ in; any other difference means another zygote."""

PREFORK_ENV = "TIDEMQ_SPARK_PREFORK"
"""Set to ``0`` to run every module in the launched process itself (no zygote)."""

ZYGOTE_IDLE_EXIT = 600.0
"""Seconds a zygote waits for a request before it exits (it also exits when the process that started
its first client, Spark's JVM, is gone)."""

_PREWARM = ("tidemq.spark",)
"""Imported by a zygote besides its module (what a tidemq source's pickled reader needs)."""


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
    return path if _own_private_dir(run_dir) else None


def _recv_exact(conn: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return data


def run_forked(address: str, module: str, args: Sequence[str]) -> int | None:
    """Run ``module`` in a child of the zygote at ``address``: this process's stdin, stdout, stderr,
    environment and working directory, signals forwarded to it. Returns its exit status (negative:
    the signal that ended it), or None when no zygote answered before the child could start (then
    nothing ran)."""
    import array
    import json
    import signal
    import socket
    import struct

    request = json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "argv": [module, *args]}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(address)
        fds = array.array("i", [0, 1, 2])
        head = struct.pack(">I", len(request))
        conn.sendmsg([head + request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
        (pid,) = struct.unpack(">q", _recv_exact(conn, 8))
    except (OSError, EOFError, struct.error):
        conn.close()
        return None  # the child, if forked, gets no go-ahead and exits without running anything

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.kill(pid, signum)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    try:
        conn.sendall(b"G")
        (status,) = struct.unpack(">i", _recv_exact(conn, 4))
        return int(status)
    except (OSError, EOFError):
        # the zygote is gone before it could report: wait for the child itself
        import time

        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return 1
            except OSError:
                pass
            time.sleep(0.05)
    finally:
        conn.close()


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


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a zombie waiting to be reaped has)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _listen(address: str) -> Any:
    """A socket listening at ``address`` (a stale socket file replaced), or None when another
    zygote serves it or it cannot be bound."""
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(address)
    except OSError:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(address)
            listener.close()
            return None  # another zygote serves this address
        except OSError:
            pass
        finally:
            probe.close()
        try:
            os.unlink(address)
            listener.bind(address)
        except OSError:
            listener.close()
            return None
    os.chmod(address, 0o600)
    listener.listen(16)
    return listener


def zygote(address: str, owner: int, module: str, idle_exit: float = ZYGOTE_IDLE_EXIT) -> None:
    """Serve forks of a process that has imported ``module`` at ``address`` until ``owner`` (a pid) is
    gone or no request came for ``idle_exit`` seconds.

    The socket listens before the imports, so a client that comes meanwhile waits for them rather
    than starting another zygote. Each request (from :func:`run_forked`) carries the client's
    environment, working directory, arguments and stdio; the child adopts them, tells the client its
    pid, waits for its go-ahead and runs ``module`` as ``__main__``; the zygote reports the child's
    exit status to the client. When ``module`` cannot be imported the zygote ends at once (its
    clients then run the module themselves).
    """
    import gc
    import importlib
    import selectors
    import signal
    import socket
    import struct
    import time

    listener = _listen(address)
    if listener is None:
        return
    inode = os.stat(address).st_ino
    try:
        for name in (module, *_PREWARM):
            try:
                importlib.import_module(name)
            except Exception:
                if name == module:
                    return
        # A child runs the module as __main__ (runpy executes it again; what it imports stays loaded)
        sys.modules.pop(module, None)
        gc.collect()
        gc.freeze()  # the children share these pages and never collect them
        children: dict[int, socket.socket] = {}
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ)
        # a child's end wakes the loop at once (its client is waiting for the status)
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        signal.set_wakeup_fd(wake_w.fileno())
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
        selector.register(wake_r, selectors.EVENT_READ)
        last = time.monotonic()
        while True:
            for key, _ in selector.select(1.0):
                if key.fileobj is wake_r:
                    try:
                        wake_r.recv(4096)
                    except OSError:
                        pass
                    continue
                conn, _ = listener.accept()
                last = time.monotonic()
                try:
                    pid = _fork_child(conn, listener, selector, [*children.values(), wake_r, wake_w])
                except (OSError, EOFError, ValueError, struct.error):
                    conn.close()
                    continue
                children[pid] = conn
            while children:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                done = children.pop(pid, None)
                if done is not None:
                    try:
                        done.sendall(struct.pack(">i", os.waitstatus_to_exitcode(status)))
                    except OSError:
                        pass
                    done.close()
                last = time.monotonic()
            if not children and (not _alive(owner) or time.monotonic() - last > idle_exit):
                break
    finally:
        try:
            if os.stat(address).st_ino == inode:
                os.unlink(address)
        except OSError:
            pass
        listener.close()


def _reseed() -> None:
    """New seeds for the random generators a forked child would otherwise share with its siblings
    (``random`` reseeds itself after a fork; numpy's global generator does not)."""
    for name in ("numpy.random",):
        module = sys.modules.get(name)
        if module is not None:
            try:
                module.seed()
            except Exception:
                pass


def _fork_child(conn: Any, listener: Any, selector: Any, others: Iterable[Any]) -> int:
    """Read a request from ``conn`` and fork its child (see :func:`zygote`); returns the child's pid.
    The child closes ``listener`` and ``others`` (the zygote's other sockets)."""
    import array
    import json
    import signal
    import socket
    import struct

    fds = array.array("i")
    conn.settimeout(10.0)  # a client writes its request at once: never let one hold the zygote up
    head, ancillary, _flags, _addr = conn.recvmsg(4, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    try:
        if len(fds) != 3:
            raise ValueError("a request carries stdin, stdout and stderr")
        (size,) = struct.unpack(">I", head if len(head) == 4 else head + _recv_exact(conn, 4 - len(head)))
        request = json.loads(_recv_exact(conn, size))
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                selector.close()
                listener.close()
                for other in others:
                    other.close()
                for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
                    signal.signal(sig, signal.SIG_DFL)
                conn.settimeout(None)
                conn.sendall(struct.pack(">q", os.getpid()))
                if conn.recv(1) != b"G":
                    os._exit(1)
                conn.close()
                for i, fd in enumerate(fds):
                    os.dup2(fd, i)
                    os.close(fd)
                os.chdir(request["cwd"])
                os.environ.clear()
                os.environ.update(request["env"])
                _reseed()
                argv = request["argv"]
                try:
                    _run_module(argv[0], argv[1:])
                    code = 0
                except SystemExit as exc:
                    if exc.code is None or isinstance(exc.code, int):
                        code = exc.code or 0
                    else:
                        print(exc.code, file=sys.stderr)
                        code = 1
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:
                        pass
                os._exit(code)
        return pid
    finally:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


def main(argv: Sequence[str]) -> None:
    """Run ``argv`` (a Python command line without the interpreter) as ``python`` would.

    ``[--cache-dir DIR] -m module args...``: ``OMP_NUM_THREADS=1`` unless set,
    :func:`install_bytecode_cache` in ``DIR/pycache`` when ``DIR`` is given, :func:`prefer_installed`
    on ``sys.path``, then the module as ``__main__`` (``sys.path[0]`` the working directory, as
    ``python -m`` sets it). For a module of :data:`PREFORKED_MODULES` (with ``DIR``) it runs in a
    child of a zygote, a process that has imported it already (:func:`run_forked`), when one runs for
    the same interpreter, environment and working directory; otherwise here, and a zygote is started
    in the background for the next time. Anything else: ``exec`` of this interpreter with the same
    arguments (``--cache-dir DIR`` left out).
    """
    args = list(argv)
    cache_dir = None
    if len(args) >= 2 and args[0] == "--cache-dir":
        cache_dir, args = args[1], args[2:]
    if len(args) >= 4 and args[0] == "--zygote":
        _prepare(cache_dir)
        zygote(args[1], int(args[2]), args[3])
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
                status = run_forked(sock, module, args[2:])
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
        if cache_dir:
            install_bytecode_cache(os.path.join(cache_dir, "pycache"))
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
