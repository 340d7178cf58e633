"""Python function calls per consumed message, in the consumer process: a count that a shared,
noisy machine does not change (unlike messages/s), for A/B runs of the consume path.

Setup: ``tidemq serve`` in a subprocess; ``--messages`` 1 KiB messages stored first (batches of
32) on a topic of 8 queues; then one sync consumer reads them all from the first offset while a
profile hook (``threading.setprofile`` + ``sys.setprofile``) counts every Python function call on
every thread of this process, from ``start()`` until the last message is consumed:

* ``push``: ``PushConsumer`` (batch listener, ``consume_message_batch_max_size=32``);
* ``litepull``: ``PullConsumer`` (``poll`` + ``commit_sync`` per poll).

Prints one JSON line ``{"push_calls_per_msg": ..., "litepull_calls_per_msg": ...}``. A/B another
checkout: ``PYTHONPATH=/other/checkout python bench/consume_calls.py`` (the script imports
whichever ``tidemq`` comes first on the path). Run: ``python -m bench.consume_calls [--messages N]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tidemq.client.consumer.pull import PullConsumer
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ServeProcess


class CallCounter:
    """Counts Python calls on every thread while installed (a ``with`` block)."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self.calls += 1  # racy increments lose a few counts at most; no lock on the hot hook

    def __enter__(self) -> CallCounter:
        threading.setprofile(self._hook)
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def _fill(ns: str, topic: str, n: int) -> None:
    p = Producer(namesrv_addr=ns, producer_group="calls-p", default_topic_queue_nums=8)
    p.start()
    try:
        for i in range(0, n, 32):
            p.send_batch([Message(topic, b"x" * 1024) for _ in range(min(32, n - i))])
    finally:
        p.shutdown()


def push_calls(ns: str, topic: str, n: int) -> float:
    done = threading.Event()
    count = 0
    lock = threading.Lock()

    def on_msgs(msgs: list[MessageExt], ctx: object) -> None:
        nonlocal count
        with lock:
            count += len(msgs)
            if count >= n:
                done.set()

    c = PushConsumer(
        namesrv_addr=ns,
        consumer_group="calls-push",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        consume_message_batch_max_size=32,
    )
    c.subscribe(topic)
    c.register_message_listener(on_msgs)
    with CallCounter() as counter:
        c.start()
        if not done.wait(120):
            raise RuntimeError(f"push consumer got {count} of {n}")
        calls = counter.calls
    c.shutdown()
    return calls / n


def litepull_calls(ns: str, topic: str, n: int) -> float:
    c = PullConsumer(
        namesrv_addr=ns,
        consumer_group="calls-pull",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        auto_commit=False,
    )
    c.subscribe(topic)
    got = 0
    with CallCounter() as counter:
        c.start()
        deadline = time.monotonic() + 120
        while got < n and time.monotonic() < deadline:
            got += len(c.poll(1.0))
            c.commit_sync()
        calls = counter.calls
    c.shutdown()
    return calls / max(got, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=5000)
    args = ap.parse_args()
    out: dict[str, Any] = {"bench": "consume_calls", "messages": args.messages}
    with tempfile.TemporaryDirectory() as tmp, ServeProcess(Path(tmp) / "store") as proc:
        _fill(proc.namesrv_addr, "Calls", args.messages)
        out["push_calls_per_msg"] = round(push_calls(proc.namesrv_addr, "Calls", args.messages), 2)
        out["litepull_calls_per_msg"] = round(litepull_calls(proc.namesrv_addr, "Calls", args.messages), 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
