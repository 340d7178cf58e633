"""``tidemq send`` and ``tidemq consume``: the client from the command line.

The lead adds :data:`send_command` and :data:`consume_command` to the ``tidemq`` click group.
Both print one JSON object per line on stdout (logs go to stderr).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tidemq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.client.producer.selector import SelectMessageQueueByHash
from tidemq.errors import TideMQError
from tidemq.protocol.message import Message, MessageExt, MessageQueue

__all__ = ["consume_command", "send_command"]


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def make_body(base: str, index: int, size: int | None) -> bytes:
    """``<base>-<index>``, padded with ``.`` to ``size`` bytes when given (never truncated)."""
    body = f"{base}-{index}".encode()
    if size is not None and len(body) < size:
        body += b"." * (size - len(body))
    return body


def credential_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--access-key`` / ``--secret-key`` (env ``TIDEMQ_ACCESS_KEY`` / ``TIDEMQ_SECRET_KEY``) for ACL brokers."""
    f = click.option(
        "--secret-key", envvar="TIDEMQ_SECRET_KEY", default=None, help="ACL secret key (signs every request)."
    )(f)
    return click.option("--access-key", envvar="TIDEMQ_ACCESS_KEY", default=None, help="ACL access key.")(f)


def credentials(access_key: str | None, secret_key: str | None) -> dict[str, Any]:
    """Client-config overrides for ACL credentials; both keys or neither.

    Raises:
        click.UsageError: only one of the two keys was given.
    """
    if (access_key is None) != (secret_key is None):
        raise click.UsageError("give both --access-key and --secret-key, or neither")
    return {"access_key": access_key, "secret_key": secret_key} if access_key and secret_key else {}


@click.command("send")
@click.option("--namesrv", required=True, help="Name server address host:port (';'-separated list).")
@click.option("--topic", required=True, help="Topic to send to.")
@click.option("--tag", default=None, help="Message tag.")
@click.option("--key", default=None, help="Message key.")
@click.option(
    "--body", default=None, help="Body text (default tidemq-msg); each message gets '-<i>' appended."
)
@click.option(
    "--file",
    "file_",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the body text from a file.",
)
@click.option("--count", default=1, show_default=True, type=click.IntRange(min=1), help="Messages to send.")
@click.option("--size", default=None, type=click.IntRange(min=1), help="Pad each body to this many bytes.")
@click.option(
    "--orderly-key", default=None, help="Send every message to the queue chosen by hashing this key."
)
@click.option("--group", default="tidemq-cli-producer", show_default=True, help="Producer group.")
@credential_options
def send_command(
    namesrv: str,
    topic: str,
    tag: str | None,
    key: str | None,
    body: str | None,
    file_: Path | None,
    count: int,
    size: int | None,
    orderly_key: str | None,
    group: str,
    access_key: str | None,
    secret_key: str | None,
) -> None:
    """Send COUNT messages and print one JSON line per SendResult."""
    if body is not None and file_ is not None:
        raise click.UsageError("give either --body or --file, not both")
    base = file_.read_text() if file_ is not None else (body if body is not None else "tidemq-msg")
    producer = Producer(namesrv_addr=namesrv, producer_group=group, **credentials(access_key, secret_key))
    try:
        producer.start()
        selector = SelectMessageQueueByHash() if orderly_key is not None else None
        for i in range(count):
            payload = make_body(base, i, size)
            msg = Message(topic, payload, tags=tag, keys=key)
            result = producer.send(msg, selector=selector, arg=orderly_key)
            _emit(
                {
                    "event": "sent",
                    "msgId": result.msg_id,
                    "offsetMsgId": result.offset_msg_id,
                    "queueId": result.message_queue.queue_id,
                    "queueOffset": result.queue_offset,
                    "status": result.send_status,
                    "body": payload.decode(errors="replace"),
                }
            )
    except TideMQError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        producer.shutdown()


def _message_event(m: MessageExt) -> dict[str, Any]:
    return {
        "event": "message",
        "topic": m.topic,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "msgId": m.msg_id,
        "tags": m.tags,
        "keys": m.keys,
        "body": m.body.decode(errors="replace"),
        "reconsumeTimes": m.reconsume_times,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
    }


