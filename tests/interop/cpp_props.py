"""Real C++ client (``rocketmq==0.4.4``) producer / push consumer that carries keys and user properties.

Run as a subprocess by ``test_cross_produce.py``::

    python cpp_props.py produce --namesrv NS --topic T --count 20 --big-every 4 --big-size 6000
    python cpp_props.py consume --namesrv NS --topic T --group G --count 20 --props color,idx

``produce`` sends message i with body ``<prefix>-<i>`` (padded with ``abc...`` to ``--big-size``
bytes for every ``--big-every``-th message, so the C++ client compresses it), tags ``TagA`` /
``TagB`` alternately, keys ``key-<i>`` and user properties ``color=c<i%3>``, ``idx=<i>``; prints
``{"event": "sent", "i", "body", "tags", "keys", "props", "msg_id", "status"}`` per message and
``{"event": "done", "sent", "failed"}`` at the end.

``consume`` prints ``{"event": "started"}``, then per message
``{"event": "msg", "body", "tags", "keys", "props": {name: value}, "msg_id", "queue_id",
"queue_offset", "topic", "reconsume_times"}`` (``--props`` names the properties to read), and exits after
``--count`` messages or ``--duration`` seconds with ``{"event": "done", "received"}``.
"""

from __future__ import annotations

import argparse
import string
import sys
from typing import Any

from cpp_common import (
    MessageCounter,
    add_client_args,
    emit,
    message_dict,
    push_consumer,
    run_push_consumer,
    text,
)


def make_body(prefix: str, i: int, size: int) -> str:
    """``<prefix>-<i>``, padded to ``size`` bytes with a letter pattern when ``size`` > 0."""
    body = f"{prefix}-{i}|"
    pattern = string.ascii_letters + string.digits
    while len(body) < size:
        body += pattern[(len(body) * 7 + i) % len(pattern)]
    return body if size <= 0 else body[:size]


def produce(args: argparse.Namespace) -> int:
    from rocketmq.client import Message, Producer

    producer = Producer(args.group, timeout=args.timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    sent = failed = 0
    try:
        for i in range(args.count):
            big = args.big_every > 0 and i % args.big_every == 0
            body = make_body(args.prefix, i, args.big_size if big else 0)
            tags = "TagA" if i % 2 == 0 else "TagB"
            keys = f"key-{i}"
            props = {"color": f"c{i % 3}", "idx": str(i)}
            msg = Message(args.topic)
            msg.set_body(body)
            msg.set_tags(tags)
            msg.set_keys(keys)
            for name, value in props.items():
                msg.set_property(name, value)
            try:
                result = producer.send_sync(msg)
            except Exception as exc:  # reported; the test decides
                failed += 1
                emit({"event": "error", "i": i, "error": f"{type(exc).__name__}: {exc}"})
                continue
            sent += 1
            emit(
                {
                    "event": "sent",
                    "i": i,
                    "body": body,
                    "tags": tags,
                    "keys": keys,
                    "props": props,
                    "msg_id": result.msg_id,
                    "status": int(result.status),
                }
            )
    finally:
        emit({"event": "done", "sent": sent, "failed": failed})
        producer.shutdown()
    return 0 if failed == 0 else 1


def consume(args: argparse.Namespace) -> int:
    names = [n for n in args.props.split(",") if n]
    consumer = push_consumer(args.group, args.namesrv)
    counter = MessageCounter(args.count)

    def on_message(msg: Any) -> None:
        props = {n: text(msg.get_property(n)) for n in names}
        emit(message_dict(msg, keys=text(msg.keys), props=props))
        counter.add()

    consumer.subscribe(args.topic, on_message, args.expression)
    run_push_consumer(consumer, counter, args.duration)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("produce")
    add_client_args(p, group="CppPropsProducer")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--prefix", default="cpp")
    p.add_argument("--big-every", type=int, default=0, help="every n-th message is big (0 = none)")
    p.add_argument("--big-size", type=int, default=6000)
    p.add_argument("--timeout-ms", type=int, default=5000)
    c = sub.add_parser("consume")
    add_client_args(c)
    c.add_argument("--expression", default="*")
    c.add_argument("--props", default="", help="comma-separated property names to print")
    c.add_argument("--count", type=int, default=0, help="exit after this many messages (0 = never)")
    c.add_argument("--duration", type=float, default=60.0)
    args = parser.parse_args()
    return produce(args) if args.cmd == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
