"""Send messages with the real RocketMQ C++ client (``rocketmq==0.4.4``); one JSON line per send.

Run as a subprocess by the interop tests::

    python cpp_producer.py --namesrv 127.0.0.1:9876 --topic T --mode sync --count 1000

Modes: ``sync`` (send_sync), ``oneway`` (send_oneway), ``orderly`` (send_orderly; ``--shard key``
sends message i with sharding key ``key-<i % keys>`` hashed to the selector argument, ``--shard
index`` uses ``i`` itself so message i lands on queue ``i % queue_count``). A ``oneway`` run
without ``--stdin`` ends by waiting for a line on (or the end of) its stdin, which its caller
writes once it has seen the messages at the broker. Bodies are
``<prefix>-<i>``; ``--tags`` is a comma list cycled over the messages ("-" = no tag).

Prints ``{"event": "sent", "body", "tag", "mode", "status", "msg_id", "offset", "key"}`` per
message, ``{"event": "error", ...}`` per failed send and ``{"event": "done", "sent", "failed"}`` at
the end of a batch. With ``--stdin`` it keeps the producer running and reads one JSON batch per
line (``{"mode", "count", "prefix", "tags", "shard"}``, missing keys = command-line values) until
end of input, answering each with a ``done`` line.
"""

from __future__ import annotations

import argparse
import json
import select
import sys
import zlib
from typing import Any

from cpp_common import add_client_args, emit

ONEWAY_RELEASE_TIMEOUT_S = 30.0
"""Most a oneway run waits for its caller's go-ahead before shutting the producer down."""


def wait_for_release(timeout: float) -> None:
    """Oneway frames are written asynchronously, and only the caller can see them arrive at the
    broker: wait (with a deadline) until it writes a line to our stdin or closes it. With
    ``--stdin`` the end of input is that signal already."""
    emit({"event": "waiting", "why": "oneway frames in flight; close stdin once they arrived"})
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    if ready:
        sys.stdin.readline()


def send_batch(producer: Any, topic: str, batch: dict[str, Any]) -> tuple[int, int]:
    """Send one batch as described by ``batch``; returns (sent, failed)."""
    from rocketmq.client import Message

    mode = batch["mode"]
    tags = [t for t in str(batch.get("tags") or "").split(",") if t]
    keys = int(batch.get("keys", 8))
    sent = failed = 0
    for i in range(int(batch["count"])):
        body = f"{batch['prefix']}-{i}"
        msg = Message(topic)
        msg.set_body(body)
        msg.set_keys(body)
        tag = tags[i % len(tags)] if tags else ""
        if tag and tag != "-":
            msg.set_tags(tag)
        record: dict[str, Any] = {"event": "sent", "body": body, "tag": tag, "mode": mode}
        try:
            if mode == "sync":
                result = producer.send_sync(msg)
                record.update(status=int(result.status), msg_id=result.msg_id, offset=result.offset)
            elif mode == "oneway":
                producer.send_oneway(msg)
            elif mode == "orderly":
                if batch.get("shard", "key") == "index":
                    key, arg = str(i), i
                else:
                    key = f"key-{i % keys}"
                    arg = zlib.crc32(key.encode()) & 0x7FFFFFFF
                result = producer.send_orderly(msg, arg)
                record.update(status=int(result.status), msg_id=result.msg_id, offset=result.offset, key=key)
            else:
                raise ValueError(f"unknown mode {mode!r}")
        except Exception as exc:  # report and go on: the test decides what is acceptable
            failed += 1
            emit({"event": "error", "body": body, "error": f"{type(exc).__name__}: {exc}"})
            continue
        sent += 1
        emit(record)
    return sent, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_client_args(parser, group="CppProducerGroup")
    parser.add_argument("--mode", choices=["sync", "oneway", "orderly"], default="sync")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--prefix", default="m")
    parser.add_argument("--tags", default="", help="comma-separated tags cycled over messages")
    parser.add_argument("--shard", choices=["key", "index"], default="key", help="orderly queue choice")
    parser.add_argument("--keys", type=int, default=8, help="number of sharding keys (orderly)")
    parser.add_argument("--timeout-ms", type=int, default=5000)
    parser.add_argument("--stdin", action="store_true", help="read JSON batches from stdin")
    args = parser.parse_args()

    from rocketmq.client import Producer

    defaults = {
        "mode": args.mode,
        "count": args.count,
        "prefix": args.prefix,
        "tags": args.tags,
        "shard": args.shard,
        "keys": args.keys,
    }
    producer = Producer(args.group, timeout=args.timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    emit({"event": "started"})
    failed_total = 0
    oneway_used = False
    try:
        batches = (
            ({**defaults, **json.loads(line)} for line in sys.stdin if line.strip())
            if args.stdin
            else iter([defaults])
        )
        for batch in batches:
            oneway_used |= batch["mode"] == "oneway"
            sent, failed = send_batch(producer, args.topic, batch)
            failed_total += failed
            emit({"event": "done", "sent": sent, "failed": failed, "prefix": batch["prefix"]})
    finally:
        if oneway_used and not args.stdin:
            wait_for_release(ONEWAY_RELEASE_TIMEOUT_S)
        producer.shutdown()
    return 0 if failed_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
