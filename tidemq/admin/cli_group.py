"""``tidemq admin`` consumer/producer group verbs: consumerProgress, consumerConnection, consumerStatus,
producerConnection, updateSubGroup, deleteSubGroup, resetOffsetByTime, cloneGroupOffset."""

from __future__ import annotations

from typing import Any

import click

from tidemq.admin.cli import Out, admin_command, fmt_ms, parse_time_ms
from tidemq.admin.client import AsyncAdminClient
from tidemq.errors import BrokerError, ClientError, TideMQError
from tidemq.protocol.body import SubscriptionGroupConfig
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.topic import group_of_retry_topic, is_sys_consumer_group


@click.option("-g", "--group", default=None, help="Consumer group (default: every group, one line each).")
@click.option(
    "-t", "--topic", default=None, help="Only this topic (default: every topic the group has offsets for)."
)
@click.option(
    "-s", "--show-client-ip", type=click.BOOL, default=False, help="true: the client of each queue."
)
@click.option("-c", "--cluster", default=None, help="Only the brokers of this cluster.")
@admin_command("consumer-progress", "consumerProgress")
async def consumer_progress(
    admin: AsyncAdminClient,
    out: Out,
    group: str | None,
    topic: str | None,
    show_client_ip: bool,
    cluster: str | None,
) -> None:
    """Per queue: broker offset, the group's offset and the lag (GET_CONSUME_STATS); a broker group
    whose master is down is read on its slave, and brokers that could not be asked are named.
    Without -g: one line per consumer group (mqadmin's overview)."""
    if group is None:
        await _all_groups_progress(admin, out, cluster)
        return
    rows, unreachable = await admin.consumer_progress_report(group, topic)
    if cluster:
        names = set((await admin.examine_broker_cluster_info()).cluster_addr_table.get(cluster, set()))
        rows = [r for r in rows if r.mq.broker_name in names]
        unreachable = {n: why for n, why in unreachable.items() if n in names}
    if not rows and not unreachable:
        raise BrokerError.for_code(
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            f"consumer group {group} has no offsets"
            + (f" for topic {topic}" if topic else "")
            + " on any broker",
        )
    clients = await _queue_clients(admin, group) if show_client_ip else {}
    total = sum(r.lag for r in rows)
    if out.as_json:
        out.json(
            {
                "group": group,
                "totalLag": total,
                "unreachableBrokers": unreachable,
                "queues": [
                    {
                        "topic": r.mq.topic,
                        "brokerName": r.mq.broker_name,
                        "queueId": r.mq.queue_id,
                        "brokerOffset": r.broker_offset,
                        "consumerOffset": r.consumer_offset,
                        "lag": r.lag,
                        "lastTimestamp": r.last_timestamp,
                        **({"clientIP": clients.get(_mq_key(r.mq), "")} if show_client_ip else {}),
                    }
                    for r in rows
                ],
            }
        )
        return
    headers = ["topic", "broker", "queue", "brokerOffset", "consumerOffset", "lag", "lastTime"]
    table = [
        (
            r.mq.topic,
            r.mq.broker_name,
            r.mq.queue_id,
            r.broker_offset,
            r.consumer_offset,
            r.lag,
            fmt_ms(r.last_timestamp),
            *((clients.get(_mq_key(r.mq), "-"),) if show_client_ip else ()),
        )
        for r in rows
    ]
    out.table([*headers, *(["clientIP"] if show_client_ip else [])], table, title=f"progress of {group}")
    out.line(f"total lag: {total}" + (" (without the brokers below)" if unreachable else ""))
    for name, why in sorted(unreachable.items()):
        out.line(f"could not ask broker {name}: {why}")


def _mq_key(mq: Any) -> str:
    return f"{mq.topic}/{mq.broker_name}/{mq.queue_id}"


async def _queue_clients(admin: AsyncAdminClient, group: str) -> dict[str, str]:
    """``{"topic/broker/queueId": client address}`` from each live member's running info."""
    try:
        conns = (await admin.examine_consumer_connection_info(group)).connection_set
        infos = await admin.consumer_status(group)
    except TideMQError:
        return {}
    addr_of = {c.client_id: c.client_addr for c in conns}
    return {mq: addr_of.get(cid, cid) for cid, info in infos.items() for mq in (info.get("mqTable") or {})}


