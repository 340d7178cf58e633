"""The dashboard's message pages.

* ``GET /messages``: a topic's newest messages (``?topic=T`` alone), or a search by key
  (``&key=``), message id (``&msgId=``) or queue and offset (``&queueId=&offset=[&broker=]``); the
  first ten found show their trace (``&traceTopic=``, default RMQ_SYS_TRACE_TOPIC) when there is one;
* ``GET /send`` / ``POST /send`` (form ``topic``, ``body``, ``tags``, ``keys``): send a test message.
"""

from __future__ import annotations

import functools
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.dashboard.site import Site
from tidemq.admin.dashboard.topic_ops import browse_topic
from tidemq.errors import TideMQError
from tidemq.protocol.message import MessageExt, MessageQueue

__all__ = ["messages_view", "routes", "send_view"]


async def _message_trace(admin: AsyncAdminClient, msg_id: str, trace_topic: str | None) -> Any:
    """The :class:`~tidemq.client.trace.MessageTrace` of ``msg_id`` (None when the lookup failed)."""
    from tidemq.admin.ops_trace import query_msg_trace_by_id

    try:
        return await query_msg_trace_by_id(admin, msg_id, trace_topic or None)
    except (TideMQError, TimeoutError):
        return None


async def _search(admin: AsyncAdminClient, q: QueryParams) -> list[MessageExt]:
    """What ``/messages``'s query asks for (``topic`` is set): newest, by key, by id or by offset.

    Raises:
        ValueError: ``queueId`` or ``offset`` is not a number. TideMQError / TimeoutError: from the
        cluster.
    """
    topic, key, msg_id = q.get("topic", "").strip(), q.get("key", "").strip(), q.get("msgId", "").strip()
    queue, offset, broker = (
        q.get("queueId", "").strip(),
        q.get("offset", "").strip(),
        q.get("broker", "").strip(),
    )
    if key:
        return await admin.query_message_by_key(topic, key)
    if msg_id:
        return [await admin.view_message(msg_id, topic)]
    if offset:
        route = await admin.examine_topic_route_info(topic)
        broker = broker or route.broker_datas[0].broker_name
        return [
            await admin.query_message_by_offset(MessageQueue(topic, broker, int(queue or 0)), int(offset))
        ]
    return await browse_topic(admin, topic)  # a topic alone: its newest messages


async def messages_view(request: Request, site: Site) -> Response:
    """``GET /messages`` (404 with the error when a search failed; 200 with an empty form otherwise)."""
    q = request.query_params
    searched = bool(q.get("topic", "").strip())
    browsing = searched and not any(q.get(k, "").strip() for k in ("key", "msgId", "offset"))
    found: list[MessageExt] = []
    error = None
    try:
        if searched:
            found = await _search(site.admin(), q)
    except ValueError:
        error = "queue id and offset must be numbers"
    except (TideMQError, TimeoutError) as exc:
        error = str(exc)
    rows = [{"m": m, "body": m.body.decode("utf-8", "replace")} for m in found]
    for row, m in zip(rows[:10], found, strict=False):  # each message's trace, when there is one
        row["trace"] = await _message_trace(site.admin(), m.msg_id, q.get("traceTopic"))
    status = 404 if error and searched else 200
    return site.page(
        request,
        "messages.html",
        status,
        q=dict(q),
        rows=rows,
        searched=searched,
        error=error,
        browsing=browsing,
    )


async def send_view(request: Request, site: Site) -> Response:
    """``GET /send``: the form; ``POST /send``: send it and show the result (400 with the error)."""
    result = None
    error = None
    form: dict[str, str] = {}
    if request.method == "POST":
        data = await request.form()
        form = {k: str(v) for k, v in data.items()}
        try:
            r = await site.admin().send_message(
                form.get("topic", "").strip(),
                form.get("body", "").encode(),
                tags=form.get("tags") or None,
                keys=form.get("keys") or None,
            )
            result = {
                "msgId": r.msg_id,
                "offsetMsgId": r.offset_msg_id,
                "broker": r.message_queue.broker_name,
                "queueId": r.message_queue.queue_id,
                "queueOffset": r.queue_offset,
                "status": str(getattr(r.send_status, "value", r.send_status)),
            }
        except (TideMQError, TimeoutError, ValueError) as exc:
            error = str(exc)
    return site.page(
        request, "send.html", 200 if error is None else 400, form=form, result=result, error=error
    )


def routes(site: Site) -> list[BaseRoute]:
    """The message pages' routes, bound to ``site``."""
    return [
        Route("/messages", functools.partial(messages_view, site=site)),
        Route("/send", functools.partial(send_view, site=site), methods=["GET", "POST"]),
    ]
