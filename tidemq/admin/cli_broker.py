"""``tidemq admin`` broker and name-server verbs: clusterList, brokerStatus, getBrokerConfig,
updateBrokerConfig, statsAll, cleanExpiredCQ, deleteExpiredCommitLog, getNamesrvConfig,
updateKvConfig, deleteKvConfig."""

from __future__ import annotations

import asyncio
from typing import Any

import click

from tidemq.admin.cli_base import Out, admin_command, resolve_broker_addrs
from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.ops_broker import BrokerRow
from tidemq.errors import ClientError
from tidemq.protocol.topic import is_internal_topic


@click.option("-c", "--cluster", default=None, help="Only this cluster.")
@click.option("-m", "--more-stats", is_flag=True, help="Yesterday's and today's totals (mqadmin -m).")
@click.option(
    "-i",
    "--interval",
    type=click.IntRange(min=1),
    default=None,
    help="Print again every N seconds until Ctrl-C.",
)
@admin_command("cluster-list", "clusterList")
async def cluster_list(
    admin: AsyncAdminClient, out: Out, cluster: str | None, more_stats: bool, interval: int | None
) -> None:
    """Every cluster's brokers with version, TPS (last minute, as every tidemq TPS) and today's message counts."""
    while True:
        await _cluster_list_once(admin, out, cluster, more_stats)
        if interval is None:
            return
        await asyncio.sleep(interval)


def _counter(rt: dict[str, str], key: str) -> int:
    try:
        return int(rt.get(key, 0) or 0)
    except ValueError:
        return 0


async def _cluster_list_once(
    admin: AsyncAdminClient, out: Out, cluster: str | None, more_stats: bool
) -> None:
    rows = [r for r in await admin.cluster_list() if cluster is None or r.cluster == cluster]
    if cluster and not rows:
        raise ClientError(f"cluster {cluster} has no brokers")
    if out.as_json:
        out.json([_cluster_json(r) for r in rows])
    elif more_stats:
        out.table(
            ["cluster", "broker", "id", "inTotalYest", "outTotalYest", "inTotalToday", "outTotalToday"],
            [_cluster_more_stats_row(r) for r in rows],
        )
    else:
        out.table(
            [
                "cluster",
                "broker",
                "id",
                "address",
                "version",
                "inTPS(1m)",
                "outTPS(1m)",
                "inToday",
                "outToday",
                "diskRatio",
            ],
            [_cluster_row(r) for r in rows],
        )


def _cluster_json(r: BrokerRow) -> dict[str, Any]:
    """``clusterList --json``'s object of one broker."""
    return {
        "cluster": r.cluster,
        "brokerName": r.broker_name,
        "brokerId": r.broker_id,
        "addr": r.addr,
        "runtime": r.runtime,
        "error": r.error,
    }


def _cluster_more_stats_row(r: BrokerRow) -> tuple[Any, ...]:
    """``clusterList -m``'s row: messages in and out yesterday and today so far (RocketMQ's -m)."""
    rt = r.runtime
    return (
        r.cluster,
        r.broker_name,
        r.broker_id,
        _counter(rt, "msgPutTotalTodayMorning") - _counter(rt, "msgPutTotalYesterdayMorning"),
        _counter(rt, "msgGetTotalTodayMorning") - _counter(rt, "msgGetTotalYesterdayMorning"),
        _counter(rt, "msgPutTotalTodayNow") - _counter(rt, "msgPutTotalTodayMorning"),
        _counter(rt, "msgGetTotalTodayNow") - _counter(rt, "msgGetTotalTodayMorning"),
    )


def _cluster_row(r: BrokerRow) -> tuple[Any, ...]:
    """``clusterList``'s row: address, version, 1-minute TPS, today's counts, disk ratio."""
    rt = r.runtime
    today_in = int(rt.get("msgPutTotalTodayNow", 0) or 0) - int(rt.get("msgPutTotalTodayMorning", 0) or 0)
    today_out = int(rt.get("msgGetTotalTodayNow", 0) or 0) - int(rt.get("msgGetTotalTodayMorning", 0) or 0)
    return (
        r.cluster,
        r.broker_name,
        r.broker_id,
        r.addr,
        rt.get("brokerVersionDesc", r.error or "-"),
        r.tps("putTps"),
        r.tps("getTransferedTps"),
        today_in,
        today_out,
        rt.get("commitLogDiskRatio", "-"),
    )


