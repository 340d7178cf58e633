"""Namespaces and resource names. Mirrors RocketMQ's ``NamespaceUtil`` as the proxy uses it.

A v5 client names a topic or group as ``Resource{resource_namespace, name}``; the broker stores it
as ``<namespace>%<name>`` (``%RETRY%<namespace>%<group>`` for a retry topic). Node 1.0.8 leaves
``resource_namespace`` empty on QueryRoute and on every group (rocketmq5.md §1), so an empty field
takes the namespace from the ``x-mq-namespace`` header.
"""

from __future__ import annotations

from typing import Any, Final

from tidemq.proxy.pb import d

NAMESPACE_SEPARATOR: Final = "%"
_SYSTEM_PREFIXES: Final = ("%RETRY%", "%DLQ%")


def wrap(namespace: str, name: str) -> str:
    """``name`` inside ``namespace`` as the broker stores it (``"ns%name"``; ``name`` when no namespace).

    A name already wrapped, or a ``%RETRY%``/``%DLQ%`` name, is wrapped inside its prefix.
    """
    if not namespace:
        return name
    for prefix in _SYSTEM_PREFIXES:
        if name.startswith(prefix):
            return prefix + wrap(namespace, name[len(prefix) :])
    if name.startswith(namespace + NAMESPACE_SEPARATOR):
        return name
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}"


def unwrap(namespace: str, stored: str) -> str:
    """The client's name for a stored name in ``namespace`` (``"ns%T"`` -> ``"T"``;
    ``"%RETRY%ns%G"`` -> ``"%RETRY%G"``); unchanged when it is not inside ``namespace``."""
    if not namespace:
        return stored
    for prefix in _SYSTEM_PREFIXES:
        if stored.startswith(prefix):
            return prefix + unwrap(namespace, stored[len(prefix) :])
    head = namespace + NAMESPACE_SEPARATOR
    return stored[len(head) :] if stored.startswith(head) else stored


def resource_name(resource: Any, header_namespace: str) -> str:
    """The stored name of a ``Resource``: its namespace, else the header's, wrapped around its name."""
    return wrap(resource.resource_namespace or header_namespace, resource.name)


def resource_of(namespace: str, stored: str) -> Any:
    """The ``Resource`` a client in ``namespace`` knows a stored name by."""
    return d.Resource(resource_namespace=namespace, name=unwrap(namespace, stored))
