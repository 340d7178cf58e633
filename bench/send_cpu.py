"""Broker CPU per SEND request: the cost the broker pays to decode, store and answer one send.

Setup: the SEND_MESSAGE_V2 frames tidemq's own ``Producer`` writes (one 1 KiB message, and a
SEND_BATCH_MESSAGE of 32) are captured once from an in-process broker, then replayed over one
loopback connection, one request at a time (each with a fresh UNIQ_KEY), against:

* ``cpu``: a fresh ``tidemq serve`` subprocess per flush mode; the broker's CPU (user and system,
  from ``/proc/<pid>/stat``, and the scheduler's run time of all its threads from
  ``/proc/<pid>/task/*/schedstat``) over ``--requests`` requests after a warm-up;
* ``calls``: an in-process broker on this process's event loop (uvloop when installed) with the
  client on a thread: Python function calls per request counted by cProfile on the loop's thread
  (deterministic, unlike time on a shared machine), and with ``--top N`` the N functions called
  most per request.

* ``replay``: the request path alone, in this process: the frame handed to a broker connection's
  ``data_received``, its answer taken by a fake transport (thread CPU, best of 3 runs);
* ``instructions``: the same replay under valgrind's callgrind: instructions per request
  (deterministic; slow, not run by default).

``--source DIR`` runs the broker from another checkout (``PYTHONPATH=DIR``) for A/B runs: with
several ``--source`` values the sources alternate within each repetition (``--reps``), medians
printed per source.

Prints one JSON line per source::

    {"bench": "send_cpu", "source": ..., "async": {"single": {"cpu_us": ..., "user_us": ...,
     "sys_us": ..., "calls": ...}, "batch32": {"cpu_us_per_msg": ..., "calls_per_request": ...}},
     "sync": {...}}

Run: ``python -m bench.send_cpu [--requests N] [--flush async sync] [--shape single batch32]
[--mode cpu calls] [--source DIR ...] [--reps N] [--top N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from bench import interpreter

TOPIC = "SendCpu"
BODY = b"x" * 1024
_LEN = struct.Struct(">i")
_TICK = os.sysconf("SC_CLK_TCK")


# -- the frames ---------------------------------------------------------------------------------


def capture_frames(tmp: Path) -> dict[str, bytes]:
    """The frames tidemq's Producer writes for one message and for a batch of 32 (topic created
    with 8 queues by the first send), as encoded on the wire."""
    from tidemq.client import Producer
    from tidemq.protocol.command import encode_command
    from tidemq.protocol.message import Message
    from tidemq.testing import ClusterThread

    frames: dict[str, bytes] = {}
    with ClusterThread(tmp / "capture") as cluster:
        dispatcher = cluster.broker.remoting_server._dispatcher
        seen: list[Any] = []
        original = dispatcher.process

        async def recording(channel: Any, request: Any) -> None:
            if request.code in (310, 320):
                seen.append(request)
            await original(channel, request)

        dispatcher.process = recording  # type: ignore[method-assign]
        p = Producer(namesrv_addr=cluster.namesrv_addr, producer_group="send-cpu", default_topic_queue_nums=8)
        p.start()
        try:
            p.send(Message(TOPIC, BODY))
            p.send_batch([Message(TOPIC, BODY) for _ in range(32)])
        finally:
            p.shutdown()
        single = next(r for r in seen if r.code == 310)
        batch = next(r for r in seen if r.code == 320)
        frames["single"] = encode_command(single)
        frames["batch32"] = encode_command(batch)
    return frames


class Replayer:
    """Sends a captured frame again and again over one blocking connection, each time with a fresh
    UNIQ_KEY (same length) so the index sees distinct keys, and reads each answer."""

    def __init__(self, addr: str, frame: bytes) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.frame = frame
        marker = b"UNIQ_KEY\\u0001"  # as JSON writes \x01
        at = frame.find(marker)
        self.key_at = at + len(marker) if at >= 0 else -1
        self.n = 0
        self.last_code = -1

    def _next_frame(self) -> bytes:
        if self.key_at < 0:
            return self.frame
        self.n += 1
        key = b"%032X" % self.n
        frame = self.frame
        return frame[: self.key_at] + key + frame[self.key_at + 32 :]

    def one(self) -> None:
        self.sock.sendall(self._next_frame())
        head = self._recv(4)
        (length,) = _LEN.unpack(head)
        rest = self._recv(length)
        self.last_code = int(rest[4:].split(b'"code":', 1)[1].split(b",", 1)[0])

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def run(self, n: int) -> None:
        for _ in range(n):
            self.one()
        if self.last_code != 0:
            raise RuntimeError(f"send answered code {self.last_code}")

    def close(self) -> None:
        self.sock.close()


# -- CPU of a tidemq serve subprocess -----------------------------------------------------------


def _proc_cpu(pid: int) -> tuple[float, float, float]:
    """(user s, system s, scheduler run time s of every thread) of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    user, system = int(fields[11]) / _TICK, int(fields[12]) / _TICK
    run = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            run += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
    return user, system, run / 1e9


