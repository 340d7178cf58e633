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
import time
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


TRANSPORT_RACE = "No route info of this topic"
"""What librocketmq 1.2.x raises once every attempt of a send failed. When that happens well inside
the send timeout, no attempt reached a broker: its send thread lost the race for a broker
connection that its heartbeat thread was opening ("GetTransport ... get timed_mutex timeout" in its
log), which a loaded machine makes likely on the first sends. Nothing was stored, so the send is
safe to repeat, as an application would."""

RACE_RETRIES = 6
"""How often a send lost to that race is repeated before it is reported as an error; the n-th
repeat waits ``RACE_BACKOFF_S * 2**n`` first (1.3 s in all), since the connection being opened
on the other thread is what the send waits for, and that thread gives no signal."""

RACE_BACKOFF_S = 0.02


def send_one(producer: Any, msg: Any, batch: dict[str, Any], i: int, timeout_s: float) -> dict[str, Any]:
    """One send of ``msg`` (message ``i`` of ``batch``) in the batch's mode; the fields to report.

    Repeats a send that failed fast with :data:`TRANSPORT_RACE` (at most :data:`RACE_RETRIES`
    times with a growing back-off, emitting a ``retry`` event each time); any other error, or one that took the send
    timeout (a broker may have stored it), is raised."""
    mode = batch["mode"]
    for attempt in range(RACE_RETRIES + 1):
        started = time.monotonic()
        try:
            if mode == "sync":
                result = producer.send_sync(msg)
                return {"status": int(result.status), "msg_id": result.msg_id, "offset": result.offset}
            if mode == "oneway":
                producer.send_oneway(msg)
                return {}
            if mode == "orderly":
                if batch.get("shard", "key") == "index":
                    key, arg = str(i), i
                else:
                    key = f"key-{i % int(batch.get('keys', 8))}"
                    arg = zlib.crc32(key.encode()) & 0x7FFFFFFF
                result = producer.send_orderly(msg, arg)
                return {
                    "status": int(result.status),
                    "msg_id": result.msg_id,
                    "offset": result.offset,
                    "key": key,
                }
            raise ValueError(f"unknown mode {mode!r}")
        except Exception as exc:
            fast = time.monotonic() - started < timeout_s / 2
            if attempt == RACE_RETRIES or not fast or TRANSPORT_RACE not in str(exc):
                raise
            emit({"event": "retry", "attempt": attempt + 1, "error": f"{type(exc).__name__}: {exc}"})
            time.sleep(RACE_BACKOFF_S * 2**attempt)
    raise AssertionError("unreachable")


def send_batch(producer: Any, topic: str, batch: dict[str, Any], timeout_s: float) -> tuple[int, int]:
    """Send one batch as described by ``batch``; returns (sent, failed)."""
    from rocketmq.client import Message

    tags = [t for t in str(batch.get("tags") or "").split(",") if t]
    sent = failed = 0
    for i in range(int(batch["count"])):
        body = f"{batch['prefix']}-{i}"
        msg = Message(topic)
        msg.set_body(body)
        msg.set_keys(body)
        tag = tags[i % len(tags)] if tags else ""
        if tag and tag != "-":
            msg.set_tags(tag)
        record: dict[str, Any] = {"event": "sent", "body": body, "tag": tag, "mode": batch["mode"]}
        try:
            record.update(send_one(producer, msg, batch, i, timeout_s))
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
            sent, failed = send_batch(producer, args.topic, batch, args.timeout_ms / 1000)
            failed_total += failed
            emit({"event": "done", "sent": sent, "failed": failed, "prefix": batch["prefix"]})
    finally:
        if oneway_used and not args.stdin:
            wait_for_release(ONEWAY_RELEASE_TIMEOUT_S)
        producer.shutdown()
    return 0 if failed_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
