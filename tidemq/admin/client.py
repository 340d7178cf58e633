"""AdminClient: what RocketMQ's ``DefaultMQAdminExt`` (mqadmin) does, over the remoting protocol.

:class:`AsyncAdminClient` is the asyncio core; :class:`AdminClient` is the blocking face running that
core on a :class:`~tidemq.remoting.loop.LoopThread`. Both take the name-server address(es)
(``"host:port"``, several separated by ``;``) and resolve brokers through it: topic routes
(GET_ROUTEINFO_BY_TOPIC) and the cluster table (GET_BROKER_CLUSTER_INFO). Per-queue requests go to
the master of the queue's broker. Timeouts are seconds. Errors: ``NoRouteError`` (unknown topic),
``BrokerError`` subclasses (code, remark and broker address of the refusal), ``ClientError`` (bad
arguments, unknown broker), and the transport's ``RemotingError`` family.

Example::

    with AdminClient("127.0.0.1:9876") as admin:
        admin.create_topic("Orders", 8)
        stats = admin.examine_consume_stats("billing", "Orders")
        print(stats.compute_total_diff())
"""

from __future__ import annotations

from typing import Any

from tidemq.admin.blocking import BlockingMessages, BlockingOffsets, BlockingTopics
from tidemq.admin.core import AdminCore, QueueProgress
from tidemq.admin.ops_message import MessageOps
from tidemq.admin.pop_status import PopGroupRow, pop_status
from tidemq.remoting.loop import LoopThread

__all__ = ["AdminClient", "AdminCore", "AsyncAdminClient", "QueueProgress"]


class AsyncAdminClient(MessageOps):
    """Administration over the name server and brokers. Mirrors ``DefaultMQAdminExt``.

    Args:
        namesrv_addr: ``"host:port"`` (several separated by ``;``; tried in order).
        timeout: default seconds per request (3.0, RocketMQ's ``timeoutMillis``).
        remoting: a shared transport; by default the client owns one and closes it in :meth:`close`.
        access_key / secret_key: ACL credentials (both or neither) for an ACL broker.
    """

    async def pop_status(
        self, group: str | None = None, topic: str | None = None, broker_addrs: list[str] | None = None
    ) -> list[PopGroupRow]:
        """POP groups' in-flight count, pops, acks, redeliveries and dead letters per (group, topic) and
        broker, from each master's GET_BROKER_RUNTIME_INFO ``popGroupStats`` (tidemq's own key; see
        :func:`tidemq.admin.pop_status.pop_status`). Raises TideMQError when a broker cannot be asked.
        """
        return await pop_status(self, group, topic, broker_addrs)


class AdminClient(BlockingTopics, BlockingOffsets, BlockingMessages):
    """Blocking face of :class:`AsyncAdminClient` (same methods, same arguments), on a LoopThread.

    Args:
        namesrv_addr: ``"host:port"`` of the name server(s).
        timeout: default seconds per request.
        loop_thread: run on this loop thread (not stopped by :meth:`close`); default: a private one.
        access_key / secret_key: ACL credentials (both or neither).

    The wrappers are grouped by responsibility in :mod:`tidemq.admin.blocking` (topics and brokers,
    offsets and groups, messages). Every coroutine method of :class:`AsyncAdminClient` not wrapped
    there is reachable through :meth:`call` (``admin.call("stats_all")``).
    """

    def __init__(
        self,
        namesrv_addr: str,
        *,
        timeout: float = 3.0,
        loop_thread: LoopThread | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        self.core = AsyncAdminClient(
            namesrv_addr, timeout=timeout, access_key=access_key, secret_key=secret_key
        )
        self._own_loop = loop_thread is None
        self.loop_thread = loop_thread if loop_thread is not None else LoopThread("tidemq-admin")
        self._run_timeout = max(60.0, timeout * 10)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run ``AsyncAdminClient.<method>(*args, **kwargs)`` and return its result.

        Raises:
            AttributeError: no such method.
        """
        return self._run(getattr(self.core, method)(*args, **kwargs))

    def close(self) -> None:
        """Close connections and stop the private loop thread. Idempotent."""
        if self.loop_thread.is_running:
            self._run(self.core.close())
            if self._own_loop:
                self.loop_thread.stop()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
