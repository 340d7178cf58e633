"""Per-request context: the client's headers, namespace, id and address. Mirrors ``ProxyContext``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class RequestContext:
    """What a handler knows of the caller.

    Attributes:
        metadata: the gRPC headers, keys lowercase.
        namespace: ``x-mq-namespace`` (``""`` when absent or empty).
        client_id: ``x-mq-client-id`` (``""`` when absent).
        remote_addr: the peer as ``ip:port``; remote_ip without the port.
    """

    metadata: dict[str, str]
    namespace: str
    client_id: str
    remote_addr: str
    remote_ip: str


def peer_addr(peer: str) -> tuple[str, str]:
    """``"ipv4:127.0.0.1:5000"`` -> ``("127.0.0.1:5000", "127.0.0.1")``; IPv6 keeps its brackets."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return peer, peer
    host, _, _port = rest.rpartition(":")
    return rest, host.strip("[]") if kind == "ipv6" else host


def request_context(context: Any) -> RequestContext:
    """The :class:`RequestContext` of a grpc.aio ``ServicerContext``."""
    metadata: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if isinstance(value, str):
            metadata[key.lower()] = value
    addr, ip = peer_addr(context.peer() or "")
    return RequestContext(
        metadata, metadata.get("x-mq-namespace", ""), metadata.get("x-mq-client-id", ""), addr, ip
    )
