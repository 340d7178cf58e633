"""The real RocketMQ C++ client (``rocketmq==0.4.4``) with ACL credentials; JSON lines on stdout.

Run as a subprocess by ``test_cpp_acl.py``::

    python cpp_acl.py produce --namesrv H:P --topic T --count 10 --ak AK --sk SK
    python cpp_acl.py consume --namesrv H:P --topic T --group G --count 10 --ak AK --sk SK

Both call ``set_session_credentials(ak, sk, channel)`` (C++ ``SetProducerSessionCredentials`` /
``SetPushConsumerSessionCredentials``) before ``start()``; ``--ak ""`` leaves it out.

produce prints ``{"event": "sent", "body", "status", "msg_id"}`` per message, ``{"event": "error",
"body", "error"}`` per failed send and ``{"event": "done", "sent", "failed"}``. consume prints
``{"event": "started"}``, ``{"event": "msg", "body", "topic", ...}`` (``cpp_common.message_dict``)
per message and ``{"event": "done", "received"}`` after ``--count`` messages or ``--duration``
seconds.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cpp_common import MessageCounter, add_client_args, emit, message_dict, push_consumer, run_push_consumer


def produce(args: argparse.Namespace) -> int:
    from rocketmq.client import Message, Producer

    producer = Producer(args.group or "CppAclProducer", timeout=args.timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    if args.ak:
        producer.set_session_credentials(args.ak, args.sk, args.channel)
    producer.start()
    emit({"event": "started"})
    sent = failed = 0
    try:
        for i in range(args.count):
            body = f"{args.prefix}-{i}"
            msg = Message(args.topic)
            msg.set_body(body)
            msg.set_keys(body)
            msg.set_tags("acl")
            try:
                result = producer.send_sync(msg)
            except Exception as exc:  # report and go on: the test decides what is acceptable
                failed += 1
                emit({"event": "error", "body": body, "error": f"{type(exc).__name__}: {exc}"})
                continue
            sent += 1
            emit({"event": "sent", "body": body, "status": int(result.status), "msg_id": result.msg_id})
    finally:
        emit({"event": "done", "sent": sent, "failed": failed})
        producer.shutdown()
    return 0 if failed == 0 else 1


def consume(args: argparse.Namespace) -> int:
    consumer = push_consumer(args.group or "CppAclConsumer", args.namesrv)
    if args.ak:
        consumer.set_session_credentials(args.ak, args.sk, args.channel)
    counter = MessageCounter(args.count)

    def on_message(msg: Any) -> None:
        emit(message_dict(msg))
        counter.add()

    consumer.subscribe(args.topic, on_message, "*")
    run_push_consumer(consumer, counter, args.duration)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=["produce", "consume"])
    add_client_args(parser, group="")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--prefix", default="acl")
    parser.add_argument("--ak", default="", help="access key ('' = no credentials)")
    parser.add_argument("--sk", default="")
    parser.add_argument("--channel", default="ALIYUN", help="OnsChannel value")
    parser.add_argument("--timeout-ms", type=int, default=3000)
    parser.add_argument("--duration", type=float, default=60.0, help="consume: exit after this many seconds")
    args = parser.parse_args()
    return produce(args) if args.role == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
