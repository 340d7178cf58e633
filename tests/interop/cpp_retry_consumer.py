"""A real RocketMQ C++ push consumer (``rocketmq==0.4.4``) that answers RECONSUME_LATER on purpose.

Run as a subprocess by the interop tests::

    python cpp_retry_consumer.py --namesrv 127.0.0.1:9876 --group G --topic T --fail-prefix retry- --fail-times 1

Every message whose body starts with ``--fail-prefix`` gets RECONSUME_LATER for its first
``--fail-times`` deliveries (counted per body), then CONSUME_SUCCESS; others succeed at once. With
``--orderly`` the orderly callback is used instead (the C++ client then re-consumes locally).

Prints ``{"event": "started"}``, then per delivery ``{"event": "msg", "body", "tags", "topic", "queue_id",
"queue_offset", "msg_id", "reconsume_times", "status", "t"}`` (``t`` = time.time()), and
``{"event": "done", "received": n}`` after ``--duration`` seconds or once ``--count`` successes
were seen.

The binding's ``subscribe`` cannot return RECONSUME_LATER (a raised exception escapes the ctypes
callback, which then returns 0 = success), so this script registers its own callback through the
binding's low-level ``dll`` calls.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_client_args(parser)
    parser.add_argument("--orderly", action="store_true")
    parser.add_argument("--fail-prefix", default="retry-")
    parser.add_argument("--fail-times", type=int, default=1)
    parser.add_argument("--count", type=int, default=0, help="exit after this many successes (0 = never)")
    parser.add_argument("--duration", type=float, default=60.0)
    args = parser.parse_args()

    from rocketmq.client import RecvMessage, _to_bytes, dll, ffi_check
    from rocketmq.ffi import _CConsumeStatus

    consumer = push_consumer(args.group, args.namesrv, orderly=args.orderly)
    # the C binding stops at the first failing message of a batch and fails the whole batch:
    # one message per callback keeps the per-message results exact
    consumer.set_message_batch_max_size(1)
    failures: Counter[str] = Counter()
    successes = MessageCounter(args.count)

    def on_message(_consumer: Any, raw: Any) -> int:
        try:
            msg = RecvMessage(raw)
            body = text(msg.body)
            fail = body.startswith(args.fail_prefix) and failures[body] < args.fail_times
            if fail:
                failures[body] += 1
            emit(message_dict(msg, status="RECONSUME_LATER" if fail else "CONSUME_SUCCESS", t=time.time()))
            if fail:
                return int(_CConsumeStatus.RECONSUME_LATER.value)
            successes.add()
            return int(_CConsumeStatus.CONSUME_SUCCESS.value)
        except Exception as exc:  # never let an exception escape into C++
            emit({"event": "error", "error": f"{type(exc).__name__}: {exc}"})
            return int(_CConsumeStatus.RECONSUME_LATER.value)

    ffi_check(dll.Subscribe(consumer._handle, _to_bytes(args.topic), _to_bytes("*")))
    consumer._register_callback(on_message)
    run_push_consumer(consumer, successes, args.duration, group=args.group)
    return 0


if __name__ == "__main__":
    sys.exit(main())
