"""The dashboard's consumer group pages and the lag history behind their chart.

* ``GET /groups``: consumer groups with members online, total lag, topics, enabled or not;
* ``GET /groups/{group}``: members, subscriptions, per-queue lag, the lag chart, its POP figures
  (:mod:`~tidemq.admin.dashboard.pop_page`) and the reset-by-time form;
* ``POST /groups/{group}/reset``: reset the group's offsets of a topic to a time (RESET_OFFSET);
* ``GET /api/groups/{group}/lag``: the lag history as JSON (the chart's data).

The history is kept in memory by :class:`LagRecorder`: a background task samples every group's
total lag every ``sample_interval`` seconds (and each group page view adds a sample).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.dashboard.pop_page import group_pop_rows
from tidemq.admin.dashboard.site import Site
from tidemq.admin.dashboard.topic_ops import group_reset_topics
from tidemq.errors import ConsumerNotOnlineError, TideMQError
from tidemq.protocol.topic import is_system_group

__all__ = [
    "LagRecorder",
    "group_detail_view",
    "group_lag_api",
    "group_reset_view",
    "groups_view",
    "routes",
]

log = logging.getLogger(__name__)


class LagRecorder:
    """Total lag per consumer group over time, in memory (``maxlen`` points per group).

    Args:
        admin: the client to read consume stats with.
        interval: seconds between samples of every group (0 = no background sampling).
        maxlen: points kept per group (720 x 5 s = 1 hour).
    """

    def __init__(self, admin: AsyncAdminClient, interval: float = 5.0, maxlen: int = 720) -> None:
        self.admin = admin
        self.interval = interval
        self.history: dict[str, deque[tuple[float, int]]] = {}
        self.maxlen = maxlen

    def record(self, group: str, lag: int, now: float | None = None) -> None:
        """Add one point (``now`` in epoch seconds)."""
        points = self.history.setdefault(group, deque(maxlen=self.maxlen))
        points.append((time.time() if now is None else now, lag))

    def series(self, group: str) -> dict[str, list[float]]:
        """``{"t": [epoch s...], "lag": [...]}`` of ``group``."""
        points = list(self.history.get(group, ()))
        return {"t": [p[0] for p in points], "lag": [float(p[1]) for p in points]}

    async def sample_group(self, group: str) -> int:
        """Read ``group``'s total lag now and record it."""
        stats = await self.admin.examine_consume_stats(group)
        lag = stats.compute_total_diff()
        self.record(group, lag)
        return lag

    async def run(self) -> None:
        """Sample every non-system group with offsets, every ``interval`` seconds, until cancelled."""
        while True:
            try:
                for group in await self.admin.subscription_groups():
                    if not is_system_group(group):
                        stats = await self.admin.examine_consume_stats(group)
                        if stats.offset_table:
                            self.record(group, stats.compute_total_diff())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the cluster may be down for a while: keep trying
                log.debug("lag sampling failed: %s", exc)
            await asyncio.sleep(self.interval)


async def groups_view(request: Request, site: Site) -> Response:
    """``GET /groups``: every non-system group (502 with the rows so far when a broker fails)."""
    admin, rows = site.admin(), []
    try:
        for g, cfg in (await admin.subscription_groups()).items():
            if is_system_group(g):
                continue
            cs = await admin.examine_consume_stats(g)
            try:
                online = len((await admin.examine_consumer_connection_info(g)).connection_set)
            except ConsumerNotOnlineError:
                online = 0
            rows.append(
                {
                    "group": g,
                    "online": online,
                    "lag": cs.compute_total_diff(),
                    "topics": sorted({mq.topic for mq in cs.offset_table}),
                    "enabled": cfg.consume_enable,
                }
            )
    except (TideMQError, TimeoutError) as exc:
        return site.failed(request, "groups.html", exc, rows=rows)
    return site.page(request, "groups.html", rows=rows)


def _no_group(group: str) -> dict[str, Any]:
    """The group page's context when there is nothing to show of ``group``."""
    return {
        "group": group,
        "progress": [],
        "members": [],
        "subs": [],
        "total": 0,
        "topics": [],
        "result": None,
    }


async def group_detail_view(
    request: Request, site: Site, result: Any = None, status: int = 200, error: str | None = None
) -> Response:
    """``GET /groups/{group}`` (also the answer of a reset, with its ``result`` or ``error``).

    404 when the group has no offsets, no members and no settings; 502 when a broker cannot be asked.
    Each view records the group's total lag in the history.
    """
    admin, group = site.admin(), request.path_params["group"]
    try:
        progress = await admin.consumer_progress(group)
        try:
            cc = await admin.examine_consumer_connection_info(group)
            members = cc.connection_set
            subs = sorted(cc.subscription_table.items())
        except ConsumerNotOnlineError:
            members, subs = [], []
    except (TideMQError, TimeoutError) as exc:
        return site.failed(request, "group.html", exc, **_no_group(group))
    if not progress and not members and group not in await admin.subscription_groups():
        error = f"consumer group {group} does not exist (no offsets, no members, no settings)"
        return site.page(request, "group.html", 404, **_no_group(group), error=error)
    total = sum(r.lag for r in progress)
    site.recorder().record(group, total)
    return site.page(
        request,
        "group.html",
        status,
        group=group,
        progress=progress,
        members=members,
        subs=subs,
        total=total,
        topics=group_reset_topics(sorted({r.mq.topic for r in progress})),
        result=result,
        error=error,
        pop=await group_pop_rows(admin, group),  # its POP figures, if it pops (pop_page.py)
    )


async def group_reset_view(request: Request, site: Site) -> Response:
    """``POST /groups/{group}/reset`` (form ``topic``, ``when`` as ``YYYY-MM-DDTHH:MM`` local time,
    empty = the end): the group page with the new offsets, or with the error (400 bad time, 502)."""
    group = request.path_params["group"]
    form = await request.form()
    topic = str(form.get("topic") or "")
    when = str(form.get("when") or "")
    try:
        ts = int(time.mktime(time.strptime(when, "%Y-%m-%dT%H:%M")) * 1000) if when else -1
        table = await site.admin().reset_offset_by_timestamp(topic, group, ts)
    except ValueError:
        error = f"bad time {when!r}: use the picker (YYYY-MM-DDTHH:MM)"
        return await group_detail_view(request, site, status=400, error=error)
    except (TideMQError, TimeoutError) as exc:
        return await group_detail_view(request, site, status=502, error=f"reset failed: {exc}")
    result = {
        "topic": topic,
        "when": when or "the end",
        "offsets": [(q.broker_name, q.queue_id, o) for q, o in table.items()],
    }
    return await group_detail_view(request, site, result=result)


async def group_lag_api(request: Request, site: Site) -> Response:
    """``GET /api/groups/{group}/lag``: :meth:`LagRecorder.series` as JSON."""
    return JSONResponse(site.recorder().series(request.path_params["group"]))


def routes(site: Site) -> list[BaseRoute]:
    """The group pages' routes, bound to ``site``."""
    return [
        Route("/groups", functools.partial(groups_view, site=site)),
        Route("/groups/{group}", functools.partial(group_detail_view, site=site)),
        Route("/groups/{group}/reset", functools.partial(group_reset_view, site=site), methods=["POST"]),
        Route("/api/groups/{group}/lag", functools.partial(group_lag_api, site=site)),
    ]
