"""``tidemq admin updateTopicList``: create many topics in one request per broker
(UPDATE_AND_CREATE_TOPIC_LIST, RocketMQ 5's code 18)."""

from __future__ import annotations

from typing import TextIO

import click

from tidemq.admin.cli_base import Out, admin_command
from tidemq.admin.client import AsyncAdminClient
from tidemq.errors import ClientError

CHUNK = 1000
"""Topics per request: keeps each request's body well under the 16 MiB frame limit."""


@click.option("-t", "--topic", "topics", multiple=True, help="A topic (repeatable).")
@click.option(
    "-f",
    "--file",
    "topic_file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    help="A file with one topic per line ('-' reads standard input).",
)
@click.option("-q", "--queues", type=int, default=8, show_default=True, help="Read and write queues of each.")
@click.option("-c", "--cluster", default=None, help="Only on this cluster's masters (default: every master).")
@click.option(
    "-p", "--perm", type=int, default=6, show_default=True, help="Permission bits: 6 = read + write."
)
@click.option("-o", "--order", is_flag=True, help="Mark the topics as ordered.")
@admin_command("update-topic-list", "updateTopicList")
async def update_topic_list(
    admin: AsyncAdminClient,
    out: Out,
    topics: tuple[str, ...],
    topic_file: TextIO | None,
    queues: int,
    cluster: str | None,
    perm: int,
    order: bool,
) -> None:
    """Create or update many topics at once, 1,000 per request (UPDATE_AND_CREATE_TOPIC_LIST)."""
    names = list(topics)
    if topic_file is not None:
        lines = topic_file.read().splitlines()
        names += [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not names:
        raise ClientError("give topics with -t TOPIC (repeatable) or -f FILE")
    names = list(dict.fromkeys(names))
    brokers: set[str] = set()
    for i in range(0, len(names), CHUNK):
        brokers.update(
            await admin.create_topic_list(
                names[i : i + CHUNK], queues, cluster=cluster, perm=perm, order=order
            )
        )
    if out.as_json:
        out.json({"topics": len(names), "queues": queues, "brokers": sorted(brokers)})
    else:
        out.line(f"{len(names)} topics of {queues} queues on {', '.join(sorted(brokers))}")
