"""Consume with the real RocketMQ C++ push consumer (``rocketmq==0.4.4``); one JSON line per message.

Run as a subprocess by the interop tests::

    python cpp_push_consumer.py --namesrv 127.0.0.1:9876 --group G --topic T --count 100

Prints ``{"event": "started"}`` once the consumer started, then
``{"event": "msg", "body", "tags", "topic", "queue_id", "queue_offset", "msg_id", "reconsume_times"}``
per message (from the C++ callback threads, serialised and flushed) and exits after ``--count``
messages (0 = no limit) or ``--duration`` seconds, printing ``{"event": "done", "received": n}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

_lock = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    line = json.dumps(obj) + "\n"
    with _lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--expression", default="*")
    parser.add_argument("--model", choices=["clustering", "broadcasting"], default="clustering")
    parser.add_argument("--orderly", action="store_true")
    parser.add_argument("--count", type=int, default=0, help="exit after this many messages (0 = never)")
    parser.add_argument("--duration", type=float, default=60.0, help="exit after this many seconds")
    parser.add_argument("--instance", default="", help="C++ instance name")
    args = parser.parse_args()

    from rocketmq.client import MessageModel, PushConsumer

    model = MessageModel.BROADCASTING if args.model == "broadcasting" else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, orderly=args.orderly, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    if args.instance:
        consumer.set_instance_name(args.instance)
    received = 0
    enough = threading.Event()
    count_lock = threading.Lock()

    def on_message(msg: Any) -> None:
        nonlocal received
        emit(
            {
                "event": "msg",
                "body": _text(msg.body),
                "tags": _text(msg.tags),
                "topic": msg.topic,
                "queue_id": msg.queue_id,
                "queue_offset": msg.queue_offset,
                "msg_id": msg.id,
                "reconsume_times": msg.reconsume_times,
            }
        )
        with count_lock:
            received += 1
            if args.count and received >= args.count:
                enough.set()

    consumer.subscribe(args.topic, on_message, args.expression)
    consumer.start()
    emit({"event": "started", "group": args.group, "model": args.model})
    deadline = time.monotonic() + args.duration
    try:
        while not enough.is_set() and time.monotonic() < deadline:
            enough.wait(0.1)
    finally:
        emit({"event": "done", "received": received})
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
