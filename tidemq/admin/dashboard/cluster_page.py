"""The dashboard's front page ``/``: clusters and brokers (version, in/out TPS, today's counts, disk),
from :meth:`AsyncAdminClient.cluster_list <tidemq.admin.client.AsyncAdminClient.cluster_list>`."""

from __future__ import annotations

import functools

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tidemq.admin.dashboard.site import Site
from tidemq.errors import TideMQError

__all__ = ["cluster_view", "routes"]


async def cluster_view(request: Request, site: Site) -> Response:
    """``GET /``: one row per broker (502 with the error when the cluster cannot be asked)."""
    try:
        rows = await site.admin().cluster_list()
    except (TideMQError, TimeoutError) as exc:
        return site.failed(request, "cluster.html", exc, rows=[])
    return site.page(request, "cluster.html", rows=rows)


def routes(site: Site) -> list[BaseRoute]:
    """This page's routes, bound to ``site``."""
    return [Route("/", functools.partial(cluster_view, site=site))]
