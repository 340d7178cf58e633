"""The dashboard's ``/transactions``: pending half messages per producer group and topic, with the
oldest one's age (:func:`tidemq.admin.transactions.pending_half_messages`)."""

from __future__ import annotations

import functools

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tidemq.admin.dashboard.site import Site
from tidemq.errors import TideMQError

__all__ = ["routes", "transactions_view"]


async def transactions_view(request: Request, site: Site) -> Response:
    """``GET /transactions`` (502 with the error when a broker cannot be asked)."""
    from tidemq.admin.transactions import pending_half_messages

    try:
        rows = await pending_half_messages(site.admin())
    except (TideMQError, TimeoutError) as exc:
        return site.failed(request, "transactions.html", exc, rows=[])
    return site.page(request, "transactions.html", rows=rows)


def routes(site: Site) -> list[BaseRoute]:
    """This page's routes, bound to ``site``."""
    return [Route("/transactions", functools.partial(transactions_view, site=site))]
