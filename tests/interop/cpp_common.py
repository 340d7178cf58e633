"""What the C++ client scripts of this folder (``cpp_*.py``) share: JSON lines, arguments, consumers.

The scripts run as subprocesses (``python tests/interop/cpp_x.py ...``, see ``harness.py``), so
Python puts this folder first on ``sys.path`` and they import this module as ``cpp_common``.
It imports ``rocketmq`` (the real C++ client, ``rocketmq==0.4.4``) only inside the functions that
need it.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

_emit_lock = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    """Print ``obj`` as one JSON line and flush (whole lines, also from C++ callback threads)."""
    line = json.dumps(obj) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def text(value: Any) -> str:
    """A C++ string field as ``str``: bytes decoded as UTF-8 (replacing errors), None as ``""``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def add_client_args(parser: argparse.ArgumentParser, *, group: str | None = None) -> None:
    """``--namesrv`` and ``--topic`` (required) and ``--group`` (required when ``group`` is None,
    else defaulting to it)."""
    parser.add_argument("--namesrv", required=True, help="name server host:port")
    parser.add_argument("--topic", required=True)
    if group is None:
        parser.add_argument("--group", required=True)
    else:
        parser.add_argument("--group", default=group)


def message_dict(msg: Any, **extra: Any) -> dict[str, Any]:
    """``{"event": "msg", "topic", "body", "tags", "msg_id", "queue_id", "queue_offset",
    "reconsume_times"}`` of a C++ ``RecvMessage``, then ``extra``."""
    return {
        "event": "msg",
        "topic": msg.topic,
        "body": text(msg.body),
        "tags": text(msg.tags),
        "msg_id": msg.id,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "reconsume_times": msg.reconsume_times,
        **extra,
    }


def push_consumer(group: str, namesrv: str, **kwargs: Any) -> Any:
    """A C++ ``PushConsumer(group, **kwargs)`` on name server ``namesrv`` (not started)."""
    from rocketmq.client import PushConsumer

    consumer = PushConsumer(group, **kwargs)
    consumer.set_namesrv_addr(namesrv)
    return consumer


class MessageCounter:
    """Counts messages from the C++ callback threads; ``enough`` is set at ``count`` (0 = never)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.received = 0
        self.enough = threading.Event()
        self._lock = threading.Lock()

    def add(self) -> None:
        """One more message."""
        with self._lock:
            self.received += 1
            if self.count and self.received >= self.count:
                self.enough.set()


def run_push_consumer(consumer: Any, counter: MessageCounter, duration: float, **started: Any) -> None:
    """Start ``consumer``, print ``{"event": "started", **started}``, wait until ``counter`` has
    enough or ``duration`` seconds passed, then print ``{"event": "done", "received"}`` and shut
    the consumer down."""
    consumer.start()
    emit({"event": "started", **started})
    deadline = time.monotonic() + duration
    try:
        while not counter.enough.is_set() and time.monotonic() < deadline:
            counter.enough.wait(0.1)
    finally:
        emit({"event": "done", "received": counter.received})
        consumer.shutdown()