async def _all_groups_progress(admin: AsyncAdminClient, out: Out, cluster: str | None) -> None:
    """mqadmin's ``consumerProgress`` without ``-g``: every group (from its ``%RETRY%`` topic)."""
    groups = sorted(
        g
        for t in await admin.fetch_all_topic_list()
        if (g := group_of_retry_topic(t)) is not None and not is_sys_consumer_group(g)
    )
    rows: list[tuple[Any, ...]] = []
    unreachable: dict[str, str] = {}
    for g in groups:
        stats, missing = await admin.consume_stats_report(g)
        unreachable.update(missing)
        try:
            cc = await admin.examine_consumer_connection_info(g)
            count, ctype = len(cc.connection_set), cc.consume_type.value if cc.consume_type else "-"
            model = cc.message_model.value if cc.message_model else "-"
        except TideMQError:
            count, ctype, model = 0, "-", "-"
        rows.append((g, count, ctype, model, round(stats.consume_tps, 2), stats.compute_total_diff()))
    if out.as_json:
        keys = ("group", "count", "consumeType", "messageModel", "consumeTps", "diffTotal")
        out.json(
            {"groups": [dict(zip(keys, r, strict=True)) for r in rows], "unreachableBrokers": unreachable}
        )
        return
    out.table(["group", "count", "consumeType", "messageModel", "consumeTps", "diffTotal"], rows)
    for name, why in sorted(unreachable.items()):
        out.line(f"could not ask broker {name}: {why}")


@click.option("-g", "--group", required=True, help="Consumer group.")
@admin_command("consumer-connection", "consumerConnection")
async def consumer_connection(admin: AsyncAdminClient, out: Out, group: str) -> None:
    """The group's live clients and subscriptions (GET_CONSUMER_CONNECTION_LIST)."""
    cc = await admin.examine_consumer_connection_info(group)
    if out.as_json:
        out.json(cc.to_json())
        return
    rows = [(c.client_id, c.client_addr, c.language, c.version) for c in cc.connection_set]
    out.table(["clientId", "address", "language", "version"], rows, title=f"connections of {group}")
    subs = [(t, s.sub_string) for t, s in sorted(cc.subscription_table.items())]
    if subs:
        out.table(["topic", "expression"], subs, title="subscriptions")
    model = cc.message_model.value if cc.message_model else "-"
    where = cc.consume_from_where.value if cc.consume_from_where else "-"
    out.line(f"message model: {model}; consume from: {where}")


@click.option("-g", "--group", required=True, help="Consumer group.")
@admin_command("consumer-status", "consumerStatus")
async def consumer_status(admin: AsyncAdminClient, out: Out, group: str) -> None:
    """Each live member's running info: settings, subscriptions, per-queue cache (GET_CONSUMER_RUNNING_INFO)."""
    infos = await admin.consumer_status(group)
    if out.as_json:
        out.json(infos)
        return
    for cid, info in infos.items():
        props: dict[str, Any] = info.get("properties") or {}
        out.kv(
            [
                ("clientId", cid),
                ("consumeType", props.get("PROP_CONSUME_TYPE", "-")),
                ("orderly", props.get("PROP_CONSUME_ORDERLY", "-")),
                ("messageModel", props.get("messageModel", "-")),
                ("clientVersion", props.get("PROP_CLIENT_VERSION", "-")),
                ("startTime", fmt_ms(int(props.get("PROP_CONSUMER_START_TIMESTAMP", "0") or 0))),
            ],
            title=f"consumer {cid}",
        )
        rows = [
            (
                mq,
                int(pq.get("commitOffset", 0)),
                int(pq.get("cachedMsgCount", 0)),
                int(pq.get("cachedMsgSizeInMiB", 0)),
                str(pq.get("locked", False)).lower(),
            )
            for mq, pq in sorted((info.get("mqTable") or {}).items())
        ]
        out.table(["queue (topic/broker/id)", "commitOffset", "cachedMsgs", "cachedMiB", "locked"], rows)


@click.option("-g", "--group", required=True, help="Producer group.")
@click.option("-t", "--topic", required=True, help="A topic the group sends to (finds the brokers).")
@admin_command("producer-connection", "producerConnection")
async def producer_connection(admin: AsyncAdminClient, out: Out, group: str, topic: str) -> None:
    """The producer group's live clients (GET_PRODUCER_CONNECTION_LIST)."""
    conns = await admin.examine_producer_connection_info(group, topic)
    if out.as_json:
        out.json({"connectionSet": [c.to_json() for c in conns]})
        return
    out.table(
        ["clientId", "address", "language", "version"],
        [(c.client_id, c.client_addr, c.language, c.version) for c in conns],
        title=f"producers of {group}",
    )


