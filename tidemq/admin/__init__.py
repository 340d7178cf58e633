"""tidemq.admin: administration of a tidemq or RocketMQ cluster (RocketMQ's ``DefaultMQAdminExt``).

:class:`AdminClient` (blocking) and :class:`AsyncAdminClient` (asyncio); the ``tidemq admin`` click
commands live in :mod:`tidemq.admin.cli` (``admin_group``).
"""

from tidemq.admin.client import AdminClient, AsyncAdminClient, QueueProgress

__all__ = ["AdminClient", "AsyncAdminClient", "QueueProgress"]
