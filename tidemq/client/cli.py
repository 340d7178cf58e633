"""``tidemq send`` and ``tidemq consume``: the client from the command line.

The lead adds :data:`send_command` and :data:`consume_command` to the ``tidemq`` click group.
``send`` prints one JSON object per SendResult; ``consume`` one text line per message and per
queue-assignment change, or JSON lines with ``--json`` (logs go to stderr). Both take
``-n/--namesrv`` (default ``$NAMESRV_ADDR``, else ``127.0.0.1:9876``) as ``tidemq admin`` does.
SIGTERM stops ``consume`` as Ctrl-C does: the consumer shuts down and persists its offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
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
from tidemq.client.consumer.selector import MessageSelector
from tidemq.client.producer.producer import Producer
from tidemq.client.producer.selector import SelectMessageQueueByHash
from tidemq.errors import ClientError, TideMQError
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


def pad_body(body: bytes, size: int | None) -> bytes:
    """``body`` padded with ``.`` to ``size`` bytes when given (never truncated)."""
    return body + b"." * (size - len(body)) if size is not None and len(body) < size else body


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


def verbose_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-v`` (INFO logs) / ``-vv`` (DEBUG); without it a client command logs warnings only."""

    def set_level(ctx: click.Context, param: click.Parameter, value: int) -> int:
        if value:
            logging.getLogger().setLevel(logging.DEBUG if value > 1 else logging.INFO)
        return value

    return click.option(
        "-v", "--verbose", count=True, expose_value=False, callback=set_level, help="More logs (-vv: debug)."
    )(f)


def read_body(body: str | None, file_: str | None) -> bytes | None:
    """``--body TEXT`` (exactly TEXT, UTF-8) or ``--file PATH`` (its bytes; ``-`` = stdin); None for neither.

    Raises:
        click.UsageError: both given. click.FileError: the file cannot be read.
    """
    if body is not None and file_ is not None:
        raise click.UsageError("give either --body or --file, not both")
    if body is not None:
        return body.encode()
    if file_ is None:
        return None
    if file_ == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(file_).read_bytes()
    except OSError as exc:
        raise click.FileError(file_, str(exc.strerror or exc)) from None


def namesrv_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-n/--namesrv`` with ``$NAMESRV_ADDR`` and ``127.0.0.1:9876`` as defaults (as ``tidemq admin``)."""
    return click.option(
        "-n",
        "--namesrv",
        envvar="NAMESRV_ADDR",
        default="127.0.0.1:9876",
        show_default="$NAMESRV_ADDR or 127.0.0.1:9876",
        help="Name server address(es), host:port[;host:port].",
    )(f)


def check_topic_name(topic: str, *, sending: bool) -> None:
    """Refuse an invalid topic name (and, when ``sending``, a reserved system topic) before any I/O.

    Raises:
        click.BadParameter: what is wrong with ``--topic``.
    """
    from tidemq.protocol.topic import check_topic, is_system_topic

    problem = check_topic(topic)
    if problem is not None:
        raise click.BadParameter(f"invalid topic name: {problem}", param_hint="'--topic'")
    if sending and is_system_topic(topic):
        raise click.BadParameter(
            f"{topic} is a reserved system topic (RocketMQ's TopicValidator); send to a topic of your own",
            param_hint="'--topic'",
        )


def require_route(namesrv: str, topic: str, timeout: float = 5.0) -> None:
    """Fail fast when the name servers have no route for ``topic`` (instead of waiting silently).

    Raises:
        click.ClickException: no name server knows the topic, or none answered.
    """
    from tidemq.client.api import ClientAPI
    from tidemq.errors import NoRouteError, RemotingError
    from tidemq.remoting.client import RemotingClient

    async def check() -> str | None:
        remoting = RemotingClient()
        api = ClientAPI(remoting)
        problem = None
        try:
            for addr in [a.strip() for a in namesrv.split(";") if a.strip()]:
                try:
                    await api.get_topic_route_info_from_name_server(addr, topic, timeout)
                    return None
                except NoRouteError:
                    problem = (
                        f"topic {topic} does not exist (name server {addr} has no route for it); create it with "
                        f"`tidemq admin updateTopic -n {addr} -t {topic}` or send a message to it first"
                    )
                except (RemotingError, OSError) as exc:
                    problem = problem or f"cannot reach name server {addr}: {exc} (check --namesrv)"
        finally:
            await remoting.close()
        return problem

    problem = asyncio.run(check())
    if problem is not None:
        raise click.ClickException(problem)


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Silence ``logger_name`` below ERROR inside the block (an expected, harmless warning)."""
    log = logging.getLogger(logger_name)
    old = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(old)


