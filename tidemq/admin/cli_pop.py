"""``tidemq admin pop-status``: POP consumer groups per topic and broker, with their in-flight
messages, pops, acks, redeliveries and dead letters (docs/rocketmq5.md; :mod:`tidemq.admin.pop_status`)."""

from __future__ import annotations

import click

from tidemq.admin.cli_base import Out, admin_command, resolve_broker_addrs
from tidemq.admin.client import AsyncAdminClient


@click.option("-g", "--group", "group", default=None, help="Only this consumer group.")
@click.option("-t", "--topic", default=None, help="Only this topic.")
@click.option("-b", "--broker-addr", default=None, help="Broker host:port or name (default: every master).")
@click.option("-c", "--cluster", default=None, help="Every master of this cluster.")
@admin_command("pop-status", None)  # tidemq's own (mqadmin has none), as transaction-pending
async def pop_status(
    admin: AsyncAdminClient,
    out: Out,
    group: str | None,
    topic: str | None,
    broker_addr: str | None,
    cluster: str | None,
) -> None:
    """POP groups: in-flight (popped, not acked), popped, acked, redelivered, dead-lettered."""
    addrs = await resolve_broker_addrs(admin, broker_addr, cluster)
    rows = await admin.pop_status(group, topic, addrs)
    if out.as_json:
        out.json([r.to_json() for r in rows])
        return
    table = [
        [r.group, r.topic, r.broker, r.in_flight, r.popped, r.acked, r.redelivered, r.dead_lettered]
        for r in rows
    ]
    headers = ["group", "topic", "broker", "inFlight", "popped", "acked", "redelivered", "deadLettered"]
    out.table(headers, table, title="POP groups")