@click.option("-g", "--group", required=True, help="Group name.")
@click.option("-c", "--cluster", default=None, help="Only the brokers of this cluster.")
@click.option("-b", "--broker-addr", default=None, help="Only this broker (host:port).")
@click.option("--consume-enable/--consume-disable", default=True, show_default=True)
@click.option("--broadcast-enable/--broadcast-disable", default=True, show_default=True)
@click.option("--from-min-enable/--from-min-disable", default=True, show_default=True)
@click.option("-q", "--retry-queue-nums", type=click.IntRange(0, 64), default=1, show_default=True)
@click.option("-r", "--retry-max-times", type=click.IntRange(-1, 64), default=16, show_default=True)
@admin_command("update-sub-group", "updateSubGroup")
async def update_sub_group(
    admin: AsyncAdminClient,
    out: Out,
    group: str,
    cluster: str | None,
    broker_addr: str | None,
    consume_enable: bool,
    broadcast_enable: bool,
    from_min_enable: bool,
    retry_queue_nums: int,
    retry_max_times: int,
) -> None:
    """Create or update a consumer group's broker-side settings (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)."""
    cfg = SubscriptionGroupConfig(
        group_name=group,
        consume_enable=consume_enable,
        consume_broadcast_enable=broadcast_enable,
        consume_from_min_enable=from_min_enable,
        retry_queue_nums=retry_queue_nums,
        retry_max_times=retry_max_times,
    )
    addrs = await admin.create_and_update_subscription_group_config(cfg, cluster, broker_addr)
    if out.as_json:
        out.json({"group": cfg.to_json(), "brokers": addrs})
    else:
        out.line(f"subscription group {group} updated on {', '.join(addrs)}")


@click.option("-g", "--group", required=True, help="Group to delete.")
@click.option("-c", "--cluster", default=None, help="Only from this cluster's brokers.")
@admin_command("delete-sub-group", "deleteSubGroup")
async def delete_sub_group(admin: AsyncAdminClient, out: Out, group: str, cluster: str | None) -> None:
    """Delete a consumer group's settings from the brokers (DELETE_SUBSCRIPTIONGROUP)."""
    addrs = await admin.delete_subscription_group(group, cluster)
    if out.as_json:
        out.json({"group": group, "deleted": True, "brokers": addrs})
    else:
        out.line(f"subscription group {group} deleted from {', '.join(addrs)}")


@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option(
    "-s",
    "--timestamp",
    "when",
    required=True,
    help="Epoch ms, 'now', -1 (the end), 2024-05-01T12:00:00 or 2024-05-01#12:00:00:000.",
)
@click.option(
    "-f",
    "--force/--no-force",
    default=True,
    help="Move offsets forward too (default); --no-force only moves them back.",
)
@admin_command("reset-offset-by-time", "resetOffsetByTime")
async def reset_offset_by_time(
    admin: AsyncAdminClient, out: Out, group: str, topic: str, when: str, force: bool
) -> None:
    """Move a group's offsets to a time; running consumers are told at once (INVOKE_BROKER_TO_RESET_OFFSET)."""
    ts = parse_time_ms(when)
    table = await admin.reset_offset_by_timestamp(topic, group, ts, force=force)
    if out.as_json:
        out.json(
            {
                "group": group,
                "topic": topic,
                "timestamp": ts,
                "offsets": [
                    {"brokerName": q.broker_name, "queueId": q.queue_id, "offset": o}
                    for q, o in table.items()
                ],
            }
        )
        return
    out.table(
        ["broker", "queue", "newOffset"],
        [(q.broker_name, q.queue_id, o) for q, o in table.items()],
        title=f"{group} on {topic} reset to {fmt_ms(ts) if ts > 0 else ts}",
    )


@click.option("-s", "--src-group", required=True, help="Group to copy from.")
@click.option("-d", "--dest-group", required=True, help="Group to copy to.")
@click.option("-t", "--topic", required=True, help="Topic.")
@admin_command("clone-group-offset", "cloneGroupOffset")
async def clone_group_offset(
    admin: AsyncAdminClient, out: Out, src_group: str, dest_group: str, topic: str
) -> None:
    """Copy one group's committed offsets of a topic to another group (CLONE_GROUP_OFFSET)."""
    if src_group == dest_group:
        raise ClientError("source and destination groups are the same")
    addrs = await admin.clone_group_offset(src_group, dest_group, topic)
    if out.as_json:
        out.json({"srcGroup": src_group, "destGroup": dest_group, "topic": topic, "brokers": addrs})
    else:
        out.line(f"offsets of {src_group} on {topic} cloned to {dest_group} ({', '.join(addrs)})")
