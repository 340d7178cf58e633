"""The tidemq web dashboard: cluster, topics, consumer groups (lag over time), message search, test
sends and offset resets, all read through :class:`~tidemq.admin.AsyncAdminClient` (so it works against
RocketMQ too). ``tidemq dashboard --namesrv ADDR`` or ``tidemq serve --dashboard-port PORT``.
"""

from tidemq.admin.dashboard.app import LagRecorder, create_app
from tidemq.admin.dashboard.server import DashboardServer

__all__ = ["DashboardServer", "LagRecorder", "create_app"]
