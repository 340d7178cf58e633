"""The v5 clients the proxy knows: their settings and Telemetry streams.

Mirrors RocketMQ 5's ``GrpcChannelManager`` / ``GrpcClientSettingsManager``: a client's settings
are kept for the life of its Telemetry stream (never forgotten while it is open, so a
ReceiveMessage never fails for want of them: rocketmq-clients #745 / #649), and commands for the
client (orphaned transaction checks) are queued on that stream.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ClientState:
    """One v5 client (by ``x-mq-client-id``)."""

    client_id: str
    namespace: str = ""
    remote_addr: str = ""
    settings: Any = None
    """The merged settings last answered on Telemetry (None before the first)."""
    client_type: int = 0
    group: str = ""
    """The stored consumer group name (consumers)."""
    topics: set[str] = field(default_factory=set)
    """Stored topic names: publishing topics (producers) or subscribed ones (consumers)."""
    subscriptions: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Consumers: stored topic -> (expression type ``TAG`` / ``SQL92``, expression)."""
    outbox: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    """``TelemetryCommand`` s to push on the client's Telemetry stream."""
    streams: int = 0
    """Open Telemetry streams (one per endpoint)."""


class ClientRegistry:
    """Client id -> :class:`ClientState`."""

    def __init__(self) -> None:
        self.clients: dict[str, ClientState] = {}

    def get(self, client_id: str, namespace: str = "", remote_addr: str = "") -> ClientState:
        """The client's state (made at first sight)."""
        state = self.clients.get(client_id)
        if state is None:
            state = ClientState(client_id, namespace, remote_addr)
            self.clients[client_id] = state
        return state

    def remove(self, client_id: str) -> ClientState | None:
        """Forget ``client_id``; its state, or None when unknown."""
        return self.clients.pop(client_id, None)

    def producers_of(self, topic: str) -> list[ClientState]:
        """Producers with an open Telemetry stream publishing ``topic`` (stored name)."""
        return [
            c for c in self.clients.values() if c.client_type == 1 and c.streams > 0 and topic in c.topics
        ]
