"""The dashboard's POP consumer groups (RocketMQ 5's SimpleConsumer and the gRPC clients consume by POP).

* ``GET /pop`` (``?group=G`` for one group): per group, topic and broker, the messages in flight
  (popped, not acked yet), popped, acked, redelivered (visible again after their invisible time)
  and dead-lettered, from each master's ``popGroupStats`` (:mod:`tidemq.admin.pop_status`);
* :func:`group_pop_rows`: the same rows of one group, for the POP section of ``/groups/{group}``.

Kept apart from ``app.py``, which only registers these (:func:`routes`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.dashboard.site import Site
from tidemq.admin.pop_status import PopGroupRow
from tidemq.errors import TideMQError

__all__ = ["group_pop_rows", "pop_groups_view", "routes"]

log = logging.getLogger(__name__)


async def pop_groups_view(
    request: Request,
    *,
    admin: Callable[[], AsyncAdminClient],
    page: Callable[..., Response],
) -> Response:
    """``GET /pop``: the POP groups table (502 with the error when a broker cannot be asked).

    ``admin`` returns the app's client (set in its lifespan); ``page(request, template, status,
    **context)`` renders a template.
    """
    group = request.query_params.get("group", "").strip() or None
    try:
        rows = await admin().pop_status(group)
    except (TideMQError, TimeoutError) as exc:
        return page(request, "pop.html", 502, rows=[], group=group, error=str(exc))
    return page(request, "pop.html", rows=rows, group=group)


async def group_pop_rows(admin: AsyncAdminClient, group: str) -> list[PopGroupRow]:
    """``group``'s POP rows over every master; empty when it never popped or a broker cannot be
    asked (the group page shows what it has rather than failing)."""
    try:
        return await admin.pop_status(group)
    except (TideMQError, TimeoutError) as exc:
        log.debug("POP figures of %s: %s", group, exc)
        return []


def routes(site: Site) -> list[BaseRoute]:
    """This page's routes, bound to ``site``."""
    return [Route("/pop", functools.partial(pop_groups_view, admin=site.admin, page=site.page))]
