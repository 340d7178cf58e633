"""The dashboard's Topics list, one page at a time (issue 30: 100,000 topics are not rendered at once).

Sorted by name and cut into pages as ``tidemq admin topicList`` does (``PAGE_SIZE`` = 1,000 a page,
"topics 1-1,000 of N"); only the shown page's topics are asked for their stats (queues, stored
messages, 1-minute put TPS), ``STATS_CONCURRENCY`` topics at a time. Query parameters of
``GET /topics``: ``q`` (a case-insensitive substring of the name), ``page`` (1 is the first; past the
end shows the last), ``size`` (topics a page, 1..``PAGE_SIZE``), ``all=1`` (system topics too).

Also the routes of the topic pages: ``/topics`` (the list; POST creates a topic), ``/topics/{topic}``
(route, per-queue min/max offset, consuming groups with their lag) and ``/topics/{topic}/delete``
(POST; the views that create and delete are in :mod:`~tidemq.admin.dashboard.topic_ops`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.dashboard.site import Site
from tidemq.admin.dashboard.topic_ops import create_topic_view, delete_topic_view
from tidemq.errors import TideMQError
from tidemq.protocol.topic import is_internal_topic

__all__ = [
    "PAGE_SIZE",
    "STATS_CONCURRENCY",
    "TopicPage",
    "TopicQuery",
    "load_topic_page",
    "routes",
    "topic_delete_view",
    "topic_detail_view",
    "topics_view",
]

PAGE_SIZE = 1000
"""Topics a page by default and at most (``tidemq admin topicList``'s page)."""

STATS_CONCURRENCY = 32
"""Topics whose stats are asked at the same time."""


@dataclass(frozen=True, slots=True)
class TopicQuery:
    """What the user asked for: filter, page (1-based), page size, system topics shown or not."""

    q: str = ""
    page: int = 1
    size: int = PAGE_SIZE
    show_all: bool = False

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> TopicQuery:
        """From ``GET /topics``'s query parameters.

        Raises:
            ValueError: ``page`` or ``size`` is not a positive whole number (the message says which).
        """
        values = {}
        for name, default in (("page", 1), ("size", PAGE_SIZE)):
            text = (params.get(name) or "").strip()
            try:
                values[name] = int(text) if text else default
            except ValueError:
                raise ValueError(f"{name} must be a whole number, got {text!r}") from None
            if values[name] < 1:
                raise ValueError(f"{name} must be 1 or more, got {values[name]}")
        return cls(
            q=(params.get("q") or "").strip(),
            page=values["page"],
            size=min(values["size"], PAGE_SIZE),
            show_all=params.get("all") == "1",
        )

    def link(self, page: int, *, keep_filter: bool = True) -> str:
        """``/topics?...`` of ``page`` with the same size and system-topic choice (and filter)."""
        params: dict[str, Any] = {"page": page}
        if self.q and keep_filter:
            params["q"] = self.q
        if self.size != PAGE_SIZE:
            params["size"] = self.size
        if self.show_all:
            params["all"] = 1
        return "/topics?" + urlencode(params)


@dataclass(slots=True)
class TopicPage:
    """One page of the sorted, filtered topic list.

    Attributes:
        rows: ``{"topic", "queues", "messages", "tps"}`` of the page's topics, in name order.
        total: topics matching the filter (on every page).
        page / pages: this page (clamped to ``1..pages``) and how many there are (at least 1).
        first: the 1-based position of the page's first topic (0 when there is none).
        query: what was asked.
    """

    query: TopicQuery
    total: int = 0
    page: int = 1
    pages: int = 1
    first: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def last(self) -> int:
        """The 1-based position of the page's last topic (0 when there is none)."""
        return self.first + len(self.rows) - 1 if self.rows else 0

    def link(self, page: int) -> str:
        """See :meth:`TopicQuery.link`."""
        return self.query.link(page)


def select_page(topics: list[str], query: TopicQuery) -> tuple[list[str], int, int, int]:
    """``(page's topics, total, page, pages)`` of ``topics`` filtered by ``query.q`` and sorted. Pure."""
    needle = query.q.lower()
    matching = sorted(t for t in topics if needle in t.lower()) if needle else sorted(topics)
    total = len(matching)
    pages = max(1, -(-total // query.size))
    page = min(query.page, pages)
    start = (page - 1) * query.size
    return matching[start : start + query.size], total, page, pages


async def _row(admin: AsyncAdminClient, topic: str, addrs: list[str]) -> dict[str, Any]:
    stats = await admin.examine_topic_stats(topic)
    tps = 0.0
    for addr in addrs:
        data = await admin.stats_data_or_zero(addr, "TOPIC_PUT_NUMS", topic)
        tps += float(data["statsMinute"]["tps"])
    total = sum(o.max_offset - o.min_offset for o in stats.offset_table.values())
    return {"topic": topic, "queues": len(stats.offset_table), "messages": total, "tps": tps}


async def load_topic_page(admin: AsyncAdminClient, query: TopicQuery) -> TopicPage:
    """The page ``query`` asks for: names from the name server (GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
    stats of the page's topics only (GET_TOPIC_STATS_INFO, VIEW_BROKER_STATS_DATA TOPIC_PUT_NUMS).

    Raises:
        TideMQError / TimeoutError: the name server or a broker cannot be asked.
    """
    info = await admin.examine_broker_cluster_info()
    names = set(info.cluster_addr_table) | set(info.broker_addr_table)
    listed = [
        t for t in await admin.fetch_all_topic_list() if query.show_all or not is_internal_topic(t, names)
    ]
    chosen, total, page, pages = select_page(listed, query)
    addrs = list((await admin.all_broker_addrs()).values())
    limit = asyncio.Semaphore(STATS_CONCURRENCY)

    async def one(topic: str) -> dict[str, Any]:
        async with limit:
            return await _row(admin, topic, addrs)

    rows = list(await asyncio.gather(*(one(t) for t in chosen)))
    first = (page - 1) * query.size + 1 if rows else 0
    return TopicPage(query=query, total=total, page=page, pages=pages, first=first, rows=rows)


async def topics_view(
    request: Request,
    site: Site,
    error: str | None = None,
    notice: str | None = None,
    status: int = 200,
) -> Response:
    """``GET /topics``: one page of the list (``error`` / ``notice`` shown above it, with ``status``);
    ``POST /topics`` creates a topic (:func:`~tidemq.admin.dashboard.topic_ops.create_topic_view`).
    A bad ``page`` or ``size`` shows the first page with the error and 400."""
    if request.method == "POST" and request.url.path == "/topics" and error is None and notice is None:
        return await create_topic_view(request, site.admin(), functools.partial(topics_view, site=site))
    try:
        query = TopicQuery.parse(request.query_params)
    except ValueError as exc:
        error, status, query = str(exc), 400, TopicQuery()
    try:
        listing = await load_topic_page(site.admin(), query)
    except (TideMQError, TimeoutError) as exc:
        return site.failed(request, "topics.html", exc, listing=TopicPage(query), notice=notice)
    return site.page(request, "topics.html", status, listing=listing, error=error, notice=notice)


async def topic_detail_view(request: Request, site: Site) -> Response:
    """``GET /topics/{topic}``: route, per-queue offsets, 1-minute put TPS over the masters, and the
    groups consuming it with their lag (404 for an unknown topic, 502 when a broker cannot be asked)."""
    admin, topic = site.admin(), request.path_params["topic"]
    try:
        route = await admin.examine_topic_route_info(topic)
        stats = await admin.examine_topic_stats(topic)
        tps = 0.0
        for bd in route.broker_datas:
            addr = bd.broker_addrs.get(0)
            if addr:
                data = await admin.stats_data_or_zero(addr, "TOPIC_PUT_NUMS", topic)
                tps += float(data["statsMinute"]["tps"])
        groups = []
        for g in await admin.query_topic_consume_by_who(topic):
            cs = await admin.examine_consume_stats(g, topic)
            groups.append({"group": g, "lag": cs.compute_total_diff()})
    except (TideMQError, TimeoutError) as exc:
        return site.failed(request, "topic.html", exc, topic=topic, route=None, queues=[], groups=[], tps=0.0)
    queues = sorted(stats.offset_table.items())
    return site.page(request, "topic.html", topic=topic, route=route, queues=queues, groups=groups, tps=tps)


async def topic_delete_view(request: Request, site: Site) -> Response:
    """``POST /topics/{topic}/delete`` (:func:`~tidemq.admin.dashboard.topic_ops.delete_topic_view`)."""
    return await delete_topic_view(request, site.admin(), functools.partial(topics_view, site=site))


def routes(site: Site) -> list[BaseRoute]:
    """The topic pages' routes, bound to ``site``."""
    topics = functools.partial(topics_view, site=site)
    return [
        Route("/topics", topics, methods=["GET", "POST"]),
        Route("/topics/{topic}", functools.partial(topic_detail_view, site=site)),
        Route("/topics/{topic}/delete", functools.partial(topic_delete_view, site=site), methods=["POST"]),
    ]
