"""``tidemq admin queryMsgTraceById``: a message's trace (mqadmin's verb and options)."""

from __future__ import annotations

import click

from tidemq.admin.cli_base import Out, admin_command, fmt_ms
from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.ops_trace import query_msg_trace_by_id
from tidemq.errors import ClientError
from tidemq.protocol.topic import TRACE_TOPIC


@click.option("-i", "--msg-id", required=True, help="Message id (the msg id a producer's send returns).")
@click.option(
    "-t", "--trace-topic", default=TRACE_TOPIC, show_default=True, help="The topic the traces are written to."
)
@admin_command("query-msg-trace-by-id", "queryMsgTraceById")
async def query_msg_trace(admin: AsyncAdminClient, out: Out, msg_id: str, trace_topic: str) -> None:
    """A message's trace: who sent it, when it was stored, which groups consumed it, each step's
    cost and result (message trace records written with enable_msg_trace)."""
    trace = await query_msg_trace_by_id(admin, msg_id.strip(), trace_topic.strip())
    if not trace.found:
        raise ClientError(
            f"no trace of message {msg_id} in {trace_topic} (was it sent or consumed with enable_msg_trace?)"
        )
    if out.as_json:
        out.json(trace.to_json())
        return
    if trace.pubs:
        rows = [
            ("Pub", p.group_name, p.client_host, fmt_ms(p.time_stamp), f"{p.cost_time}ms", p.status,
             p.store_host, fmt_ms(trace.store_time), p.topic)
            for p in trace.pubs
        ]  # fmt: skip
        heads = ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
        out.table([*heads, "#StoreHost", "#StoreTime", "#Topic"], rows)
    for group, steps in trace.consumes.items():
        sub_rows: list[tuple[object, ...]] = [
            ("Sub", group, s.client_host, fmt_ms(s.begin), "-" if s.cost_time is None else f"{s.cost_time}ms",
             s.status, s.retry_times, s.return_type or "-")
            for s in steps
        ]  # fmt: skip
        heads = ["#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"]
        out.table([*heads, "#RetryTimes", "#ReturnType"], sub_rows)
    if trace.transactions:
        tx_rows = [
            ("EndTransaction", t.group_name, t.client_host, fmt_ms(t.time_stamp), t.transaction_state,
             "yes" if t.from_transaction_check else "no")
            for t in trace.transactions
        ]  # fmt: skip
        out.table(["#Type", "#ProducerGroup", "#ClientHost", "#Time", "#State", "#FromCheck"], tx_rows)
    if trace.recalls:
        recall_rows = [
            ("Recall", r.group_name, r.client_host, fmt_ms(r.time_stamp), r.status) for r in trace.recalls
        ]
        out.table(["#Type", "#ProducerGroup", "#ClientHost", "#Time", "#Status"], recall_rows)
