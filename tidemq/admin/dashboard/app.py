"""The dashboard's Starlette application: server-rendered Jinja2 pages over :class:`AsyncAdminClient`.

Everything is read through the admin client (name server + broker request codes), so the dashboard
works against a RocketMQ 4.x cluster as well as a tidemq one. Pages:

==========================  ==============================================================
``/``                       clusters and brokers: version, in/out TPS, today's counts, disk
``/topics``                 topics with queue count, stored messages and TPS, a page at a time
                            (``?q=`` filter, ``page``, ``size``); create a topic
``/topics/{topic}/delete``  delete a topic (POST, after the browser's confirmation)
``/topics/{topic}``         route, per-queue min/max offset, consuming groups with their lag
``/groups``                 consumer groups with members online and total lag
``/groups/{group}``         members, per-queue lag, a lag chart over time, reset by time
``/messages``               a topic's newest messages, or search by key, message id, queue + offset
``/send``                   send a test message
``/transactions``           pending half messages per producer group and topic, oldest's age
``/pop``                    POP groups: in flight, popped, acked, redelivered, dead-lettered
``/api/groups/{g}/lag``     the lag history as JSON (the chart's data)
==========================  ==============================================================

The lag history is kept in memory by :class:`LagRecorder`: a background task samples every
group's total lag every ``sample_interval`` seconds (and each group page view adds a sample).
The chart is drawn by uPlot, served from ``/static`` (no CDN: works offline).

Each page's routes live in a module of their own (``cluster_page``, ``topics_page``, ``groups_page``,
``messages_page``, ``transactions_page``, ``pop_page``), bound to one shared
:class:`~tidemq.admin.dashboard.site.Site`; :func:`create_app` only assembles them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.dashboard.cluster_page import routes as cluster_routes
from tidemq.admin.dashboard.groups_page import LagRecorder
from tidemq.admin.dashboard.groups_page import routes as groups_routes
from tidemq.admin.dashboard.messages_page import routes as messages_routes
from tidemq.admin.dashboard.pop_page import routes as pop_routes
from tidemq.admin.dashboard.site import HERE, Site
from tidemq.admin.dashboard.topics_page import routes as topics_routes
from tidemq.admin.dashboard.transactions_page import routes as transactions_routes

__all__ = ["LagRecorder", "create_app"]


def create_app(
    namesrv_addr: str,
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
    sample_interval: float = 5.0,
) -> Starlette:
    """The dashboard ASGI app for the cluster behind ``namesrv_addr``.

    Args:
        namesrv_addr: ``host:port[;host:port]`` of the name server(s).
        access_key / secret_key: ACL credentials of an admin account (both or neither).
        sample_interval: seconds between lag samples (0 disables background sampling).
    """
    site = Site(namesrv_addr)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        admin = AsyncAdminClient(namesrv_addr, access_key=access_key, secret_key=secret_key)
        recorder = LagRecorder(admin, sample_interval)
        site.state.update(admin=admin, recorder=recorder)
        task = asyncio.create_task(recorder.run()) if sample_interval > 0 else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await admin.close()

    routes: list[BaseRoute] = []
    pages = (cluster_routes, topics_routes, groups_routes, messages_routes, transactions_routes, pop_routes)
    for page_routes in pages:
        routes.extend(page_routes(site))
    routes.append(Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"))
    return Starlette(routes=routes, lifespan=lifespan)
