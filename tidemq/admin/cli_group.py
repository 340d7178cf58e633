"""``tidemq admin`` consumer/producer group verbs: consumerProgress, consumerConnection, consumerStatus,
producerConnection, updateSubGroup, deleteSubGroup, resetOffsetByTime, cloneGroupOffset."""

from __future__ import annotations

from typing import Any

import click

from tidemq.admin.cli_base import Out, admin_command, fmt_ms, parse_time_ms
from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.core import QueueProgress
from tidemq.errors import BrokerError, ClientError, ConsumerNotOnlineError, TideMQError
from tidemq.protocol.body import SubscriptionGroupConfig
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.message import MessageQueue
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
    rows, unreachable = await _group_progress(admin, group, topic, cluster)
    clients = await _queue_clients(admin, group) if show_client_ip else None
    if out.as_json:
        out.json(_progress_json(group, rows, unreachable, clients))
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
            *((clients.get(_mq_key(r.mq), "-"),) if clients is not None else ()),
        )
        for r in rows
    ]
    out.table([*headers, *(["clientIP"] if show_client_ip else [])], table, title=f"progress of {group}")
    out.line(
        f"total lag: {sum(r.lag for r in rows)}" + (" (without the brokers below)" if unreachable else "")
    )
    for name, why in sorted(unreachable.items()):
        out.line(f"could not ask broker {name}: {why}")


async def _group_progress(
    admin: AsyncAdminClient, group: str, topic: str | None, cluster: str | None
) -> tuple[list[QueueProgress], dict[str, str]]:
    """``group``'s queue rows and unreachable brokers, of ``cluster``'s brokers only when given.

    Raises:
        BrokerError: SUBSCRIPTION_GROUP_NOT_EXIST when no broker has an offset of it (nor is
        unreachable).
    """
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
    return rows, unreachable


def _progress_json(
    group: str, rows: list[QueueProgress], unreachable: dict[str, str], clients: dict[str, str] | None
) -> dict[str, Any]:
    """``consumerProgress -g G --json``'s object (``clientIP`` per queue when ``clients`` is given)."""
    return {
        "group": group,
        "totalLag": sum(r.lag for r in rows),
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
                **({"clientIP": clients.get(_mq_key(r.mq), "")} if clients is not None else {}),
            }
            for r in rows
        ],
    }


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
@click.option("-b", "--broker-addr", default=None, help="Ask only this broker (host:port).")
@admin_command("consumer-connection", "consumerConnection")
async def consumer_connection(admin: AsyncAdminClient, out: Out, group: str, broker_addr: str | None) -> None:
    """The group's live clients and subscriptions (GET_CONSUMER_CONNECTION_LIST)."""
    cc = await admin.examine_consumer_connection_info(group, broker_addr=broker_addr)
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
@click.option("-i", "--client-id", default=None, help="Only this member (its client id).")
@click.option("-b", "--broker-addr", default=None, help="Find the members through this broker (host:port).")
@click.option("-s", "--jstack", is_flag=True, help="Not supported: tidemq clients have no JVM thread dump.")
@admin_command("consumer-status", "consumerStatus")
async def consumer_status(
    admin: AsyncAdminClient,
    out: Out,
    group: str,
    client_id: str | None,
    broker_addr: str | None,
    jstack: bool,
) -> None:
    """Each live member's running info: settings, subscriptions, per-queue cache (GET_CONSUMER_RUNNING_INFO)."""
    if jstack:
        raise ClientError("-s (jstack) is not supported: a tidemq or C++ client has no JVM thread dump")
    infos = await admin.consumer_status(group, client_id=client_id, broker_addr=broker_addr)
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
@click.option("-s", "--consume-enable", type=click.BOOL, default=True, show_default=True)
@click.option("-d", "--consume-broadcast-enable", type=click.BOOL, default=True, show_default=True)
@click.option("-m", "--consume-from-min-enable", type=click.BOOL, default=True, show_default=True)
@click.option(
    "-o",
    "--consume-message-orderly",
    type=click.BOOL,
    default=False,
    show_default=True,
    help="RocketMQ 5: the group's v5 (gRPC) consumers receive in order (FIFO pops).",
)
@click.option("-q", "--retry-queue-nums", type=click.IntRange(0, 64), default=1, show_default=True)
@click.option("-r", "--retry-max-times", type=click.IntRange(-1, 64), default=16, show_default=True)
@click.option("-i", "--broker-id", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "-w", "--which-broker-when-consume-slowly", type=click.IntRange(min=0), default=1, show_default=True
)
@click.option("-a", "--notify-consumer-ids-changed", type=click.BOOL, default=True, show_default=True)
@admin_command("update-sub-group", "updateSubGroup")
async def update_sub_group(
    admin: AsyncAdminClient,
    out: Out,
    group: str,
    cluster: str | None,
    broker_addr: str | None,
    consume_enable: bool,
    consume_broadcast_enable: bool,
    consume_from_min_enable: bool,
    consume_message_orderly: bool,
    retry_queue_nums: int,
    retry_max_times: int,
    broker_id: int,
    which_broker_when_consume_slowly: int,
    notify_consumer_ids_changed: bool,
) -> None:
    """Create or update a consumer group's broker-side settings (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP);
    mqadmin's letters and true|false values."""
    cfg = SubscriptionGroupConfig(
        group_name=group,
        consume_enable=consume_enable,
        consume_broadcast_enable=consume_broadcast_enable,
        consume_from_min_enable=consume_from_min_enable,
        retry_queue_nums=retry_queue_nums,
        retry_max_times=retry_max_times,
        broker_id=broker_id,
        which_broker_when_consume_slowly=which_broker_when_consume_slowly,
        notify_consumer_ids_changed_enable=notify_consumer_ids_changed,
        consume_message_orderly=consume_message_orderly,  # RocketMQ 5: FIFO for v5 (gRPC) consumers
    )
    addrs = await admin.create_and_update_subscription_group_config(cfg, cluster, broker_addr)
    if out.as_json:
        out.json({"group": cfg.to_json(), "brokers": addrs})
    else:
        out.line(f"subscription group {group} updated on {', '.join(addrs)}")


