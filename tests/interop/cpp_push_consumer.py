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
import sys
from typing import Any

from cpp_common import MessageCounter, add_client_args, emit, message_dict, push_consumer, run_push_consumer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_client_args(parser)
    parser.add_argument("--expression", default="*")
    parser.add_argument("--model", choices=["clustering", "broadcasting"], default="clustering")
    parser.add_argument("--orderly", action="store_true")
    parser.add_argument("--count", type=int, default=0, help="exit after this many messages (0 = never)")
    parser.add_argument("--duration", type=float, default=60.0, help="exit after this many seconds")
    parser.add_argument("--instance", default="", help="C++ instance name")
    args = parser.parse_args()

    from rocketmq.client import MessageModel

    model = MessageModel.BROADCASTING if args.model == "broadcasting" else MessageModel.CLUSTERING
    consumer = push_consumer(args.group, args.namesrv, orderly=args.orderly, message_model=model)
    if args.instance:
        consumer.set_instance_name(args.instance)
    counter = MessageCounter(args.count)

    def on_message(msg: Any) -> None:
        emit(message_dict(msg))
        counter.add()

    consumer.subscribe(args.topic, on_message, args.expression)
    run_push_consumer(consumer, counter, args.duration, group=args.group, model=args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