@click.option("-b", "--broker-addr", default=None, help="Broker host:port or name (default: every master).")
@click.option("-c", "--cluster", default=None, help="Every master of this cluster.")
@admin_command("broker-status", "brokerStatus")
async def broker_status(
    admin: AsyncAdminClient, out: Out, broker_addr: str | None, cluster: str | None
) -> None:
    """A broker's runtime figures (GET_BROKER_RUNTIME_INFO), as RocketMQ reports them."""
    result = {
        a: await admin.fetch_broker_runtime_stats(a)
        for a in await resolve_broker_addrs(admin, broker_addr, cluster)
    }
    if out.as_json:
        out.json(result)
        return
    for addr, table in result.items():
        out.kv(sorted(table.items()), title=f"broker {addr}")


@click.option("-b", "--broker-addr", default=None, help="Broker host:port or name (default: every master).")
@click.option("-c", "--cluster", default=None, help="Every master of this cluster.")
@admin_command("get-broker-config", "getBrokerConfig")
async def get_broker_config(
    admin: AsyncAdminClient, out: Out, broker_addr: str | None, cluster: str | None
) -> None:
    """A broker's configuration (GET_BROKER_CONFIG)."""
    result = {
        a: await admin.get_broker_config(a) for a in await resolve_broker_addrs(admin, broker_addr, cluster)
    }
    if out.as_json:
        out.json(result)
        return
    for addr, props in result.items():
        out.kv(list(props.items()), title=f"config of {addr}")


@click.option("-k", "--key", required=True, help="Option name (camelCase, as in broker.conf).")
@click.option("-v", "--value", required=True, help="New value.")
@click.option("-b", "--broker-addr", default=None, help="Broker host:port or name (default: every master).")
@click.option("-c", "--cluster", default=None, help="Every master of this cluster.")
@click.option(
    "-a", "--update-all-broker", type=click.BOOL, default=False, help="true: slaves too (with -c or alone)."
)
@admin_command("update-broker-config", "updateBrokerConfig")
async def update_broker_config(
    admin: AsyncAdminClient,
    out: Out,
    key: str,
    value: str,
    broker_addr: str | None,
    cluster: str | None,
    update_all_broker: bool,
) -> None:
    """Change a broker option at run time (UPDATE_BROKER_CONFIG)."""
    if update_all_broker and not broker_addr:
        info = await admin.examine_broker_cluster_info()
        names = info.cluster_addr_table.get(cluster, set()) if cluster else set(info.broker_addr_table)
        addrs = sorted(
            a for n in names if (bd := info.broker_addr_table.get(n)) for a in bd.broker_addrs.values()
        )
    else:
        addrs = await resolve_broker_addrs(admin, broker_addr, cluster)
    for addr in addrs:
        await admin.update_broker_config({key: value}, addr)
    if out.as_json:
        out.json({"key": key, "value": value, "brokers": addrs})
    else:
        out.line(f"{key}={value} on {', '.join(addrs)}")


@click.option("-t", "--topic", default=None, help="Only this topic (default: every non-system topic).")
@click.option("-a", "--active-topic", is_flag=True, help="Only topics with messages in or out in 24 h.")
@admin_command("stats-all", "statsAll")
async def stats_all(admin: AsyncAdminClient, out: Out, topic: str | None, active_topic: bool) -> None:
    """Per topic and consuming group: lag, in/out TPS and messages in the last 24 h (VIEW_BROKER_STATS_DATA)."""
    if topic:
        topics = [topic]
    else:
        info = await admin.examine_broker_cluster_info()
        names = frozenset(info.cluster_addr_table) | frozenset(info.broker_addr_table)
        topics = [t for t in await admin.fetch_all_topic_list() if not is_internal_topic(t, names)]
    rows = await admin.stats_all(topics)
    if active_topic:
        rows = [r for r in rows if r.in_msg_24h > 0 or r.out_msg_24h > 0]
    if out.as_json:
        out.json(
            [
                {
                    "topic": r.topic,
                    "group": r.group,
                    "accumulation": r.accumulation,
                    "inTps": r.in_tps,
                    "outTps": r.out_tps,
                    "inMsg24Hour": r.in_msg_24h,
                    "outMsg24Hour": r.out_msg_24h,
                }
                for r in rows
            ]
        )
        return
    out.table(
        ["topic", "consumerGroup", "accumulation", "inTPS", "outTPS", "inMsg24Hour", "outMsg24Hour"],
        [
            (r.topic, r.group or "-", r.accumulation, r.in_tps, r.out_tps, r.in_msg_24h, r.out_msg_24h)
            for r in rows
        ],
    )


