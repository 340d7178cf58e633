"""``tidemq admin`` topic verbs: topicList, topicRoute, topicStatus, topicClusterList, updateTopic,
deleteTopic, updateTopicPerm, allocateMQ."""

from __future__ import annotations

import click

from tidemq.admin.cli import Out, admin_command, fmt_ms
from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.ops_group import ALLOCATE_STRATEGIES


@click.option("-c", "--cluster", default=None, help="Only the topics of this cluster.")
@admin_command("topic-list", "topicList")
async def topic_list(admin: AsyncAdminClient, out: Out, cluster: str | None) -> None:
    """Every topic the name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER)."""
    topics = await admin.fetch_all_topic_list()
    if cluster:
        topics = [t for t in topics if cluster in await _clusters_or_none(admin, t)]
    if out.as_json:
        out.json({"topicList": topics})
        return
    for t in topics:
        out.line(t)


async def _clusters_or_none(admin: AsyncAdminClient, topic: str) -> list[str]:
    from tidemq.errors import NoRouteError

    try:
        return await admin.topic_cluster_list(topic)
    except NoRouteError:
        return []


@click.option("-t", "--topic", required=True, help="Topic.")
@admin_command("topic-route", "topicRoute")
async def topic_route(admin: AsyncAdminClient, out: Out, topic: str) -> None:
    """The topic's route from the name server (GET_ROUTEINFO_BY_TOPIC)."""
    route = await admin.examine_topic_route_info(topic)
    if out.as_json:
        out.json(route.to_json())
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
@admin_command("topic-status", "topicStatus")
async def topic_status(admin: AsyncAdminClient, out: Out, topic: str) -> None:
    """Min/max offset and last update time per queue (GET_TOPIC_STATS_INFO)."""
    table = await admin.examine_topic_stats(topic)
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
@click.option(
    "-q", "--queues", type=int, default=8, show_default=True, help="Read and write queue count per broker."
)
@click.option("-r", "--read-queues", type=int, default=None, help="Read queue count (default: --queues).")
@click.option("-c", "--cluster", default=None, help="Only the brokers of this cluster (default: all).")
@click.option(
    "-p", "--perm", type=int, default=6, show_default=True, help="Permission bits: 6 = read + write."
)
@click.option("-o", "--order", is_flag=True, help="Mark the topic as ordered.")
@admin_command("update-topic", "updateTopic")
async def update_topic(
    admin: AsyncAdminClient,
    out: Out,
    topic: str,
    queues: int,
    read_queues: int | None,
    cluster: str | None,
    perm: int,
    order: bool,
) -> None:
    """Create or update a topic on every broker (UPDATE_AND_CREATE_TOPIC)."""
    addrs = await admin.create_topic(
        topic, queues, cluster=cluster, perm=perm, order=order, read_queue_nums=read_queues
    )
    if out.as_json:
        out.json({"topic": topic, "queues": queues, "brokers": addrs})
    else:
        out.line(f"topic {topic}: {queues} queues on {', '.join(addrs)}")


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
    "-b", "--broker-name", default=None, help="Only on this broker (default: every broker of the topic)."
)
@admin_command("update-topic-perm", "updateTopicPerm")
async def update_topic_perm(
    admin: AsyncAdminClient, out: Out, topic: str, perm: str, broker_name: str | None
) -> None:
    """Change a topic's read/write permission, keeping its queues."""
    addrs = await admin.update_topic_perm(topic, int(perm), broker_name)
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