@click.option("-g", "--group", required=True, help="Group to delete.")
@click.option("-c", "--cluster", default=None, help="Only from this cluster's brokers.")
@click.option("-b", "--broker-addr", default=None, help="Only from this broker (host:port).")
@click.option("-r", "--remove-offset", type=click.BOOL, default=False, help="true: delete its offsets too.")
@admin_command("delete-sub-group", "deleteSubGroup")
async def delete_sub_group(
    admin: AsyncAdminClient,
    out: Out,
    group: str,
    cluster: str | None,
    broker_addr: str | None,
    remove_offset: bool,
) -> None:
    """Delete a consumer group's settings from the brokers (DELETE_SUBSCRIPTIONGROUP)."""
    addrs = await admin.delete_subscription_group(
        group, cluster, broker_addr=broker_addr, remove_offset=remove_offset
    )
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
    default=None,
    help="Epoch ms, 'now', -1 (the end), 2024-05-01T12:00:00 or 2024-05-01#12:00:00:000.",
)
@click.option(
    "-f", "--force", type=click.BOOL, default=True, show_default=True, help="false: only move offsets back."
)
@click.option(
    "-b", "--broker-addr", default=None, help="With -q and -o: the queue's broker (host:port or name)."
)
@click.option("-q", "--queue-id", type=click.IntRange(min=0), default=None, help="With -b and -o: the queue.")
@click.option(
    "-o", "--offset", type=click.IntRange(min=0), default=None, help="With -b and -q: the new offset."
)
@admin_command("reset-offset-by-time", "resetOffsetByTime")
async def reset_offset_by_time(
    admin: AsyncAdminClient,
    out: Out,
    group: str,
    topic: str,
    when: str | None,
    force: bool,
    broker_addr: str | None,
    queue_id: int | None,
    offset: int | None,
) -> None:
    """Move a group's offsets to a time (running consumers are told at once: INVOKE_BROKER_TO_RESET_OFFSET),
    or one queue to an offset (-b -q -o)."""
    if broker_addr is not None or queue_id is not None or offset is not None:
        await _reset_one_queue(admin, out, group, topic, broker_addr, queue_id, offset)
        return
    if when is None:
        raise click.UsageError("give -s TIMESTAMP, or -b BROKER -q QUEUE -o OFFSET")
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


async def _reset_one_queue(
    admin: AsyncAdminClient,
    out: Out,
    group: str,
    topic: str,
    broker: str | None,
    queue_id: int | None,
    offset: int | None,
) -> None:
    """mqadmin's ``resetOffsetByTime -b -q -o``: one queue to an offset, written with UPDATE_CONSUMER_OFFSET."""
    if broker is None or queue_id is None or offset is None:
        raise click.UsageError("-b, -q and -o go together (one queue to one offset)")
    route = await admin.examine_topic_route_info(topic)
    names = [
        bd.broker_name for bd in route.broker_datas if broker in (bd.broker_name, *bd.broker_addrs.values())
    ]
    if not names:
        raise ClientError(f"broker {broker} holds no queue of topic {topic}")
    try:
        await admin.examine_consumer_connection_info(group)
    except ConsumerNotOnlineError:
        pass
    else:
        raise ClientError(
            f"{group} has running consumers: stop them first (they would overwrite a one-queue reset)"
        )
    mq = MessageQueue(topic, names[0], queue_id)
    await admin.update_consumer_offset(group, mq, offset)
    if out.as_json:
        out.json(
            {
                "group": group,
                "topic": topic,
                "brokerName": mq.broker_name,
                "queueId": queue_id,
                "offset": offset,
            }
        )
    else:
        out.line(f"{group}: {topic} {mq.broker_name} queue {queue_id} reset to offset {offset}")


@click.option("-s", "--src-group", required=True, help="Group to copy from.")
@click.option("-d", "--dest-group", required=True, help="Group to copy to.")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option(
    "-o",
    "--offline",
    type=click.BOOL,
    default=False,
    help="Sent as mqadmin's -o (the broker clones either way).",
)
@admin_command("clone-group-offset", "cloneGroupOffset")
async def clone_group_offset(
    admin: AsyncAdminClient, out: Out, src_group: str, dest_group: str, topic: str, offline: bool
) -> None:
    """Copy one group's committed offsets of a topic to another group (CLONE_GROUP_OFFSET)."""
    if src_group == dest_group:
        raise ClientError("source and destination groups are the same")
    addrs = await admin.clone_group_offset(src_group, dest_group, topic, offline)
    if out.as_json:
        out.json({"srcGroup": src_group, "destGroup": dest_group, "topic": topic, "brokers": addrs})
    else:
        out.line(f"offsets of {src_group} on {topic} cloned to {dest_group} ({', '.join(addrs)})")
