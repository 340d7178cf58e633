"""Producers known to the broker, by group. Mirrors RocketMQ's ``ProducerManager``.

Heartbeats register ``(producer group, channel)``; UNREGISTER_CLIENT, a closed connection or 120 s
of silence remove it. The broker only needs this for GET_PRODUCER_CONNECTION_LIST and (for
transactions) to find a producer channel to ask; tidemq keeps it small.
"""

from __future__ import annotations

import logging
import threading

from tidemq.broker.consumer_manager import ClientChannel, ClientChannelInfo

log = logging.getLogger(__name__)

#: Java's ``channelExpiredTimeout`` default, milliseconds.
CHANNEL_EXPIRED_TIMEOUT_MS = 120_000


class ProducerManager:
    """Table ``group -> {remote_addr: ClientChannelInfo}``. Mirrors ``ProducerManager``.

    Thread-safe. Times are milliseconds since the epoch, passed in by the caller.
    """

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, ClientChannelInfo]] = {}
        self._mutex = threading.Lock()

    def register_producer(self, group: str, client_channel_info: ClientChannelInfo) -> None:
        """Add or refresh ``(group, channel)``; refreshing updates ``last_update_timestamp``."""
        with self._mutex:
            channels = self._groups.setdefault(group, {})
            key = client_channel_info.channel.remote_addr
            old = channels.get(key)
            if old is None:
                channels[key] = client_channel_info
                log.info("new producer connected, group: %s %s", group, client_channel_info.client_id)
            else:
                old.last_update_timestamp = client_channel_info.last_update_timestamp

    def unregister_producer(self, group: str, client_channel_info: ClientChannelInfo) -> None:
        """Remove ``(group, channel)`` if present (UNREGISTER_CLIENT with a producerGroup)."""
        with self._mutex:
            channels = self._groups.get(group)
            if channels is None:
                return
            if channels.pop(client_channel_info.channel.remote_addr, None) is not None:
                log.info("unregister a producer %s from group %s", client_channel_info.client_id, group)
            if not channels:
                del self._groups[group]

    def get_group_channel_table(self) -> dict[str, dict[str, ClientChannelInfo]]:
        """A snapshot copy ``group -> {remote_addr: ClientChannelInfo}``."""
        with self._mutex:
            return {g: dict(c) for g, c in self._groups.items()}

    def get_producer_channels(self, group: str) -> list[ClientChannelInfo]:
        """The channels registered for ``group`` (empty list when none)."""
        with self._mutex:
            return list(self._groups.get(group, {}).values())

    def find_channel(self, client_id: str) -> ClientChannel | None:
        """The live channel of the producer with ``client_id`` (any group), or None. Mirrors
        ``ProducerManager.findChannel`` (request-reply pushes replies there)."""
        with self._mutex:
            for channels in self._groups.values():
                for info in channels.values():
                    if info.client_id == client_id and info.channel.is_active:
                        return info.channel
        return None

    def do_channel_close_event(self, channel: ClientChannel | str) -> list[str]:
        """Forget a closed channel (object or ``"ip:port"``) in every group; returns the groups it left."""
        addr = channel if isinstance(channel, str) else channel.remote_addr
        left: list[str] = []
        with self._mutex:
            for group in list(self._groups):
                channels = self._groups[group]
                if channels.pop(addr, None) is not None:
                    left.append(group)
                    log.info("producer channel %s closed, removed from group %s", addr, group)
                if not channels:
                    del self._groups[group]
        return left

    def scan_not_active_channel(
        self, now_ms: int, expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS
    ) -> list[ClientChannelInfo]:
        """Drop channels silent for more than ``expired_timeout_ms``; returns the dropped ones.

        The caller closes them. Mirrors ``ProducerManager.scanNotActiveChannel``.
        """
        removed: list[ClientChannelInfo] = []
        with self._mutex:
            for group in list(self._groups):
                channels = self._groups[group]
                for addr, info in list(channels.items()):
                    if now_ms - info.last_update_timestamp > expired_timeout_ms:
                        del channels[addr]
                        removed.append(info)
                        log.warning("producer channel expired, group %s %s (%s)", group, info.client_id, addr)
                if not channels:
                    del self._groups[group]
        return removed
