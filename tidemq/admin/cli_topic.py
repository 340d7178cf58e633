"""``tidemq admin`` topic verbs: topicList, topicRoute, topicStatus, topicClusterList, updateTopic,
deleteTopic, updateTopicPerm, allocateMQ."""

from __future__ import annotations

import click

from tidemq.admin.cli_base import Out, admin_command, fmt_ms
from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.ops_group import ALLOCATE_STRATEGIES
from tidemq.errors import ClientError

PAGE_SIZE = 1000
"""topicList's default page in text output: 100,000 topics are not printed at once."""


@click.option(
    "-c",
    "--cluster-model",
    is_flag=True,
    help="Each topic with its cluster and consumer groups (mqadmin -c).",
)
@click.option(
    "--page",
    type=click.IntRange(min=1),
    default=None,
    help="Only this page of the sorted list (1 is the first). Text output pages by default.",
)
@click.option(
    "--page-size", type=click.IntRange(min=1), default=PAGE_SIZE, show_default=True, help="Topics per page."
)
@admin_command("topic-list", "topicList")
async def topic_list(
    admin: AsyncAdminClient, out: Out, cluster_model: bool, page: int | None, page_size: int
) -> None:
    """Every topic the name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), sorted; text output
    shows one page (--page, --page-size) and says how many there are, JSON everything unless --page."""
    topics = sorted(await admin.fetch_all_topic_list())
    total = len(topics)
    if page is not None or not out.as_json:
        first = ((page or 1) - 1) * page_size
        topics = topics[first : first + page_size]
    if cluster_model:
        rows: list[tuple[str, str, str]] = []
        for t in topics:
            if t.startswith(("%RETRY%", "%DLQ%")):
                continue
            groups = await _groups_or_none(admin, t)
            for c in await _clusters_or_none(admin, t) or [""]:
                rows.extend((c, t, g) for g in groups or [""])
        if out.as_json:
            out.json([{"clusterName": c, "topic": t, "consumerGroup": g} for c, t, g in rows])
        else:
            out.table(["clusterName", "topic", "consumerGroup"], rows)
        return
    if out.as_json:
        paging = {} if page is None else {"page": page, "pageSize": page_size, "total": total}
        out.json({"topicList": topics, **paging})
        return
    for t in topics:
        out.line(t)
    if len(topics) < total:
        first = ((page or 1) - 1) * page_size
        shown = f"{first + 1}-{first + len(topics)}" if topics else "none"
        out.line(f"(topics {shown} of {total}; --page {(page or 1) + 1} for the next)")


async def _groups_or_none(admin: AsyncAdminClient, topic: str) -> list[str]:
    from tidemq.errors import TideMQError

    try:
        return sorted(await admin.query_topic_consume_by_who(topic))
    except TideMQError:
        return []


async def _clusters_or_none(admin: AsyncAdminClient, topic: str) -> list[str]:
    from tidemq.errors import NoRouteError

    try:
        return await admin.topic_cluster_list(topic)
    except NoRouteError:
        return []


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option(
    "-l", "--list", "as_list", is_flag=True, help="One line per broker with its cluster (mqadmin -l)."
)
@admin_command("topic-route", "topicRoute")
async def topic_route(admin: AsyncAdminClient, out: Out, topic: str, as_list: bool) -> None:
    """The topic's route from the name server (GET_ROUTEINFO_BY_TOPIC)."""
    route = await admin.examine_topic_route_info(topic)
    if out.as_json:
        out.json(route.to_json())
        return
    if as_list:
        info = await admin.examine_broker_cluster_info()
        cluster_of = {n: c for c, names in info.cluster_addr_table.items() for n in names}
        addrs_of = {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}
        out.table(
            ["clusterName", "brokerName", "brokerAddrs", "readQueue", "writeQueue", "perm"],
            [
                (
                    cluster_of.get(q.broker_name, "-"),
                    q.broker_name,
                    ", ".join(f"{k}={v}" for k, v in sorted(addrs_of.get(q.broker_name, {}).items())),
                    q.read_queue_nums,
                    q.write_queue_nums,
                    q.perm,
                )
                for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
            ],
        )
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
    out.table(
        ["broker", "readQueues", "writeQueues", "perm", "addresses (id=addr)"],
        rows,
        title=f"route of {topic}",
    )


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-c", "--cluster", default=None, help="Only the brokers of this cluster.")
@admin_command("topic-status", "topicStatus")
async def topic_status(admin: AsyncAdminClient, out: Out, topic: str, cluster: str | None) -> None:
    """Min/max offset and last update time per queue (GET_TOPIC_STATS_INFO)."""
    table = await admin.examine_topic_stats(topic)
    if cluster:
        names = (await admin.examine_broker_cluster_info()).cluster_addr_table.get(cluster, set())
        table.offset_table = {mq: t for mq, t in table.offset_table.items() if mq.broker_name in names}
    if out.as_json:
        out.json(table.to_json())
        return
    rows = [
        (mq.broker_name, mq.queue_id, t.min_offset, t.max_offset, fmt_ms(t.last_update_timestamp))
        for mq, t in sorted(table.offset_table.items())
    ]
    out.table(["broker", "queue", "minOffset", "maxOffset", "lastUpdated"], rows, title=f"status of {topic}")


@click.option("-t", "--topic", required=True, help="Topic.")
@admin_command("topic-cluster-list", "topicClusterList")
async def topic_cluster_list(admin: AsyncAdminClient, out: Out, topic: str) -> None:
    """The clusters holding the topic."""
    clusters = await admin.topic_cluster_list(topic)
    if out.as_json:
        out.json({"topic": topic, "clusters": clusters})
    else:
        for c in clusters:
            out.line(c)


