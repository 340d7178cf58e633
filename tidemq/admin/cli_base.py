"""What the ``tidemq admin`` verbs share (``tidemq.admin.cli`` registers them on ``admin_group``).

``admin_group`` (name ``admin``) is added to the ``tidemq`` command by ``tidemq.cli``. Every verb
has a kebab-case name (``topic-list``) and answers to mqadmin's own camelCase name too
(``tidemq admin topicList``). The verbs live in ``cli_topic``, ``cli_group``, ``cli_message`` and
``cli_broker``; this module holds what they share:

* ``-n/--namesrv`` (default ``$NAMESRV_ADDR``, else ``127.0.0.1:9876``);
* ``--access-key/--secret-key`` (``$TIDEMQ_ACCESS_KEY`` / ``$TIDEMQ_SECRET_KEY``) to sign requests
  for an ACL broker (use an account with ``admin: true``);
* ``--json`` for machine output (one JSON document on stdout), otherwise rich tables;
* errors: one ``error: ...`` line on stderr saying what to fix, exit status 1 (also when the
  named topic or group does not exist).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import click
import orjson

from tidemq.admin.client import AsyncAdminClient
from tidemq.errors import (
    BrokerError,
    ClientError,
    ConsumerNotOnlineError,
    NoPermissionError,
    NoRouteError,
    RemotingConnectError,
    RemotingTimeoutError,
    SubscriptionGroupNotExistError,
    TideMQError,
    TopicNotExistError,
)
from tidemq.protocol.message import MessageExt

__all__ = ["MQADMIN_NAMES", "Out", "admin_command", "admin_group", "format_table", "parse_time_ms"]

F = TypeVar("F", bound=Callable[..., Any])

MQADMIN_NAMES: dict[str, str] = {}
"""mqadmin's camelCase verb -> tidemq's kebab-case command name (filled as verbs register)."""


class _AliasedGroup(click.Group):
    """Resolves mqadmin's camelCase names; lists each verb once (kebab-case)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None:
            alias = MQADMIN_NAMES.get(cmd_name) or {k.lower(): v for k, v in MQADMIN_NAMES.items()}.get(
                cmd_name.lower()
            )
            if alias is not None:
                cmd = super().get_command(ctx, alias)
        return cmd

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = ", ".join(sorted(MQADMIN_NAMES, key=str.lower))
        formatter.write_paragraph()
        formatter.write_text(f"mqadmin's names work too: {names}.")


class _VerbCommand(click.Command):
    """Lists a verb's own options (declared above ``@admin_command``, so appended in reverse) first,
    in declaration order, then the shared ones."""

    shared_count = 5

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        n = self.shared_count
        extra = [p for p in params if p not in self.params]  # --help
        return self.params[n:][::-1] + self.params[:n] + extra


