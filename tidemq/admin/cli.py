"""``tidemq admin ...``: mqadmin-like commands over :class:`~tidemq.admin.AdminClient`.

``admin_group`` (name ``admin``) is added to the ``tidemq`` command by ``tidemq.cli``. Commands:
``consumer-progress``, ``topic-route``, ``topic-status``, ``update-topic``, ``consumer-connection``.
Each takes ``--namesrv`` (default ``$NAMESRV_ADDR`` or ``127.0.0.1:9876``) and ``--json`` for machine
output. Errors print one line on stderr and exit with status 1.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
import orjson

from tidemq.admin.client import AdminClient
from tidemq.errors import TideMQError

F = TypeVar("F", bound=Callable[..., Any])


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


def _ms(ts: int) -> str:
    if ts <= 0:
        return "-"
    return dt.datetime.fromtimestamp(ts / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _admin_command(func: F) -> F:
    """Shared options (--namesrv, --json) and error handling."""

    @click.option(
        "--namesrv",
        default=lambda: os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        show_default="$NAMESRV_ADDR or 127.0.0.1:9876",
        help="Name server address(es), host:port[;host:port].",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
    @functools.wraps(func)
    def wrapper(namesrv: str, as_json: bool, **kwargs: Any) -> None:
        try:
            with AdminClient(namesrv) as admin:
                func(admin, as_json, **kwargs)
        except (TideMQError, TimeoutError) as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def _echo_json(obj: Any) -> None:
    click.echo(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode())


@click.group(name="admin")
def admin_group() -> None:
    """Administer a tidemq (or RocketMQ) cluster: topics, routes, consumer progress."""


@admin_group.command("consumer-progress")
@click.option("--group", "-g", required=True, help="Consumer group.")
@click.option(
    "--topic", "-t", default=None, help="Only this topic (default: every topic the group has offsets for)."
)
@_admin_command
def consumer_progress(admin: AdminClient, as_json: bool, group: str, topic: str | None) -> None:
    """Per queue: broker offset, the group's offset and the lag (GET_CONSUME_STATS)."""
    rows = admin.consumer_progress(group, topic)
    total = sum(r.lag for r in rows)
    if as_json:
        _echo_json(
            {
                "group": group,
                "totalLag": total,
                "queues": [
                    {
                        "topic": r.mq.topic,
                        "brokerName": r.mq.broker_name,
                        "queueId": r.mq.queue_id,
                        "brokerOffset": r.broker_offset,
                        "consumerOffset": r.consumer_offset,
                        "lag": r.lag,
                        "lastTimestamp": r.last_timestamp,
                    }
                    for r in rows
                ],
            }
        )
        return
    table = [
        (
            r.mq.topic,
            r.mq.broker_name,
            r.mq.queue_id,
            r.broker_offset,
            r.consumer_offset,
            r.lag,
            _ms(r.last_timestamp),
        )
        for r in rows
    ]
    click.echo(
        format_table(["topic", "broker", "queue", "brokerOffset", "consumerOffset", "lag", "lastTime"], table)
    )
    click.echo(f"\ntotal lag: {total}")


@admin_group.command("topic-route")
@click.option("--topic", "-t", required=True, help="Topic.")
@_admin_command
def topic_route(admin: AdminClient, as_json: bool, topic: str) -> None:
    """The topic's route from the name server (GET_ROUTEINFO_BY_TOPIC)."""
    route = admin.examine_topic_route_info(topic)
    if as_json:
        _echo_json(route.to_json())
        return
    addrs = {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}
    rows = [
        (
            qd.broker_name,
            qd.read_queue_nums,
            qd.write_queue_nums,
            qd.perm,
            ", ".join(f"{k}={v}" for k, v in sorted(addrs.get(qd.broker_name, {}).items())),
        )
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
    ]
    click.echo(format_table(["broker", "readQueues", "writeQueues", "perm", "addresses (id=addr)"], rows))


@admin_group.command("topic-status")
@click.option("--topic", "-t", required=True, help="Topic.")
@_admin_command
def topic_status(admin: AdminClient, as_json: bool, topic: str) -> None:
    """Min/max offset and last update time per queue (GET_TOPIC_STATS_INFO)."""
    table = admin.examine_topic_stats(topic)
    items = sorted(table.offset_table.items())
    if as_json:
        _echo_json(table.to_json())
        return
    rows = [
        (mq.broker_name, mq.queue_id, t.min_offset, t.max_offset, _ms(t.last_update_timestamp))
        for mq, t in items
    ]
    click.echo(format_table(["broker", "queue", "minOffset", "maxOffset", "lastUpdated"], rows))


@admin_group.command("update-topic")
@click.option("--topic", "-t", required=True, help="Topic to create or update.")
@click.option(
    "--queues", "-q", type=int, default=8, show_default=True, help="Read and write queue count per broker."
)
@click.option("--cluster", "-c", default=None, help="Only the brokers of this cluster (default: all).")
@click.option("--perm", type=int, default=6, show_default=True, help="Permission bits: 6 = read + write.")
@click.option("--order", is_flag=True, help="Mark the topic as ordered.")
@_admin_command
def update_topic(
    admin: AdminClient, as_json: bool, topic: str, queues: int, cluster: str | None, perm: int, order: bool
) -> None:
    """Create or update a topic on every broker (UPDATE_AND_CREATE_TOPIC)."""
    addrs = admin.create_topic(topic, queues, cluster=cluster, perm=perm, order=order)
    if as_json:
        _echo_json({"topic": topic, "queues": queues, "brokers": addrs})
    else:
        click.echo(f"topic {topic}: {queues} queues on {', '.join(addrs)}")


@admin_group.command("consumer-connection")
@click.option("--group", "-g", required=True, help="Consumer group.")
@_admin_command
def consumer_connection(admin: AdminClient, as_json: bool, group: str) -> None:
    """The group's live clients and subscriptions (GET_CONSUMER_CONNECTION_LIST)."""
    cc = admin.examine_consumer_connection_info(group)
    if as_json:
        _echo_json(cc.to_json())
        return
    rows = [(c.client_id, c.client_addr, c.language, c.version) for c in cc.connection_set]
    click.echo(format_table(["clientId", "address", "language", "version"], rows))
    subs = [(t, s.sub_string) for t, s in sorted(cc.subscription_table.items())]
    if subs:
        click.echo("")
        click.echo(format_table(["topic", "expression"], subs))
    model = cc.message_model.value if cc.message_model else "-"
    where = cc.consume_from_where.value if cc.consume_from_where else "-"
    click.echo(f"\nmessage model: {model}; consume from: {where}")