@click.option("-t", "--topic", required=True, help="Topic to create or update.")
@click.option("-b", "--broker-addr", default=None, help="Only this broker (host:port).")
@click.option("-c", "--cluster", default=None, help="Every master of this cluster (default: every master).")
@click.option("-w", "--write-queues", type=int, default=None, help="Write queue count (default: -q).")
@click.option("-r", "--read-queues", type=int, default=None, help="Read queue count (default: -w).")
@click.option(
    "-q", "--queues", type=int, default=8, show_default=True, help="Read and write queue count (tidemq's)."
)
@click.option("-p", "--perm", type=int, default=6, show_default=True, help="2 = write, 4 = read, 6 = both.")
@click.option(
    "-o", "--order", type=click.BOOL, default=False, show_default=True, help="true: an ordered topic."
)
@click.option("-u", "--unit", type=click.BOOL, default=False, help="true: a unit topic (topicSysFlag bit 1).")
@click.option(
    "-s", "--has-unit-sub", type=click.BOOL, default=False, help="true: has unit subscriptions (bit 2)."
)
@click.option("-a", "--attributes", default=None, help="RocketMQ 5 attributes: +message.type=FIFO,-key.")
@admin_command("update-topic", "updateTopic")
async def update_topic(
    admin: AsyncAdminClient,
    out: Out,
    topic: str,
    broker_addr: str | None,
    cluster: str | None,
    write_queues: int | None,
    read_queues: int | None,
    queues: int,
    perm: int,
    order: bool,
    unit: bool,
    has_unit_sub: bool,
    attributes: str | None,
) -> None:
    """Create or update a topic (UPDATE_AND_CREATE_TOPIC) with mqadmin's letters; -q is tidemq's
    shorthand for -w and -r together."""
    write = queues if write_queues is None else write_queues
    read = write if read_queues is None else read_queues
    addrs = await admin.create_topic(
        topic,
        write,
        cluster=cluster,
        perm=perm,
        order=order,
        read_queue_nums=read,
        broker_addr=broker_addr,
        attributes=attributes,
        topic_sys_flag=(1 if unit else 0) | (2 if has_unit_sub else 0),
    )
    if out.as_json:
        out.json(
            {
                "topic": topic,
                "queues": write,
                "readQueues": read,
                "writeQueues": write,
                "perm": perm,
                "brokers": addrs,
            }
        )
    else:
        counts = f"{write} queues" if read == write else f"{read} read / {write} write queues"
        out.line(f"topic {topic}: {counts}, perm {perm} on {', '.join(addrs)}")


@click.option("-t", "--topic", required=True, help="Topic to delete.")
@click.option("-c", "--cluster", default=None, help="Only from this cluster's brokers.")
@admin_command("delete-topic", "deleteTopic")
async def delete_topic(admin: AsyncAdminClient, out: Out, topic: str, cluster: str | None) -> None:
    """Delete a topic from its brokers and the name servers (DELETE_TOPIC_IN_BROKER / _IN_NAMESRV)."""
    addrs = await admin.delete_topic(topic, cluster)
    if out.as_json:
        out.json({"topic": topic, "deleted": True, "brokers": addrs})
    else:
        out.line(f"topic {topic} deleted from {', '.join(addrs)} and the name server(s)")


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option(
    "-p",
    "--perm",
    type=click.Choice(["2", "4", "6"]),
    required=True,
    help="2 = write only, 4 = read only, 6 = both.",
)
@click.option(
    "-b", "--broker-addr", default=None, help="Only on this broker: host:port (as mqadmin) or its name."
)
@click.option("-c", "--cluster", default=None, help="Only on the brokers of this cluster.")
@admin_command("update-topic-perm", "updateTopicPerm")
async def update_topic_perm(
    admin: AsyncAdminClient, out: Out, topic: str, perm: str, broker_addr: str | None, cluster: str | None
) -> None:
    """Change a topic's read/write permission, keeping its queues."""
    names: list[str | None] = [None]
    if broker_addr or cluster:
        route = await admin.examine_topic_route_info(topic)
        info = await admin.examine_broker_cluster_info() if cluster else None
        in_cluster = info.cluster_addr_table.get(cluster or "", set()) if info else None
        names = [
            bd.broker_name
            for bd in route.broker_datas
            if (not broker_addr or broker_addr in (bd.broker_name, *bd.broker_addrs.values()))
            and (in_cluster is None or bd.broker_name in in_cluster)
        ]
        if not names:
            raise ClientError(f"topic {topic} has no broker matching -b {broker_addr} -c {cluster}")
    addrs = [a for n in names for a in await admin.update_topic_perm(topic, int(perm), n)]
    if out.as_json:
        out.json({"topic": topic, "perm": int(perm), "brokers": addrs})
    else:
        out.line(f"topic {topic}: perm {perm} on {', '.join(addrs)}")


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option(
    "-i", "--ip-list", "client_ids", required=True, help="Client ids (ip@instance), comma-separated."
)
@click.option("--strategy", type=click.Choice(ALLOCATE_STRATEGIES), default="AVG", show_default=True)
@admin_command("allocate-mq", "allocateMQ")
async def allocate_mq(admin: AsyncAdminClient, out: Out, topic: str, client_ids: str, strategy: str) -> None:
    """Which queues each client of a group would consume (allocation strategy, no I/O to clients)."""
    result = await admin.allocate_mq(topic, client_ids.split(","), strategy)
    if out.as_json:
        out.json(
            {
                cid: [{"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id} for q in mqs]
                for cid, mqs in result.items()
            }
        )
        return
    rows = [(cid, ", ".join(f"{q.broker_name}:{q.queue_id}" for q in mqs)) for cid, mqs in result.items()]
    out.table(["clientId", "queues (broker:queue)"], rows, title=f"{strategy} allocation of {topic}")