@contextlib.contextmanager
def _serve(store: Path, flush: str, source: str | None) -> Any:
    from tidemq.testing import ServeProcess

    # ``python -m tidemq`` imports from its working directory first: the source's checkout
    saved, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    if source:
        os.environ["PYTHONPATH"] = source
        os.chdir(source)
    try:
        proc = ServeProcess(store, flush=flush).start()
    finally:
        if source:
            os.chdir(cwd)
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved
    try:
        yield proc
    finally:
        proc.stop()


def measure_cpu(
    frames: dict[str, bytes], flush: str, shapes: list[str], n: int, source: str | None
) -> dict[str, Any]:
    """Broker CPU per request of each shape against a fresh ``tidemq serve --flush FLUSH``."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, _serve(Path(tmp) / "store", flush, source) as proc:
        for shape in shapes:
            requests = n if shape == "single" else max(n // 8, 50)
            msgs = 1 if shape == "single" else 32
            r = Replayer(proc.broker_addr, frames[shape])
            try:
                r.run(max(requests // 5, 20))  # warm-up: segments, encoders, caches
                u0, s0, t0 = _proc_cpu(proc.pid)
                w0 = time.perf_counter()
                r.run(requests)
                wall = time.perf_counter() - w0
                u1, s1, t1 = _proc_cpu(proc.pid)
            finally:
                r.close()
            per = 1e6 / requests
            out[shape] = {
                "requests": requests,
                "cpu_us": round((t1 - t0) * per, 1),
                "user_us": round((u1 - u0) * per, 1),
                "sys_us": round((s1 - s0) * per, 1),
                "cpu_us_per_msg": round((t1 - t0) * per / msgs, 2),
                "round_trip_us": round(wall * per, 1),
            }
    return out


# -- Python calls per request in-process --------------------------------------------------------


def _run_with_temp_dir(main: Callable[[str], Coroutine[Any, Any, None]]) -> None:
    """``main(tmp)`` to completion on a new event loop (uvloop's when importable), ``tmp`` a
    temporary directory removed afterwards."""
    from tidemq.remoting.loop import new_event_loop

    loop = new_event_loop()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            loop.run_until_complete(main(tmp))
        finally:
            loop.close()


def measure_calls(
    frames: dict[str, bytes], flush: str, shapes: list[str], n: int, top: int
) -> dict[str, Any]:
    """Python calls per request (cProfile on the broker's loop thread), in this process."""
    from tidemq.testing import run_cluster

    out: dict[str, Any] = {}

    async def main(tmp: str) -> None:
        overrides = {"flush_disk_type": "SYNC_FLUSH"} if flush == "sync" else {}
        async with run_cluster(tmp, **overrides) as cluster:
            loop = asyncio.get_running_loop()
            for shape in shapes:
                requests = n if shape == "single" else max(n // 8, 50)
                r = Replayer(cluster.broker_addr, frames[shape])
                try:
                    await loop.run_in_executor(None, r.run, max(requests // 5, 20))
                    prof = cProfile.Profile()
                    finished = asyncio.Event()

                    def client(
                        r: Replayer = r, requests: int = requests, finished: asyncio.Event = finished
                    ) -> None:
                        try:
                            r.run(requests)
                        finally:
                            loop.call_soon_threadsafe(finished.set)

                    t0 = time.thread_time()
                    prof.enable()
                    thread = threading.Thread(target=client)
                    thread.start()
                    await finished.wait()
                    prof.disable()
                    cpu = time.thread_time() - t0
                    thread.join()
                finally:
                    r.close()
                stats = pstats.Stats(prof)
                entry: dict[str, Any] = {
                    "requests": requests,
                    "calls": round(stats.total_calls / requests, 1),  # type: ignore[attr-defined]
                    "profiled_cpu_us": round(cpu / requests * 1e6, 1),
                }
                if top:
                    rows = sorted(
                        stats.stats.items(),  # type: ignore[attr-defined]
                        key=lambda kv: -kv[1][1],
                    )[:top]
                    entry["top"] = [
                        (f"{Path(k[0]).name}:{k[1]}({k[2]})", round(v[1] / requests, 2)) for k, v in rows
                    ]
                out[shape] = entry

    _run_with_temp_dir(main)
    return out


# -- the request path alone, in-process ---------------------------------------------------------


class _Transport:
    """A transport that keeps the last write: the request path without sockets."""

    def __init__(self) -> None:
        self.writes = 0
        self.last = b""
        self.waiter: asyncio.Future[None] | None = None

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.last = data
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else default


def measure_replay(
    frames: dict[str, bytes], flush: str, shapes: list[str], n: int, reps: int, warmup: int = 0
) -> dict[str, Any]:
    """CPU per request of the request path alone: the frame handed to a broker connection's
    ``data_received`` in this process, the answer taken by a fake transport (no socket, no kernel).
    The best of ``reps`` runs of ``n`` requests (the least disturbed by other processes), after a
    first run (or ``warmup`` requests) that warms up."""
    from tidemq.remoting.channel import Channel
    from tidemq.testing import run_cluster

    out: dict[str, Any] = {}

    async def main(tmp: str) -> None:
        overrides = {"flush_disk_type": "SYNC_FLUSH"} if flush == "sync" else {}
        async with run_cluster(tmp, **overrides) as cluster:
            server = cluster.broker.remoting_server
            gcs = cluster.broker.group_commit_service
            if gcs is not None:  # fsync on the loop, as on a healthy disk: not left to this run's timing
                gcs.inline_fsync_max = float("inf")
            if cluster.broker.flush_service is not None:
                # the periodic flush costs per second, not per request: out of a per-request figure
                await cluster.broker.flush_service.shutdown()
            channel = Channel(server._dispatcher, max_frame_size=server.max_frame_size)
            transport = _Transport()
            channel.protocol().connection_made(transport)  # type: ignore[arg-type]
            loop = asyncio.get_running_loop()
            for shape in shapes:
                frame = frames[shape]
                requests = n if shape == "single" else max(n // 8, 50)
                best = float("inf")
                for rep in range(reps + 1):  # the first run warms up
                    t0 = time.thread_time()
                    for _ in range(warmup if warmup and not rep else requests):
                        if flush == "sync":
                            transport.waiter = loop.create_future()
                            channel._on_data(frame)
                            await transport.waiter
                        else:
                            channel._on_data(frame)
                    best = min(best, time.thread_time() - t0)
                if b'"code":0' not in transport.last:
                    raise RuntimeError(f"unexpected answer {transport.last[:200]!r}")
                out[shape] = {"replay_us": round(best / max(requests, 1) * 1e6, 2)}

    _run_with_temp_dir(main)
    return out


# -- driver ---------------------------------------------------------------------------------------


def _calls_in(source: str | None, args: argparse.Namespace, frames_path: Path) -> dict[str, Any]:
    """Run the call count in a child process (so ``--source`` decides which code is imported)."""
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = source
    cmd = [
        sys.executable,
        __file__,  # run as a script: ``--source`` decides where tidemq comes from, not bench
        "--child",
        str(frames_path),
        json.dumps(
            {
                "flush": args.flush,
                "shapes": args.shape,
                "n": args.requests,
                "top": args.top,
                "modes": args.mode,
            }
        ),
    ]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"call count failed:\n{res.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return result


def _calls_child() -> None:
    import pickle

    frames = pickle.loads(Path(sys.argv[2]).read_bytes())
    opts = json.loads(sys.argv[3])
    out: dict[str, Any] = {}
    for f in opts["flush"]:
        out[f] = {}
        if "calls" in opts["modes"]:
            out[f] = measure_calls(frames, f, opts["shapes"], opts["n"], opts["top"])
        if "replay" in opts["modes"]:
            for shape, entry in measure_replay(frames, f, opts["shapes"], opts["n"], 3).items():
                out[f].setdefault(shape, {}).update(entry)
        if "replay1" in opts["modes"]:  # under callgrind: one run of n after a fixed warm-up
            measure_replay(frames, f, opts["shapes"], opts["n"], 1, warmup=300)
    print(json.dumps(out))


def measure_instructions(
    frames_path: Path, flush: str, shape: str, source: str | None, n: int
) -> dict[str, Any] | None:
    """Instructions per request of the in-process replay (user space only, every thread), counted
    by valgrind's callgrind: the difference between a run of ``n // 4`` and one of ``n + n // 4``
    single sends (1/8 as many batches, at least 50) after the same 300-request warm-up, so start-up
    cancels out. Deterministic to about
    0.1%, unlike time on a shared machine. None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    env = dict(os.environ, PYTHONHASHSEED="0")
    if source:
        env["PYTHONPATH"] = source
    counts = []
    sizes = (n // 4, n + n // 4)  # in single sends; measure_replay sends 1/8 as many batches
    requests = [size if shape == "single" else max(size // 8, 50) for size in sizes]
    for size in sizes:
        opts = {"flush": [flush], "shapes": [shape], "n": size, "top": 0, "modes": ["replay1"]}
        with tempfile.NamedTemporaryFile(prefix="callgrind.") as out:
            res = subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    "--cache-sim=no",
                    f"--callgrind-out-file={out.name}",
                    sys.executable,
                    __file__,
                    "--child",
                    str(frames_path),
                    json.dumps(opts),
                ],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        found = re.search(r"Collected : (\d+)", res.stderr)
        if res.returncode != 0 or found is None:
            raise RuntimeError(f"callgrind run failed:\n{res.stderr[-3000:]}")
        counts.append(int(found.group(1)))
    return {"instructions": round((counts[1] - counts[0]) / (requests[1] - requests[0]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=5000, help="single sends per measure (batches: 1/8)")
    parser.add_argument("--flush", nargs="+", choices=("async", "sync"), default=["async", "sync"])
    parser.add_argument("--shape", nargs="+", choices=("single", "batch32"), default=["single", "batch32"])
    parser.add_argument(
        "--mode",
        nargs="+",
        choices=("cpu", "calls", "replay", "instructions"),
        default=["cpu", "calls", "replay"],
        help="instructions: callgrind (slow, needs valgrind; --requests 1000 is plenty)",
    )
    parser.add_argument("--source", nargs="*", default=[], help="checkouts to A/B (default: this one)")
    parser.add_argument("--reps", type=int, default=1, help="alternating repetitions per source")
    parser.add_argument("--top", type=int, default=0, help="list the N most-called functions")
    args = parser.parse_args()
    import pickle

    from tidemq.remoting.loop import use_best_event_loop

    use_best_event_loop()
    sources: list[str | None] = list(args.source) or [None]
    with tempfile.TemporaryDirectory() as tmp:
        frames = capture_frames(Path(tmp))
        frames_path = Path(tmp) / "frames.pickle"
        frames_path.write_bytes(pickle.dumps(frames))
        results: dict[str | None, list[dict[str, Any]]] = {s: [] for s in sources}
        for _ in range(args.reps):
            for source in sources:
                rep: dict[str, Any] = {f: {} for f in args.flush}
                if "cpu" in args.mode:
                    for flush in args.flush:
                        rep[flush] = measure_cpu(frames, flush, args.shape, args.requests, source)
                if "instructions" in args.mode:
                    for flush in args.flush:
                        for shape in args.shape:
                            entry = measure_instructions(frames_path, flush, shape, source, args.requests)
                            if entry is not None:
                                rep[flush].setdefault(shape, {}).update(entry)
                if {"calls", "replay"} & set(args.mode):
                    calls = _calls_in(source, args, frames_path)
                    for flush in args.flush:
                        for shape, entry in calls[flush].items():
                            rep[flush].setdefault(shape, {}).update(entry)
                results[source].append(rep)
    for source, reps in results.items():
        merged: dict[str, Any] = {
            "bench": "send_cpu",
            "source": source or ".",
            "load": os.getloadavg()[0],
            "interpreter": interpreter(),
        }
        for flush in args.flush:
            merged[flush] = {}
            for shape in args.shape:
                keys = reps[0][flush].get(shape, {})
                merged[flush][shape] = {
                    k: (statistics.median(r[flush][shape][k] for r in reps) if k != "top" else v)
                    for k, v in keys.items()
                }
        print(json.dumps(merged))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _calls_child()
    else:
        main()