@click.group(name="admin", cls=_AliasedGroup)
def admin_group() -> None:
    """Administer a tidemq (or RocketMQ) cluster: mqadmin's everyday verbs."""


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain aligned text table (numbers right-aligned)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(isinstance(row[i], int) for row in rows) and bool(rows) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = [
            c.rjust(w) if numeric[i] and n else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def fmt_ms(ts: int) -> str:
    """Epoch ms as local ``YYYY-MM-DD HH:MM:SS.mmm`` ("-" for 0 or less)."""
    if ts <= 0:
        return "-"
    return dt.datetime.fromtimestamp(ts / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def parse_time_ms(text: str) -> int:
    """``now``, epoch ms, ``-1`` (the end), ISO ``2024-05-01T12:00:00`` or mqadmin's
    ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time) as epoch ms.

    Raises:
        click.BadParameter: none of those forms.
    """
    text = text.strip()
    if text.lower() == "now":
        return time_ms()
    if text.lstrip("-").isdigit():
        return int(text)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%d#%H:%M:%S"):
        try:
            return int(dt.datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            pass
    try:
        return int(dt.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a time: use epoch ms, 'now', 2024-05-01T12:00:00 or 2024-05-01#12:00:00:000"
        ) from None


def time_ms() -> int:
    """Now, epoch ms."""
    return time.time_ns() // 1_000_000


class Out:
    """Output of one command: JSON (``--json``) or rich tables and key/value lists."""

    def __init__(self, as_json: bool) -> None:
        from rich.console import Console

        self.as_json = as_json
        self.console = Console(width=None if sys.stdout.isatty() else 200, highlight=False, soft_wrap=False)

    def json(self, obj: Any) -> None:
        """Print ``obj`` as one JSON document."""
        click.echo(
            orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str).decode()
        )

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None
    ) -> None:
        """A rich table; numbers right-aligned."""
        from rich.table import Table

        table = Table(title=title, title_justify="left", header_style="bold")
        for i, h in enumerate(headers):
            numeric = bool(rows) and all(isinstance(r[i], int | float) for r in rows)
            table.add_column(h, justify="right" if numeric else "left", overflow="fold")
        for row in rows:
            table.add_row(
                *("-" if c is None else f"{c:.2f}" if isinstance(c, float) else str(c) for c in row)
            )
        self.console.print(table)

    def kv(self, pairs: Sequence[tuple[str, object]], title: str | None = None) -> None:
        """Aligned ``key: value`` lines."""
        if title:
            self.console.print(f"[bold]{title}[/bold]")
        width = max((len(k) for k, _ in pairs), default=0)
        for k, v in pairs:
            self.console.print(f"{k.ljust(width)} : {v}", markup=False)

    def line(self, text: str) -> None:
        """One plain line."""
        self.console.print(text, markup=False)


def message_json(m: MessageExt) -> dict[str, Any]:
    """A message as JSON (body decoded as UTF-8, bad bytes replaced)."""
    return {
        "topic": m.topic,
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "brokerName": m.broker_name,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "tags": m.tags,
        "keys": m.keys,
        "bornHost": m.born_host,
        "storeHost": m.store_host,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
        "reconsumeTimes": m.reconsume_times,
        "properties": dict(m.properties),
        "body": m.body.decode("utf-8", "replace"),
    }


def show_messages(out: Out, msgs: Sequence[MessageExt], detail: bool = False) -> None:
    """Messages as JSON, a table, or (``detail``) mqadmin's key/value block per message."""
    if out.as_json:
        out.json([message_json(m) for m in msgs])
        return
    if detail:
        for m in msgs:
            out.kv(
                [
                    ("Topic", m.topic),
                    ("Tags", m.tags or ""),
                    ("Keys", m.keys or ""),
                    ("Queue ID", m.queue_id),
                    ("Queue Offset", m.queue_offset),
                    ("Msg ID", m.msg_id),
                    ("Offset Msg ID", m.offset_msg_id),
                    ("Born Host", m.born_host),
                    ("Store Host", m.store_host),
                    ("Born Timestamp", fmt_ms(m.born_timestamp)),
                    ("Store Timestamp", fmt_ms(m.store_timestamp)),
                    ("Reconsume Times", m.reconsume_times),
                    ("Properties", dict(m.properties)),
                    ("Message Body", m.body.decode("utf-8", "replace")),
                ]
            )
        return
    rows = [
        (
            m.queue_id,
            m.queue_offset,
            m.msg_id,
            m.tags or "",
            m.keys or "",
            fmt_ms(m.store_timestamp),
            m.body.decode("utf-8", "replace")[:80],
        )
        for m in msgs
    ]
    out.table(["queue", "offset", "msgId", "tags", "keys", "storeTime", "body"], rows)
    out.line(f"{len(msgs)} message(s)")


def _hint(exc: BaseException, namesrv: str) -> str:
    """The error line for ``exc``, saying what to fix."""
    text = str(exc)
    if isinstance(exc, NoRouteError | TopicNotExistError):
        return f"{text}\n  hint: the topic does not exist; list topics with `tidemq admin topicList -n {namesrv}`"
    if isinstance(exc, SubscriptionGroupNotExistError):
        return f"{text}\n  hint: check the group name (groups with offsets show in `tidemq admin statsAll -n {namesrv}`)"
    if isinstance(exc, ConsumerNotOnlineError):
        return f"{text}\n  hint: the group has no running consumer (start one, or check the group name)"
    if "accesskey" in text.lower() or "acl" in text.lower().split():
        return f"{text}\n  hint: the broker checks ACL: pass --access-key/--secret-key (or TIDEMQ_ACCESS_KEY/TIDEMQ_SECRET_KEY) of an admin account"
    if isinstance(exc, NoPermissionError) and "cannot change" in text:
        return f"{text}\n  hint: that option is read-only on a running broker: set it in its broker.conf and restart it"
    if isinstance(exc, NoPermissionError):
        return f"{text}\n  hint: refused by a permission (the topic's or group's perm, or the ACL account's rights)"
    if isinstance(exc, RemotingConnectError):
        found = re.search(r"(\S+:\d+)", text)
        addr = found.group(1) if found else ""
        if addr and addr not in namesrv.split(";"):
            return (
                f"{text}\n  hint: nothing answers at {addr}: is that broker running, and is -b right? "
                f"(`tidemq admin clusterList -n {namesrv}` lists the brokers)"
            )
        return f"{text}\n  hint: is the name server running? set -n/--namesrv HOST:PORT or NAMESRV_ADDR (now {namesrv})"
    if isinstance(exc, RemotingTimeoutError | TimeoutError):
        return f"timed out: {text or type(exc).__name__}\n  hint: check that {namesrv} and the brokers are reachable"
    if isinstance(exc, BrokerError):
        return f"{text}"
    return text


def _shared_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Every verb's options: ``-n/--namesrv``, ``--access-key``, ``--secret-key``, ``--json``, ``--timeout``."""
    for option in reversed(
        [
            click.option(
                "-n",
                "--namesrv",
                envvar="NAMESRV_ADDR",
                default="127.0.0.1:9876",
                show_default="$NAMESRV_ADDR or 127.0.0.1:9876",
                help="Name server address(es), host:port[;host:port].",
            ),
            click.option("--access-key", envvar="TIDEMQ_ACCESS_KEY", default=None, help="ACL access key."),
            click.option("--secret-key", envvar="TIDEMQ_SECRET_KEY", default=None, help="ACL secret key."),
            click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables."),
            click.option(
                "--timeout",
                type=click.FloatRange(min=0.1),
                default=5.0,
                show_default=True,
                help="Seconds per request.",
            ),
        ]
    ):
        f = option(f)
    return f


async def _run_verb(
    func: Callable[..., Awaitable[None]],
    out: Out,
    namesrv: str,
    timeout: float,
    access_key: str | None,
    secret_key: str | None,
    kwargs: dict[str, Any],
) -> None:
    """``func(admin, out, **kwargs)`` with a client of ``namesrv`` (``timeout`` s a request), closed after."""
    admin = AsyncAdminClient(namesrv, timeout=timeout, access_key=access_key, secret_key=secret_key)
    try:
        await func(admin, out, **kwargs)
    finally:
        await admin.close()


def admin_command(name: str, mqadmin: str | None) -> Callable[[F], click.Command]:
    """Register an async verb ``func(admin, out, **options)`` as ``name`` (and ``mqadmin``'s name;
    None for a verb mqadmin does not have).

    Adds the shared options and turns TideMQ errors into one ``error:`` line and exit status 1.
    """

    def decorate(func: F) -> click.Command:
        @_shared_options
        @functools.wraps(func)
        def wrapper(
            namesrv: str,
            access_key: str | None,
            secret_key: str | None,
            as_json: bool,
            timeout: float,
            **kwargs: Any,
        ) -> None:
            if (access_key is None) != (secret_key is None):
                raise click.UsageError("give both --access-key and --secret-key, or neither")
            run = _run_verb(func, Out(as_json), namesrv, timeout, access_key, secret_key, kwargs)
            try:
                asyncio.run(run)
            except (TideMQError, TimeoutError) as exc:
                click.echo(f"error: {_hint(exc, namesrv)}", err=True)
                sys.exit(1)

        cmd = click.command(name, cls=_VerbCommand, help=(func.__doc__ or "") + f"\n\n(mqadmin: {mqadmin})")(
            wrapper
        )
        admin_group.add_command(cmd)
        if mqadmin:
            MQADMIN_NAMES[mqadmin] = name
        return cmd

    return decorate


async def resolve_broker_addrs(admin: AsyncAdminClient, broker: str | None, cluster: str | None) -> list[str]:
    """``-b`` (an address, or a broker name) or ``-c`` (every master of a cluster); default: all masters."""
    if broker:
        if ":" in broker:
            return [broker]
        return [await admin.broker_addr(broker)]
    addrs = list((await admin.all_broker_addrs(cluster)).values())
    if not addrs:
        raise ClientError("no broker is registered with the name server")
    return addrs


Verb = Callable[..., Awaitable[None]]
