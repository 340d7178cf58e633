"""``tidemq admin transaction-pending``: half messages with no decision yet, per producer group and
topic, with the age of the oldest (docs/transactions.md; :mod:`tidemq.admin.transactions`)."""

from __future__ import annotations

import click

from tidemq.admin.cli_base import Out, admin_command, resolve_broker_addrs
from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.transactions import pending_half_messages


@click.option("-b", "--broker-addr", default=None, help="Broker host:port or name (default: every master).")
@click.option("-c", "--cluster", default=None, help="Every master of this cluster.")
@admin_command("transaction-pending", None)  # tidemq's own (mqadmin has none)
async def transaction_pending(
    admin: AsyncAdminClient, out: Out, broker_addr: str | None, cluster: str | None
) -> None:
    """Pending half messages per producer group and topic, and the oldest one's age (s)."""
    rows = await pending_half_messages(admin, await resolve_broker_addrs(admin, broker_addr, cluster))
    if out.as_json:
        out.json(rows)
        return
    table = [
        [
            r["broker"],
            r.get("producerGroup", ""),
            r.get("topic", ""),
            r.get("count", 0),
            r.get("oldestAgeMs", 0) / 1000,
        ]
        for r in rows
    ]
    out.table(
        ["broker", "producerGroup", "topic", "pending", "oldest(s)"], table, title="pending half messages"
    )