@click.command("send")
@namesrv_option
@click.option("--topic", required=True, help="Topic to send to.")
@click.option("--tag", default=None, help="Message tag.")
@click.option("--key", default=None, help="Message key.")
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="NAME=VALUE",
    help="A user property (repeatable), e.g. for SQL92 filters: --property region=eu.",
)
@click.option(
    "--body", default=None, help="Body text, sent exactly as given (default: tidemq-msg-<i> per message)."
)
@click.option("--file", "file_", default=None, help="Send this file's bytes as the body ('-' = stdin).")
@click.option("--count", default=1, show_default=True, type=click.IntRange(min=1), help="Messages to send.")
@click.option("--size", default=None, type=click.IntRange(min=1), help="Pad each body to this many bytes.")
@click.option(
    "--orderly-key", default=None, help="Send every message to the queue chosen by hashing this key."
)
@click.option("--group", default="tidemq-cli-producer", show_default=True, help="Producer group.")
@credential_options
@verbose_option
def send_command(
    namesrv: str,
    topic: str,
    tag: str | None,
    key: str | None,
    properties: tuple[str, ...],
    body: str | None,
    file_: str | None,
    count: int,
    size: int | None,
    orderly_key: str | None,
    group: str,
    access_key: str | None,
    secret_key: str | None,
) -> None:
    """Send COUNT messages and print one JSON line per SendResult.

    With --body or --file every message carries exactly that body (padded to --size when given);
    without them message i carries ``tidemq-msg-<i>``.
    """
    check_topic_name(topic, sending=True)
    exact = read_body(body, file_)
    props = _properties(properties)
    producer = Producer(namesrv_addr=namesrv, producer_group=group, **credentials(access_key, secret_key))
    try:
        producer.start()
        selector = SelectMessageQueueByHash() if orderly_key is not None else None
        for i in range(count):
            payload = make_body("tidemq-msg", i, size) if exact is None else pad_body(exact, size)
            msg = Message(topic, payload, tags=tag, keys=key, properties=props)
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


