"""``tidemq admin`` message verbs: queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset,
printMsg, sendMessage, consumeMessage."""

from __future__ import annotations

import codecs

import click

from tidemq.admin.cli_base import Out, admin_command, parse_time_ms, show_messages
from tidemq.admin.client import AsyncAdminClient
from tidemq.errors import ClientError
from tidemq.protocol.filter import build_subscription_data, is_tag_matched
from tidemq.protocol.message import MessageExt, MessageQueue


@click.option("-i", "--msg-id", required=True, help="Offset msg id (or a unique key, with -t).")
@click.option("-t", "--topic", default=None, help="Topic (needed when the id is a unique key).")
@admin_command("query-msg-by-id", "queryMsgById")
async def query_msg_by_id(admin: AsyncAdminClient, out: Out, msg_id: str, topic: str | None) -> None:
    """One message by its id, with its body (VIEW_MESSAGE_BY_ID)."""
    show_messages(out, [await admin.view_message(msg_id, topic)], detail=True)


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-k", "--key", required=True, help="Message key.")
@click.option(
    "-m", "--max", "max_num", type=click.IntRange(1, 64), default=64, show_default=True, help="Per broker."
)
@click.option("-b", "--begin", default=None, help="Stored at or after (epoch ms or ISO time).")
@click.option("-e", "--end", default=None, help="Stored before (epoch ms or ISO time).")
@admin_command("query-msg-by-key", "queryMsgByKey")
async def query_msg_by_key(
    admin: AsyncAdminClient, out: Out, topic: str, key: str, max_num: int, begin: str | None, end: str | None
) -> None:
    """Messages whose KEYS hold a key (QUERY_MESSAGE through the index)."""
    msgs = await admin.query_message_by_key(
        topic, key, max_num, parse_time_ms(begin) if begin else 0, parse_time_ms(end) if end else None
    )
    show_messages(out, msgs)


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-i", "--msg-id", required=True, help="Unique key (the client msg id a producer returns).")
@admin_command("query-msg-by-unique-key", "queryMsgByUniqueKey")
async def query_msg_by_unique_key(admin: AsyncAdminClient, out: Out, topic: str, msg_id: str) -> None:
    """One message by its unique key (UNIQ_KEY), with its body."""
    show_messages(out, [await admin.view_message(msg_id, topic)], detail=True)


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-b", "--broker-name", required=True, help="Broker name.")
@click.option("-i", "--queue-id", type=click.IntRange(min=0), required=True, help="Queue id.")
@click.option("-o", "--offset", type=click.IntRange(min=0), required=True, help="Queue offset.")
@admin_command("query-msg-by-offset", "queryMsgByOffset")
async def query_msg_by_offset(
    admin: AsyncAdminClient, out: Out, topic: str, broker_name: str, queue_id: int, offset: int
) -> None:
    """The message at a queue offset, with its body (PULL_MESSAGE, nothing committed)."""
    await admin.examine_topic_route_info(topic)
    msg = await admin.query_message_by_offset(MessageQueue(topic, broker_name, queue_id), offset)
    show_messages(out, [msg], detail=True)


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-c", "--charset", "charset_name", default="UTF-8", show_default=True, help="Body charset.")
@click.option("-s", "--sub-expression", default="*", show_default=True, help="Tags, e.g. 'TagA || TagB'.")
@click.option(
    "-b", "--begin", default=None, help="Stored at or after (epoch ms, yyyy-MM-dd#HH:mm:ss:SSS or ISO)."
)
@click.option("-e", "--end", default=None, help="Stored before (default: now).")
@click.option("-d", "--print-body", type=click.BOOL, default=True, show_default=True, help="Print bodies.")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True)
@admin_command("print-msg", "printMsg")
async def print_msg(
    admin: AsyncAdminClient,
    out: Out,
    topic: str,
    charset_name: str,
    sub_expression: str,
    begin: str | None,
    end: str | None,
    print_body: bool,
    limit: int,
) -> None:
    """Every message of a topic in a time range, queue by queue (mqadmin's letters: -s is the tag
    expression, -b/-e the time range)."""
    try:
        codecs.lookup(charset_name)
    except LookupError:
        raise ClientError(f"unknown charset {charset_name!r} (-c), e.g. UTF-8 or GBK") from None
    msgs = await admin.print_msg(
        topic, parse_time_ms(begin) if begin else None, parse_time_ms(end) if end else None, limit
    )
    sub = build_subscription_data(topic, sub_expression)
    msgs = [m for m in msgs if is_tag_matched(sub, m.tags)]
    for m in msgs:
        m.body = m.body.decode(charset_name, "replace").encode() if print_body else b""
    show_messages(out, msgs)


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-p", "--body", required=True, help="Message body (sent exactly as given).")
@click.option("-k", "--keys", default=None, help="Message key(s).")
@click.option("-c", "--tags", default=None, help="Message tag.")
@click.option("-b", "--broker-name", default=None, help="Send to this broker (with -i).")
@click.option(
    "-i", "--queue-id", type=click.IntRange(min=0), default=None, help="Send to this queue (with -b)."
)
@admin_command("send-message", "sendMessage")
async def send_message(
    admin: AsyncAdminClient,
    out: Out,
    topic: str,
    body: str,
    keys: str | None,
    tags: str | None,
    broker_name: str | None,
    queue_id: int | None,
) -> None:
    """Send one test message and print where it went."""
    r = await admin.send_message(
        topic, body.encode(), tags=tags, keys=keys, broker_name=broker_name, queue_id=queue_id
    )
    row = {
        "msgId": r.msg_id,
        "offsetMsgId": r.offset_msg_id,
        "brokerName": r.message_queue.broker_name,
        "queueId": r.message_queue.queue_id,
        "queueOffset": r.queue_offset,
        "sendStatus": str(getattr(r.send_status, "value", r.send_status)),
    }
    if out.as_json:
        out.json(row)
    else:
        out.table(list(row), [list(row.values())], title=f"sent to {topic}")


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-b", "--broker-name", default=None, help="Only this broker (with -i).")
@click.option("-i", "--queue-id", type=click.IntRange(min=0), default=None, help="Only this queue.")
@click.option(
    "-o",
    "--offset",
    type=click.IntRange(min=0),
    default=None,
    help="Start offset (default: the queue's min).",
)
@click.option(
    "-c", "--count", type=click.IntRange(min=1), default=128, show_default=True, help="Messages to print."
)
@click.option("-g", "--group", default=None, help="Accepted as mqadmin's -g; nothing is committed for it.")
@click.option("-s", "--begin", default=None, help="Stored at or after (epoch ms or yyyy-MM-dd#HH:mm:ss:SSS).")
@click.option("-e", "--end", default=None, help="Stored before.")
@admin_command("consume-message", "consumeMessage")
async def consume_message(
    admin: AsyncAdminClient,
    out: Out,
    topic: str,
    broker_name: str | None,
    queue_id: int | None,
    offset: int | None,
    count: int,
    group: str | None,
    begin: str | None,
    end: str | None,
) -> None:
    """Read messages from queues without committing anything (mqadmin's -g names its pull group)."""
    begin_ms = parse_time_ms(begin) if begin else None
    end_ms = parse_time_ms(end) if end else None
    mqs = await admin.fetch_subscribe_message_queues(topic)
    if broker_name is not None:
        mqs = [q for q in mqs if q.broker_name == broker_name]
    if queue_id is not None:
        mqs = [q for q in mqs if q.queue_id == queue_id]
    if not mqs:
        raise ClientError(f"topic {topic} has no queue matching broker={broker_name} queue={queue_id}")
    got: list[MessageExt] = []
    for mq in mqs:
        start = offset if offset is not None else await admin.min_offset(mq)
        if begin_ms is not None:
            start = max(start, await admin.search_offset(mq, begin_ms))
        stop = await admin.search_offset(mq, end_ms) if end_ms is not None else await admin.max_offset(mq)
        got.extend(await admin.read_range(mq, start, stop, count - len(got)))
        if len(got) >= count:
            break
    show_messages(out, got)
