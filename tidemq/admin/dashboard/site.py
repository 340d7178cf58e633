"""What every dashboard page shares: the admin client, the lag recorder and the template renderer.

:func:`~tidemq.admin.dashboard.app.create_app` makes one :class:`Site` and hands it to each page
module's ``routes(site)``; the app's lifespan fills in the client and the recorder.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.dashboard.topic_ops import thousands
from tidemq.errors import NoRouteError

if TYPE_CHECKING:
    from tidemq.admin.dashboard.groups_page import LagRecorder

__all__ = ["HERE", "Site", "fmt_ms"]

HERE = Path(__file__).parent
"""The dashboard package's directory (``templates/``, ``static/``)."""


def fmt_ms(ts: int) -> str:
    """Epoch milliseconds as local ``YYYY-MM-DD HH:MM:SS`` (the Jinja filter ``ms``); ``-`` for 0 or less."""
    if ts <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts / 1000))


@dataclass
class Site:
    """The app's shared state.

    Attributes:
        namesrv_addr: ``host:port[;host:port]`` shown on every page.
        templates: the Jinja2 templates, with the filters ``ms`` and ``n`` installed.
        state: ``{"admin": AsyncAdminClient, "recorder": LagRecorder}`` once the app has started.
    """

    namesrv_addr: str
    templates: Jinja2Templates = field(
        default_factory=lambda: Jinja2Templates(directory=str(HERE / "templates"))
    )
    state: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.templates.env.filters["ms"] = fmt_ms
        self.templates.env.filters["n"] = thousands  # 12,345

    def admin(self) -> AsyncAdminClient:
        """The app's admin client (KeyError before the lifespan has started)."""
        a: AsyncAdminClient = self.state["admin"]
        return a

    def recorder(self) -> LagRecorder:
        """The app's lag recorder (KeyError before the lifespan has started)."""
        r: LagRecorder = self.state["recorder"]
        return r

    def page(self, request: Request, name: str, status: int = 200, **ctx: Any) -> Response:
        """Template ``name`` rendered with ``ctx`` (plus ``namesrv``; ``error`` None unless given)."""
        ctx.setdefault("error", None)
        ctx["namesrv"] = self.namesrv_addr
        return self.templates.TemplateResponse(request, name, ctx, status_code=status)

    def failed(self, request: Request, name: str, exc: BaseException, **ctx: Any) -> Response:
        """Template ``name`` with ``exc`` as its error: 404 for an unknown topic, 502 otherwise."""
        status = 404 if isinstance(exc, NoRouteError) else 502
        return self.page(request, name, status, error=str(exc), **ctx)
