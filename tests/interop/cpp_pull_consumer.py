"""Read one queue from an offset with the real RocketMQ C++ pull consumer (``rocketmq==0.4.4``).

Run as a subprocess by the interop tests::

    python cpp_pull_consumer.py --namesrv 127.0.0.1:9876 --group G --topic T --queue-id 0

Pulls queue ``--queue-id`` from ``--offset`` (default 0) until ``--count`` messages were read, the
broker reports no new message (``--until-empty``), or ``--duration`` passes. One line per message
``{"event": "msg", "body", "tags", "queue_id", "queue_offset", ...}`` (``cpp_common.message_dict``),
one per pull ``{"event": "pull", "status", "next_begin_offset", "min_offset", "max_offset", "size"}`` and
``{"event": "done", "received": n, "next_offset": o}`` at the end.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time

from cpp_common import add_client_args, emit, message_dict

STATUS = {0: "FOUND", 1: "NO_NEW_MSG", 2: "NO_MATCHED_MSG", 3: "OFFSET_ILLEGAL", 4: "BROKER_TIMEOUT"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_client_args(parser)
    parser.add_argument("--queue-id", type=int, default=0)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--expression", default="*")
    parser.add_argument("--max-nums", type=int, default=32)
    parser.add_argument("--count", type=int, default=0, help="stop after this many messages (0 = no limit)")
    parser.add_argument("--until-empty", action="store_true", help="stop at the first NO_NEW_MSG")
    parser.add_argument("--duration", type=float, default=30.0)
    args = parser.parse_args()

    from rocketmq.client import PullConsumer, RecvMessage
    from rocketmq.ffi import _CMessageQueue, dll

    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.start()
    received = 0
    offset = args.offset
    try:
        queues = ctypes.POINTER(_CMessageQueue)()
        size = ctypes.c_int()
        status = dll.FetchSubscriptionMessageQueues(
            consumer._handle, args.topic.encode(), ctypes.pointer(queues), ctypes.pointer(size)
        )
        if int(status) != 0:
            emit({"event": "error", "error": f"FetchSubscriptionMessageQueues failed: {int(status)}"})
            return 1
        chosen = None
        for i in range(size.value):
            if queues[i].queueId == args.queue_id:
                chosen = queues[i]
        emit(
            {
                "event": "queues",
                "count": size.value,
                "ids": sorted(queues[i].queueId for i in range(size.value)),
            }
        )
        if chosen is None:
            emit({"event": "error", "error": f"queue {args.queue_id} not in route"})
            return 1
        deadline = time.monotonic() + args.duration
        while time.monotonic() < deadline:
            res = dll.Pull(
                consumer._handle, ctypes.pointer(chosen), args.expression.encode(), offset, args.max_nums
            )
            name = STATUS.get(res.pullStatus, str(res.pullStatus))
            emit(
                {
                    "event": "pull",
                    "status": name,
                    "next_begin_offset": res.nextBeginOffset,
                    "min_offset": res.minOffset,
                    "max_offset": res.maxOffset,
                    "size": res.size,
                }
            )
            if name == "FOUND":
                for i in range(res.size):
                    msg = RecvMessage(res.msgFoundList[i])
                    emit(message_dict(msg))
                    received += 1
            if name != "BROKER_TIMEOUT":
                offset = res.nextBeginOffset
            dll.ReleasePullResult(res)
            if args.count and received >= args.count:
                break
            if name == "NO_NEW_MSG" and args.until_empty:
                break
            if name in ("NO_NEW_MSG", "NO_MATCHED_MSG", "OFFSET_ILLEGAL", "BROKER_TIMEOUT"):
                time.sleep(0.05)
        dll.ReleaseSubscriptionMessageQueue(queues)
    finally:
        emit({"event": "done", "received": received, "next_offset": offset})
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
