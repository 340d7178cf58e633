"""The zygote (fork server) of the Python processes Spark starts (:mod:`tidemq.spark.launcher`).

PySpark's streaming source runner (the launcher's ``PREFORKED_MODULES``) runs in a process forked
from a *zygote* that has imported it, and ``tidemq.spark``, already (as ``pyspark.daemon`` does for
task workers; Python's ``multiprocessing`` calls it a fork server): PySpark starts one such process
per query, and importing them is about 0.2 s before the query can plan anything. The first launch of
the runner for an interpreter, environment and working directory runs it itself and starts the
zygote in the background (the launcher's ``--zygote``: its own session, a Unix socket in a private
``run`` directory of the cache, running :func:`zygote`); later launches (:func:`run_forked`) hand
the zygote their environment, working directory, arguments and stdin/stdout/stderr, forward the
signals they get to the child and exit with its status. The zygote ends when Spark's JVM (the first
launch's parent) has, or after :data:`ZYGOTE_IDLE_EXIT` seconds without a request.

Like the launcher, this module is stdlib only: nothing of tidemq is imported but by a zygote, for
its children, and not the launcher either (it hands :func:`zygote` its way of running a module). The
launcher run as a script by path imports it from its own directory as ``_zygote`` (hence the leading
underscore: no one's top-level module), at first use: only the launches of a preforked module and a
zygote do. Everyone else imports ``tidemq.spark._zygote``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import socket
    from collections.abc import Callable, Iterable, Sequence

ZYGOTE_IDLE_EXIT = 600.0
"""Seconds a zygote waits for a request before it exits (it also exits when the process that started
its first client, Spark's JVM, is gone)."""

_PREWARM = ("tidemq.spark",)
"""Imported by a zygote besides its module (what a tidemq source's pickled reader needs)."""


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


def zygote(
    address: str,
    owner: int,
    module: str,
    run_module: Callable[[str, Sequence[str]], None],
    idle_exit: float = ZYGOTE_IDLE_EXIT,
) -> None:
    """Serve forks of a process that has imported ``module`` at ``address`` until ``owner`` (a pid) is
    gone or no request came for ``idle_exit`` seconds; a child runs ``module`` with ``run_module``
    (``(module, args)``, as ``python -m module args...`` would: the launcher's).

    The socket listens before the imports, so a client that comes meanwhile waits for them rather
    than starting another zygote. Each request (from :func:`run_forked`) carries the client's
    environment, working directory, arguments and stdio; the child adopts them, tells the client its
    pid, waits for its go-ahead and runs ``module`` as ``__main__``; the zygote reports the child's
    exit status to the client. When ``module`` cannot be imported the zygote ends at once (its
    clients then run the module themselves).
    """
    import selectors
    import time

    listener = _listen(address)
    if listener is None:
        return
    inode = os.stat(address).st_ino
    try:
        if not _import_and_freeze(module):
            return
        children: dict[int, socket.socket] = {}
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ)
        wake_pair = _wake_on_child_exit(selector)
        wake = wake_pair[0]
        last = time.monotonic()
        while True:
            for key, _ in selector.select(1.0):
                if key.fileobj is wake:
                    _drain(wake)
                    continue
                conn, _ = listener.accept()
                last = time.monotonic()
                _start_child(conn, listener, selector, children, wake_pair, run_module)
            if _reap(children):
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


def _import_and_freeze(module: str) -> bool:
    """Import ``module`` and the modules children would import anyway, then freeze the heap for the
    children to share; False when ``module`` cannot be imported (the zygote then ends)."""
    import gc
    import importlib

    for name in (module, *_PREWARM):
        try:
            importlib.import_module(name)
        except Exception:
            if name == module:
                return False
    # A child runs the module as __main__ (runpy executes it again; what it imports stays loaded)
    sys.modules.pop(module, None)
    gc.collect()
    gc.freeze()  # the children share these pages and never collect them
    return True


def _wake_on_child_exit(selector: Any) -> tuple[socket.socket, socket.socket]:
    """A socket pair whose read end (registered with ``selector``) becomes readable when a child
    exits (SIGCHLD through the wake-up fd): its client is waiting for the status."""
    import selectors
    import signal
    import socket

    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno())
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
    selector.register(wake_r, selectors.EVENT_READ)
    return wake_r, wake_w


def _drain(wake: socket.socket) -> None:
    """Read what the wake-up fd wrote (the signals' numbers; only the wake-up matters)."""
    try:
        wake.recv(4096)
    except OSError:
        pass


def _start_child(
    conn: socket.socket,
    listener: socket.socket,
    selector: Any,
    children: dict[int, socket.socket],
    wake_pair: tuple[socket.socket, socket.socket],
    run_module: Callable[[str, Sequence[str]], None],
) -> None:
    """Fork the child ``conn``'s request asks for and remember it under its pid; a bad request (or a
    failed fork) closes ``conn``."""
    import struct

    try:
        pid = _fork_child(conn, listener, selector, [*children.values(), *wake_pair], run_module)
    except (OSError, EOFError, ValueError, struct.error):
        conn.close()
        return
    children[pid] = conn


def _reap(children: dict[int, socket.socket]) -> bool:
    """Collect every child that has exited and send its exit status to its client (then close that
    connection); returns whether any was collected."""
    import struct

    reaped = False
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
        reaped = True
    return reaped


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


def _fork_child(
    conn: Any,
    listener: Any,
    selector: Any,
    others: Iterable[Any],
    run_module: Callable[[str, Sequence[str]], None],
) -> int:
    """Read a request from ``conn`` and fork its child (see :func:`zygote`); returns the child's pid.
    The child closes ``listener`` and ``others`` (the zygote's other sockets)."""
    import array
    import json
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
            _child(conn, listener, selector, others, fds, request, run_module)
        return pid
    finally:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


def _child(
    conn: Any,
    listener: Any,
    selector: Any,
    others: Iterable[Any],
    fds: Any,
    request: dict[str, Any],
    run_module: Callable[[str, Sequence[str]], None],
) -> NoReturn:
    """The forked child: drop the zygote's sockets and signal handlers, tell the client its pid, wait
    for the go-ahead, adopt the client's stdio (``fds``), working directory and environment, run the
    module; exits with its status (never returns)."""
    import signal
    import struct

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
            run_module(argv[0], argv[1:])
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