def _properties(pairs: tuple[str, ...]) -> dict[str, str]:
    """``("a=1", "b=x")`` -> ``{"a": "1", "b": "x"}``; a pair without ``=`` is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="--property")
        out[name] = value
    return out


def _selector(expression: str, sql: str | None) -> str | MessageSelector:
    """``--sql`` (checked here) or the tag ``--expression``; both at once is a usage error."""
    if sql is None:
        return expression
    if expression != "*":
        raise click.UsageError("--sql and --expression cannot be combined (filter by TAGS in the SQL)")
    try:
        return MessageSelector.by_sql(sql)
    except ClientError as exc:
        raise click.BadParameter(str(exc), param_hint="--sql") from None


@click.command("consume")
@namesrv_option
@click.option("--topic", required=True, help="Topic to consume.")
@click.option("--group", required=True, help="Consumer group.")
@click.option("--expression", default="*", show_default=True, help="'*' or 'tagA || tagB'.")
@click.option(
    "--sql",
    default=None,
    help="SQL92 filter on message properties, e.g. \"a > 5 AND b = 'x'\" (docs/filters.md).",
)
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
@verbose_option
def consume_command(
    namesrv: str,
    topic: str,
    group: str,
    expression: str,
    sql: str | None,
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
    check_topic_name(topic, sending=False)
    selector = _selector(expression, sql)
    require_route(namesrv, topic)
    limit = _CountLimit(count)
    printer = _Printer(limit, as_json)
    consumer = _push_consumer(namesrv, group, broadcast, from_, count, access_key, secret_key)
    consumer.subscribe(topic, selector)
    if orderly:
        consumer.register_message_listener(printer.orderly_listener, orderly=True)
    else:
        consumer.register_message_listener(printer.listener)
    consumer.set_queue_listener(printer.on_queues)
    deadline = None if duration is None else time.monotonic() + duration
    stop = threading.Event()
    try:
        with _stop_on_sigterm(stop):
            _run_until(consumer, limit, stop, deadline)
    except TideMQError as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        pass
    finally:
        consumer.core.suspend()
        # Held messages never finish: a short drain cancels them (their offsets stay uncommitted).
        # That is the plan with --count, so the push consumer's "did not finish" warning is not shown.
        with _quiet("tidemq.client.consumer.push") if limit.count is not None else contextlib.nullcontext():
            consumer.shutdown(timeout=1.0 if limit.count is not None else 10.0)
        limit.release()


class _Printer:
    """``consume``'s listeners: print each message (text or JSON lines) and each assignment change,
    taking at most ``--count`` messages (``limit``)."""

    def __init__(self, limit: _CountLimit, as_json: bool) -> None:
        self.limit = limit
        self.as_json = as_json
        self._lock = threading.Lock()

    def show(self, event: dict[str, Any]) -> None:
        """Print one event (any listener thread)."""
        with self._lock:
            if self.as_json:
                _emit(event)
            elif event["event"] == "message":
                click.echo(
                    f"{event['topic']}[{event['queueId']}]@{event['queueOffset']} {event['msgId']} {event['body']}"
                )
            else:
                queues = ", ".join(f"{q['topic']}/{q['brokerName']}/{q['queueId']}" for q in event["queues"])
                click.echo(f"assignment: {queues or '(no queue)'}")

    def listener(self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        """Concurrent listener: messages past ``--count`` are held unacknowledged until shutdown."""
        if not self.limit.claim(len(msgs)):
            self.limit.hold()  # returns only after shutdown, when this result is discarded
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        for m in msgs:
            self.show(_message_event(m))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def orderly_listener(self, msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        """Orderly listener, as :meth:`listener`."""
        if not self.limit.claim(len(msgs)):
            self.limit.hold()
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        for m in msgs:
            self.show(_message_event(m))
        return ConsumeOrderlyStatus.SUCCESS

    def on_queues(self, topic: str, mq_all: set[MessageQueue], mine: set[MessageQueue]) -> None:
        """Queue listener: print this member's queues."""
        queues = [
            {"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id} for q in sorted(mine)
        ]
        self.show({"event": "assignment", "queues": queues})


def _push_consumer(
    namesrv: str,
    group: str,
    broadcast: bool,
    from_: str,
    count: int | None,
    access_key: str | None,
    secret_key: str | None,
) -> PushConsumer:
    """``consume``'s PushConsumer (with ``--count``: one thread, one message per call, so "the
    first N" is well defined)."""
    cfw = {
        "first": "CONSUME_FROM_FIRST_OFFSET",
        "last": "CONSUME_FROM_LAST_OFFSET",
        "timestamp": "CONSUME_FROM_TIMESTAMP",
    }
    extra: dict[str, Any] = {}
    if count is not None:
        extra = {"consume_thread_min": 1, "consume_thread_max": 1, "consume_message_batch_max_size": 1}
    return PushConsumer(
        namesrv_addr=namesrv,
        consumer_group=group,
        message_model="BROADCASTING" if broadcast else "CLUSTERING",
        consume_from_where=cfw[from_],
        **extra,
        **credentials(access_key, secret_key),
    )


@contextlib.contextmanager
def _stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """SIGTERM sets ``stop`` inside the block (main thread only), so ``consume`` shuts its consumer down."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _run_until(
    consumer: PushConsumer, limit: _CountLimit, stop: threading.Event, deadline: float | None
) -> None:
    """Start ``consumer`` and wait until ``--count`` is reached, ``--duration`` passed or SIGTERM came."""
    consumer.start()
    while not limit.reached.is_set() and not stop.is_set():
        wait = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
        if wait <= 0:
            break
        limit.reached.wait(wait)