class _CountLimit:
    """Hands out at most ``count`` messages to print; holds back the rest, unacknowledged.

    A push consumer acknowledges a message when its listener returns, and the group then commits
    the queue offset past it. Messages delivered after the ``count``-th must therefore never
    return from the listener: they wait in :meth:`hold` until the consumer has shut down (which
    cancels their consume requests, so their results are never processed and the committed
    offset stays at the first of them). The next member of the group gets them again. Nothing
    is sent back to the retry topic.

    With ``count=None`` every message is printed.
    """

    def __init__(self, count: int | None) -> None:
        self.count = count
        self.printed = 0
        self.held = 0
        self._lock = threading.Lock()
        self.reached = threading.Event()
        self._release = threading.Event()

    def claim(self, n: int) -> bool:
        """True when a batch of ``n`` messages may be printed (and acknowledged)."""
        with self._lock:
            if self.count is not None and self.printed >= self.count:
                self.held += n
                return False
            self.printed += n
            if self.count is not None and self.printed >= self.count:
                self.reached.set()
            return True

    def hold(self) -> None:
        """Block the calling consume thread until :meth:`release`."""
        self._release.wait()

    def release(self) -> None:
        """Let held consume threads return (after shutdown, so their results are discarded)."""
        self._release.set()


@click.command("consume")
@click.option("--namesrv", required=True, help="Name server address host:port.")
@click.option("--topic", required=True, help="Topic to consume.")
@click.option("--group", required=True, help="Consumer group.")
@click.option("--expression", default="*", show_default=True, help="'*' or 'tagA || tagB'.")
@click.option("--broadcast", is_flag=True, help="BROADCASTING instead of CLUSTERING.")
@click.option(
    "--orderly",
    is_flag=True,
    help="Orderly consumption: queues locked on the broker, each consumed in offset order.",
)
@click.option(
    "--from",
    "from_",
    type=click.Choice(["first", "last", "timestamp"]),
    default="last",
    show_default=True,
    help="Where a group without stored offsets starts.",
)
@click.option("--count", default=None, type=click.IntRange(min=1), help="Exit after this many messages.")
@click.option("--duration", default=None, type=click.FloatRange(min=0), help="Exit after this many seconds.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON lines (otherwise one short text line each)."
)
@credential_options
def consume_command(
    namesrv: str,
    topic: str,
    group: str,
    expression: str,
    broadcast: bool,
    orderly: bool,
    from_: str,
    count: int | None,
    duration: float | None,
    as_json: bool,
    access_key: str | None,
    secret_key: str | None,
) -> None:
    """Consume and print one line per message and per queue-assignment change.

    With ``--count N`` exactly N messages are printed and acknowledged; messages delivered after
    the N-th are neither printed nor acknowledged, so the group's committed offset never passes
    them and the next consumer of the group gets them (no retry-topic detour). To make "the first
    N" well defined, ``--count`` consumes on one thread, in delivery order.
    """
    limit = _CountLimit(count)
    out_lock = threading.Lock()

    def show(event: dict[str, Any]) -> None:
        with out_lock:
            if as_json:
                _emit(event)
            elif event["event"] == "message":
                click.echo(
                    f"{event['topic']}[{event['queueId']}]@{event['queueOffset']} {event['msgId']} {event['body']}"
                )
            else:
                click.echo(f"assignment: {event['queues']}")

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        if not limit.claim(len(msgs)):
            limit.hold()  # returns only after shutdown, when this result is discarded
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        for m in msgs:
            show(_message_event(m))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def orderly_listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        if not limit.claim(len(msgs)):
            limit.hold()
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        for m in msgs:
            show(_message_event(m))
        return ConsumeOrderlyStatus.SUCCESS

    def on_queues(t: str, mq_all: set[MessageQueue], mine: set[MessageQueue]) -> None:
        show(
            {
                "event": "assignment",
                "queues": [
                    {"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id}
                    for q in sorted(mine)
                ],
            }
        )

    cfw = {
        "first": "CONSUME_FROM_FIRST_OFFSET",
        "last": "CONSUME_FROM_LAST_OFFSET",
        "timestamp": "CONSUME_FROM_TIMESTAMP",
    }
    extra: dict[str, Any] = {}
    if count is not None:
        extra = {"consume_thread_min": 1, "consume_thread_max": 1, "consume_message_batch_max_size": 1}
    consumer = PushConsumer(
        namesrv_addr=namesrv,
        consumer_group=group,
        message_model="BROADCASTING" if broadcast else "CLUSTERING",
        consume_from_where=cfw[from_],
        **extra,
        **credentials(access_key, secret_key),
    )
    consumer.subscribe(topic, expression)
    if orderly:
        consumer.register_message_listener(orderly_listener, orderly=True)
    else:
        consumer.register_message_listener(listener)
    consumer.set_queue_listener(on_queues)
    deadline = None if duration is None else time.monotonic() + duration
    try:
        consumer.start()
        while not limit.reached.is_set():
            wait = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if wait <= 0:
                break
            limit.reached.wait(wait)
    except TideMQError as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        pass
    finally:
        consumer.core.suspend()
        # Held messages never finish: a short drain cancels them (their offsets stay uncommitted).
        consumer.shutdown(timeout=1.0 if limit.count is not None else 10.0)
        limit.release()
