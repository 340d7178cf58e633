"""Cluster mode: one remoting connection per v5 consumer to each broker, for its group membership.

A broker keeps a consumer group's members by connection (``ConsumerGroupInfo.channelInfoTable``), so
the v5 consumers behind ``tidemq proxy`` cannot share the proxy's connection to a broker (they would be
one member, the last heartbeat's). :class:`MemberConnections` gives each v5 consumer client its own
:class:`~tidemq.remoting.RemotingClient` (one TCP connection per broker it consumes from) and sends its
HEART_BEAT there: each broker lists it (``tidemq admin consumerConnection``: client id, the proxy's
address and that connection's port), counts its subscriptions (``consumerProgress``, queries by topic)
and gives its id to the group's 4.x members for their rebalance, as the broker in front of
``tidemq serve --grpc-port`` does. POP, acks and the rest still go over the proxy's shared connection.

When the client leaves (NotifyClientTermination, or its last Telemetry stream closes) its connections
close and each broker drops the member at once (and tells the group); a client that vanishes is dropped
by the broker after 120 s without a heartbeat; a proxy that stops closes them all.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from tidemq.protocol.command import RemotingCommand
from tidemq.remoting import RemotingClient

__all__ = ["MemberConnections"]

log = logging.getLogger(__name__)


class MemberConnections:
    """The per-client connections of the v5 consumers behind a cluster-mode proxy.

    Args:
        rpc_hook: signs requests when the brokers check ACL (the proxy's hook), or None.
    """

    def __init__(self, rpc_hook: Any = None) -> None:
        self.rpc_hook = rpc_hook
        self.clients: dict[str, RemotingClient] = {}
        """v5 client id -> its :class:`~tidemq.remoting.RemotingClient`."""
        self._closing: set[asyncio.Task[None]] = set()

    def _client(self, client_id: str) -> RemotingClient:
        remoting = self.clients.get(client_id)
        if remoting is None:
            remoting = self.clients[client_id] = RemotingClient()
            if self.rpc_hook is not None:
                remoting.register_rpc_hook(self.rpc_hook)
        return remoting

    async def invoke(
        self, client_id: str, addr: str, request: RemotingCommand, timeout: float
    ) -> RemotingCommand:
        """Send ``request`` (a consumer's HEART_BEAT) to broker ``addr`` over ``client_id``'s own
        connection (opened at first use).

        Raises:
            TideMQError / OSError: the broker cannot be reached (as ``RemotingClient.invoke``).
        """
        return await self._client(client_id).invoke(addr, request, timeout)

    def close(self, client_id: str) -> None:
        """Close ``client_id``'s connections (the brokers drop it from its group); no-op when it has none."""
        remoting = self.clients.pop(client_id, None)
        if remoting is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (the proxy is gone): its sockets go with the process
            return
        task = loop.create_task(remoting.close(), name=f"close-member-{client_id}")
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close_all(self) -> None:
        """Close every client's connections (the proxy stops)."""
        clients = list(self.clients.values())
        self.clients.clear()
        await asyncio.gather(*(c.close() for c in clients), *self._closing, return_exceptions=True)
