"""Run the C++ client scripts of this folder as subprocesses and read their JSON lines.

Each script prints one JSON object per line (flushed); :class:`CppProcess` collects them in a
background reader thread so tests can wait on a condition with a deadline instead of sleeping.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

Event = dict[str, Any]


class CppProcess:
    """One C++ client script running in its own process.

    Args:
        script: file name in ``tests/interop`` (e.g. ``"cpp_producer.py"``).
        args: command-line arguments.
        home: the child's ``$HOME`` (librocketmq writes its logs and local offsets there).
        name: label used in failure messages.
        stdin: give the child a stdin pipe (see :meth:`send_line`); otherwise /dev/null.
    """

    def __init__(self, script: str, args: list[str], home: Path, name: str = "", stdin: bool = False) -> None:
        self.name = name or script
        env = dict(os.environ)
        env["HOME"] = str(home)
        env["PYTHONUNBUFFERED"] = "1"
        home.mkdir(parents=True, exist_ok=True)
        self.stderr_path = home / f"{self.name}.stderr.log"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / script), *args],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=str(home),
        )
        self.events: list[Event] = []
        self._queue: queue.Queue[Event | None] = queue.Queue()
        self._cond = threading.Condition()
        self._eof = False
        self._reader = threading.Thread(target=self._read, name=f"reader-{self.name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "noise", "line": line}
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def send_line(self, text: str) -> None:
        """Write one line to the child's stdin (started with ``stdin=True``)."""
        assert self.proc.stdin is not None, f"{self.name} was started without a stdin pipe"
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def of(self, kind: str) -> list[Event]:
        """Events of one kind seen so far (``"msg"``, ``"sent"``, ``"error"``...)."""
        with self._cond:
            return [e for e in self.events if e.get("event") == kind]

    def wait_until(self, predicate: Callable[[CppProcess], bool], timeout: float) -> bool:
        """Wait until ``predicate(self)`` holds or ``timeout`` seconds pass; True when it held.

        Also returns (False) early once the process's output ended and the predicate still fails.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate(self):
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return predicate(self)
                self._cond.wait(min(left, 0.5))

    def wait_event(self, kind: str, timeout: float, n: int = 1) -> bool:
        """Wait for at least ``n`` events of ``kind``."""
        return self.wait_until(lambda p: len(p.of(kind)) >= n, timeout)

    def wait_exit(self, timeout: float) -> int | None:
        """Wait for the process to exit; its return code, or None if still running."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        """Terminate (then kill) the process if it still runs; close files."""
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)
        self._stderr.close()

    def describe(self) -> str:
        """Short diagnostic for assertion messages: return code, last events, stderr tail."""
        tail = self.stderr_path.read_text(errors="replace")[-1500:] if self.stderr_path.exists() else ""
        with self._cond:
            last = self.events[-5:]
            errors = [e for e in self.events if e.get("event") == "error"][:5]
        return f"{self.name}: rc={self.proc.poll()} errors={errors} last={last} stderr=...{tail}"


def stored_messages(broker: Any, topic: str) -> dict[int, list[Any]]:
    """Every message of ``topic`` in the broker's store, by queue id, in queue order (white box)."""
    from tidemq.protocol.message_codec import decode_messages

    store = broker.store
    out: dict[int, list[Any]] = {}
    for queue_id in store.consume_queues.topics_and_queues().get(topic, []):
        msgs: list[Any] = []
        offset = store.get_min_offset_in_queue(topic, queue_id)
        end = store.get_max_offset_in_queue(topic, queue_id)
        while offset < end:
            result = store.get_message("interop-check", topic, queue_id, offset, 32, None)
            got = [m for buf in result.message_buffers for m in decode_messages(buf)]
            if not got:
                break
            msgs.extend(got)
            offset = result.next_begin_offset
        out[queue_id] = msgs
    return out


def stored_count(broker: Any, topic: str) -> int:
    """How many messages ``topic`` holds (sum of queue max - min offsets)."""
    store = broker.store
    return sum(
        store.get_max_offset_in_queue(topic, q) - store.get_min_offset_in_queue(topic, q)
        for q in store.consume_queues.topics_and_queues().get(topic, [])
    )


def group_client_ids(broker: Any, group: str) -> list[str]:
    """Client ids the broker has registered for ``group`` (empty when none)."""
    info = broker.consumer_manager.get_consumer_group_info(group)
    return info.get_all_client_ids() if info is not None else []