@click.option("-b", "--broker-addr", default=None, help="Broker host:port or name (default: every master).")
@click.option("-c", "--cluster", default=None, help="Every master of this cluster.")
@admin_command("clean-expired-cq", "cleanExpiredCQ")
async def clean_expired_cq(
    admin: AsyncAdminClient, out: Out, broker_addr: str | None, cluster: str | None
) -> None:
    """Drop consume-queue entries whose commit-log data is gone (CLEAN_EXPIRED_CONSUMEQUEUE)."""
    addrs = [
        a
        for addr in await resolve_broker_addrs(admin, broker_addr, cluster)
        for a in await admin.clean_expired_consume_queue(addr)
    ]
    if out.as_json:
        out.json({"brokers": addrs, "ok": True})
    else:
        out.line(f"cleaned expired consume queues on {', '.join(addrs)}")


@click.option("-b", "--broker-addr", default=None, help="Broker host:port or name (default: every master).")
@click.option("-c", "--cluster", default=None, help="Every master of this cluster.")
@click.option(
    "--force",
    is_flag=True,
    help="Also delete messages not yet consumed: expired segments, and unexpired ones while the disk "
    "is above diskSpaceCleanForciblyRatio (each loss is an ERROR line in the broker's log).",
)
@admin_command("delete-expired-commit-log", "deleteExpiredCommitLog")
async def delete_expired_commit_log(
    admin: AsyncAdminClient, out: Out, broker_addr: str | None, cluster: str | None, force: bool
) -> None:
    """Run commit-log retention now (DELETE_EXPIRED_COMMITLOG): expired segments every group consumed."""
    addrs = [
        a
        for addr in await resolve_broker_addrs(admin, broker_addr, cluster)
        for a in await admin.delete_expired_commitlog(addr, force=force)
    ]
    if out.as_json:
        out.json({"brokers": addrs, "ok": True, "force": force})
    else:
        out.line(f"deleted expired commit-log files on {', '.join(addrs)}")


@admin_command("get-namesrv-config", "getNamesrvConfig")
async def get_namesrv_config(admin: AsyncAdminClient, out: Out) -> None:
    """Each name server's configuration (GET_NAMESRV_CONFIG)."""
    result = await admin.get_name_server_config()
    if out.as_json:
        out.json(result)
        return
    for addr, props in result.items():
        out.kv(list(props.items()), title=f"name server {addr}")


@click.option("-s", "--namespace", required=True, help="KV namespace (e.g. ORDER_TOPIC_CONFIG).")
@click.option("-k", "--key", required=True, help="Key.")
@click.option("-v", "--value", required=True, help="Value.")
@admin_command("update-kv-config", "updateKvConfig")
async def update_kv_config(admin: AsyncAdminClient, out: Out, namespace: str, key: str, value: str) -> None:
    """Set a name-server KV config entry on every name server (PUT_KV_CONFIG)."""
    await admin.create_and_update_kv_config(namespace, key, value)
    if out.as_json:
        out.json({"namespace": namespace, "key": key, "value": value})
    else:
        out.line(f"{namespace}/{key} = {value}")


@click.option("-s", "--namespace", required=True, help="KV namespace.")
@click.option("-k", "--key", required=True, help="Key.")
@admin_command("delete-kv-config", "deleteKvConfig")
async def delete_kv_config(admin: AsyncAdminClient, out: Out, namespace: str, key: str) -> None:
    """Delete a name-server KV config entry on every name server (DELETE_KV_CONFIG)."""
    if await admin.get_kv_config(namespace, key) is None:
        raise ClientError(f"no KV config {namespace}/{key} on the name server(s)")
    await admin.delete_kv_config(namespace, key)
    if out.as_json:
        out.json({"namespace": namespace, "key": key, "deleted": True})
    else:
        out.line(f"{namespace}/{key} deleted")
