"""Dashboard pieces for topics and numbers: browsing a topic's newest messages, creating and deleting
topics, thousands separators, the reset form's default topic.

Kept apart from the pages (``topics_page.py`` and ``messages_page.py`` register these): each is
small and reads through :class:`~tidemq.admin.client.AsyncAdminClient`, as every page does.

* ``/messages?topic=T`` with nothing else lists the topic's newest messages (``BROWSE_LIMIT``,
  newest first, over every queue), as rocketmq-dashboard's topic search does;
* ``POST /topics`` (form ``topic``, ``queues``, ``perm``) creates a topic on every master
  (UPDATE_AND_CREATE_TOPIC) and opens its page; ``POST /topics/{topic}/delete`` deletes it from the
  brokers and name servers (DELETE_TOPIC_IN_BROKER / _IN_NAMESRV) after the browser's confirmation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from tidemq.admin.client import AsyncAdminClient
from tidemq.errors import TideMQError
from tidemq.protocol.message import MessageExt
from tidemq.protocol.topic import is_retry_topic

__all__ = [
    "BROWSE_LIMIT",
    "browse_topic",
    "create_topic_view",
    "delete_topic_view",
    "group_reset_topics",
    "thousands",
]

BROWSE_LIMIT = 32
"""Messages a topic-only search shows (the newest, over every queue)."""


def thousands(value: Any) -> str:
    """``12345`` -> ``"12,345"`` (the Jinja filter ``n``); anything not a number is shown as it is."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    try:
        return f"{int(str(value)):,}"
    except ValueError:
        return str(value)


async def browse_topic(admin: AsyncAdminClient, topic: str, limit: int = BROWSE_LIMIT) -> list[MessageExt]:
    """The newest ``limit`` messages of ``topic`` over all its queues, newest first.

    Raises:
        NoRouteError: the topic does not exist. TideMQError: a broker refused.
    """
    found: list[MessageExt] = []
    for mq in await admin.fetch_subscribe_message_queues(topic):
        hi = await admin.max_offset(mq)
        lo = max(await admin.min_offset(mq), hi - limit)
        if hi > lo:
            found.extend(await admin.read_range(mq, lo, hi, limit))
    found.sort(key=lambda m: (m.store_timestamp, m.queue_offset), reverse=True)
    return found[:limit]


def group_reset_topics(topics: list[str]) -> list[str]:
    """The reset form's topics: the group's own topics first (the first is preselected), its
    ``%RETRY%`` topic last."""
    return sorted(topics, key=lambda t: (is_retry_topic(t), t))


async def create_topic_view(
    request: Request, admin: AsyncAdminClient, render_topics: Callable[..., Awaitable[Response]]
) -> Response:
    """``POST /topics``: create the topic, then its page; the Topics page with the error otherwise."""
    form = await request.form()
    topic = str(form.get("topic") or "").strip()
    try:
        queues = int(str(form.get("queues") or "8"))
        perm = int(str(form.get("perm") or "6"))
        await admin.create_topic(topic, queues, perm=perm)
        await admin.wait_for_route(topic, 10.0)
    except ValueError:
        return await render_topics(request, error="queues and perm must be numbers", status=400)
    except (TideMQError, TimeoutError) as exc:
        return await render_topics(request, error=f"cannot create topic {topic!r}: {exc}", status=400)
    return RedirectResponse(f"/topics/{topic}", status_code=303)


async def delete_topic_view(
    request: Request, admin: AsyncAdminClient, render_topics: Callable[..., Awaitable[Response]]
) -> Response:
    """``POST /topics/{topic}/delete``: delete it everywhere, then the Topics page saying so."""
    topic = request.path_params["topic"]
    try:
        brokers = await admin.delete_topic(topic)
    except (TideMQError, TimeoutError) as exc:
        return await render_topics(request, error=f"cannot delete topic {topic!r}: {exc}", status=400)
    return await render_topics(
        request, notice=f"topic {topic} deleted from {', '.join(brokers)} and the name servers"
    )
