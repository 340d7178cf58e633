"""tidemq.admin: administration of a tidemq or RocketMQ cluster (RocketMQ's ``DefaultMQAdminExt``).

:class:`AsyncAdminClient` (asyncio) and :class:`AdminClient` (blocking) hold the operations, split
by family over ``core`` (transport, routes, topics, offsets), ``ops_broker`` (runtime info, stats,
configs, KV), ``ops_group`` (topics and groups, reset / clone offsets, running info) and
``ops_message`` (lookups, reads, test sends). The ``tidemq admin`` verbs live in :mod:`tidemq.admin.cli`
(``admin_group``) and the ``cli_*`` modules; the web dashboard in :mod:`tidemq.admin.dashboard`.
"""

from tidemq.admin.client import AdminClient, AsyncAdminClient, QueueProgress

__all__ = ["AdminClient", "AsyncAdminClient", "QueueProgress"]
