"""Consumer groups as the broker sees them: members (channels) and subscriptions.

Mirrors RocketMQ's ``ConsumerManager``, ``ConsumerGroupInfo``, ``ClientChannelInfo``,
``DefaultConsumerIdsChangeListener`` and ``ClientHousekeepingService``. Heartbeats (HEART_BEAT, 34)
upsert a member and merge its subscriptions; when a member joins or leaves, or the group's topic set
changes, every member gets NOTIFY_CONSUMER_IDS_CHANGED (40) so it rebalances at once.

Groups that consume without heartbeats (POP) are kept apart, in the compensation table: each pop
records the group's consume type (``CONSUME_POP``, CLUSTERING) and its subscriptions to the topic and
to the topic's pop retry topic (``compensateBasicConsumerInfo`` / ``compensateSubscribeData``).
Subscription lookups fall back to it; member lookups do not (a pop-only group has no members). A
compensated subscription not refreshed by a pop for ``subscription_expired_timeout`` (10 min) is
dropped with the housekeeping scan (``removeExpireConsumerGroupInfo``).

The tables are plain synchronous state (thread-safe, ``now_ms`` passed in); notifications go through
a listener callable, by default one that schedules ``Broker2Client.notify_consumer_ids_changed`` on
the broker's event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.protocol.body import SubscriptionData
    from tidemq.protocol.command import RemotingCommand

log = logging.getLogger(__name__)

#: Java's ``BrokerConfig.channelExpiredTimeout`` default, milliseconds.
CHANNEL_EXPIRED_TIMEOUT_MS = 120_000
#: Java's ``BrokerConfig.subscriptionExpiredTimeout`` default, milliseconds.
SUBSCRIPTION_EXPIRED_TIMEOUT_MS = 600_000


class ClientChannel(Protocol):
    """What the broker needs from a client connection (``tidemq.remoting`` ``Channel`` fits)."""

    @property
    def remote_addr(self) -> str: ...

    @property
    def is_active(self) -> bool: ...

    async def invoke_oneway(self, request: RemotingCommand) -> None: ...

    def close(self) -> None: ...


def now_millis() -> int:
    """Wall-clock milliseconds since the epoch (RocketMQ's ``System.currentTimeMillis()``)."""
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class ClientChannelInfo:
    """One client connection of a group. Mirrors ``ClientChannelInfo``.

    Attributes:
        channel: the connection (``remote_addr`` identifies it in the tables).
        client_id: the client's id as sent in heartbeats (opaque; e.g. ``"10.0.0.9@1234#DEFAULT"``).
        language: the client's language name from the request (``"JAVA"``, ``"CPP"``...).
        version: the client's MQVersion ordinal from the request (C++ 2.x sends 333).
        last_update_timestamp: milliseconds since the epoch of the last heartbeat.
    """

    channel: ClientChannel
    client_id: str
    language: str = "JAVA"
    version: int = 0
    last_update_timestamp: int = 0


class ConsumerGroupEvent(Enum):
    """What happened to a group. Mirrors ``ConsumerGroupEvent``."""

    CHANGE = "CHANGE"
    UNREGISTER = "UNREGISTER"
    REGISTER = "REGISTER"


#: ``listener(event, group, channels)``; channels are the group's remaining members for CHANGE.
ConsumerIdsChangeListener = Callable[[ConsumerGroupEvent, str, Sequence[ClientChannel]], None]


class ConsumerGroupInfo:
    """Members and subscriptions of one consumer group. Mirrors ``ConsumerGroupInfo``.

    Attributes:
        group_name: the consumer group.
        consume_type / message_model / consume_from_where: as last heartbeated (the enum values of
            ``tidemq.protocol.body``).
        subscription_table: ``topic -> SubscriptionData``.
        channel_info_table: ``remote_addr -> ClientChannelInfo``.
        last_update_timestamp: milliseconds of the last change.
    """

    def __init__(
        self, group_name: str, consume_type: Any, message_model: Any, consume_from_where: Any
    ) -> None:
        self.group_name = group_name
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.subscription_table: dict[str, SubscriptionData] = {}
        self.channel_info_table: dict[str, ClientChannelInfo] = {}
        self.last_update_timestamp = 0

    def find_subscription_data(self, topic: str) -> SubscriptionData | None:
        """The group's subscription to ``topic``, or None."""
        return self.subscription_table.get(topic)

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        """The first member whose client id is ``client_id``, or None."""
        for info in self.channel_info_table.values():
            if info.client_id == client_id:
                return info
        return None

    def get_all_client_ids(self) -> list[str]:
        """Client ids of all members, sorted (the order clients allocate queues in)."""
        return sorted({info.client_id for info in self.channel_info_table.values()})

    def get_all_channels(self) -> list[ClientChannel]:
        """The members' channels."""
        return [info.channel for info in self.channel_info_table.values()]

    def update_channel(
        self,
        info: ClientChannelInfo,
        consume_type: Any,
        message_model: Any,
        consume_from_where: Any,
        now_ms: int,
    ) -> bool:
        """Upsert a member; True when its channel is new to the group. Mirrors ``updateChannel``."""
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        key = info.channel.remote_addr
        old = self.channel_info_table.get(key)
        if old is None or old.channel is not info.channel:
            self.channel_info_table[key] = info
            self.last_update_timestamp = now_ms
            # DEBUG: the heartbeat processor logs the registration once, with model and type
            log.debug("new consumer connected, group: %s %s %s", self.group_name, info.client_id, key)
            return True
        if old.client_id != info.client_id:
            log.warning(
                "consumer channel %s of group %s changed client id %s -> %s",
                key,
                self.group_name,
                old.client_id,
                info.client_id,
            )
            self.channel_info_table[key] = info
            self.last_update_timestamp = now_ms
            return True
        old.last_update_timestamp = info.last_update_timestamp
        old.language = info.language
        old.version = info.version
        self.last_update_timestamp = now_ms
        return False

    def update_subscription(self, subscriptions: Iterable[SubscriptionData], now_ms: int) -> bool:
        """Merge a heartbeat's subscriptions; True when the topic set changed.

        A new topic is added; a known topic is replaced only by a larger ``sub_version``; topics
        absent from ``subscriptions`` are removed. Mirrors ``updateSubscription``.
        """
        updated = False
        new_topics: set[str] = set()
        for sub in subscriptions:
            new_topics.add(sub.topic)
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                updated = True
                log.info("subscription changed, group: %s add %s", self.group_name, sub.topic)
            elif sub.sub_version > old.sub_version:
                self.subscription_table[sub.topic] = sub
        for topic in [t for t in self.subscription_table if t not in new_topics]:
            del self.subscription_table[topic]
            updated = True
            log.warning("subscription changed, group: %s remove topic %s", self.group_name, topic)
        if updated:
            self.last_update_timestamp = now_ms
        return updated

    def unregister_channel(self, info: ClientChannelInfo) -> bool:
        """Remove the member on ``info``'s channel; True when it was there."""
        removed = self.channel_info_table.pop(info.channel.remote_addr, None)
        if removed is not None:
            log.info("unregister a consumer %s from group %s", removed.client_id, self.group_name)
        return removed is not None

    def do_channel_close_event(self, remote_addr: str) -> ClientChannelInfo | None:
        """Remove the member on ``remote_addr``; returns it, or None when it was not a member."""
        removed = self.channel_info_table.pop(remote_addr, None)
        if removed is not None:
            log.warning(
                "consumer channel %s closed, removed from group %s (%s)",
                remote_addr,
                self.group_name,
                removed.client_id,
            )
        return removed


class ConsumerManager:
    """All consumer groups of the broker. Mirrors RocketMQ's ``ConsumerManager``.

    Args:
        broker: the owning ``Broker`` (used for notifications and ``config.channel_expired_timeout``);
            may be None in unit tests.
        listener: called as ``listener(event, group, channels)`` on group changes; by default
            CHANGE sends NOTIFY_CONSUMER_IDS_CHANGED to each channel through ``broker.broker2client``.
        channel_expired_timeout_ms: silence after which a member is dropped when there is no broker
            config (default 120 000).

    Thread-safe: one internal lock guards the tables; the listener runs outside it.
    """

    def __init__(
        self,
        broker: Broker | None = None,
        *,
        listener: ConsumerIdsChangeListener | None = None,
        channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS,
    ) -> None:
        self.broker = broker
        self.listener: ConsumerIdsChangeListener = listener or self._default_listener
        self._channel_expired_timeout_ms = channel_expired_timeout_ms
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        self.consumer_compensation_table: dict[str, ConsumerGroupInfo] = {}
        """Groups seen only through their pops (``consumerCompensationTable``): no members."""
        self._mutex = threading.RLock()

    @property
    def channel_expired_timeout_ms(self) -> int:
        """``broker.config.channel_expired_timeout`` when available, else the constructor value."""
        if self.broker is not None:
            value = getattr(self.broker.config, "channel_expired_timeout", None)
            if isinstance(value, int):
                return value
        return self._channel_expired_timeout_ms

    def _default_listener(
        self, event: ConsumerGroupEvent, group: str, channels: Sequence[ClientChannel]
    ) -> None:
        if event is not ConsumerGroupEvent.CHANGE or self.broker is None:
            return
        if not getattr(self.broker.config, "notify_consumer_ids_changed_enable", True):
            return
        b2c = self.broker.broker2client
        for channel in channels:
            b2c.notify_consumer_ids_changed_soon(channel, group)

    def _fire(self, event: ConsumerGroupEvent, group: str, channels: Sequence[ClientChannel]) -> None:
        try:
            self.listener(event, group, channels)
        except Exception:  # a listener bug must not break heartbeats
            log.exception("consumer ids change listener failed for group %s", group)

    def get_consumer_group_info(
        self, group: str, from_compensation_table: bool = False
    ) -> ConsumerGroupInfo | None:
        """The group's state, or None when no member is registered (then, with
        ``from_compensation_table``, what its pops recorded, if any)."""
        with self._mutex:
            info = self.consumer_table.get(group)
            if info is None and from_compensation_table:
                info = self.consumer_compensation_table.get(group)
            return info

    def find_subscription_data(
        self, group: str, topic: str, from_compensation_table: bool = True
    ) -> SubscriptionData | None:
        """The subscription of ``group`` to ``topic`` from its members' heartbeats, else (with
        ``from_compensation_table``, the default) from its pops; None when neither knows it."""
        with self._mutex:
            info = self.consumer_table.get(group)
            found = info.find_subscription_data(topic) if info is not None else None
            if found is None and from_compensation_table:
                info = self.consumer_compensation_table.get(group)
                found = info.find_subscription_data(topic) if info is not None else None
            return found

    def compensate_basic_consumer_info(self, group: str, consume_type: Any, message_model: Any) -> None:
        """Record how ``group`` consumes without a heartbeat (a pop: ``CONSUME_POP``, CLUSTERING).
        Mirrors ``compensateBasicConsumerInfo``."""
        with self._mutex:
            info = self.consumer_compensation_table.get(group)
            if info is None:
                info = self.consumer_compensation_table[group] = ConsumerGroupInfo(group, None, None, None)
            info.consume_type = consume_type
            info.message_model = message_model

    def compensate_subscribe_data(self, group: str, topic: str, subscription: SubscriptionData) -> None:
        """Record ``group``'s subscription to ``topic`` seen in a pop (its ``sub_version``, ms, is
        when; it expires ``subscription_expired_timeout`` later). Mirrors ``compensateSubscribeData``."""
        with self._mutex:
            info = self.consumer_compensation_table.get(group)
            if info is None:
                info = self.consumer_compensation_table[group] = ConsumerGroupInfo(group, None, None, None)
            info.subscription_table[topic] = subscription

    @property
    def subscription_expired_timeout_ms(self) -> int:
        """``broker.config.subscription_expired_timeout`` when available, else 600 000."""
        value = getattr(getattr(self.broker, "config", None), "subscription_expired_timeout", None)
        return value if isinstance(value, int) else SUBSCRIPTION_EXPIRED_TIMEOUT_MS

    def remove_expire_consumer_group_info(self, now_ms: int) -> None:
        """Drop compensated subscriptions older than ``subscription_expired_timeout``, and a group
        once its last one goes. Mirrors ``removeExpireConsumerGroupInfo``."""
        timeout = self.subscription_expired_timeout_ms
        with self._mutex:
            for group, info in list(self.consumer_compensation_table.items()):
                table = info.subscription_table
                expired = [t for t, sub in table.items() if now_ms - int(sub.sub_version) > timeout]
                for topic in expired:
                    del table[topic]
                if expired and not table:
                    del self.consumer_compensation_table[group]

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        """The member of ``group`` with ``client_id``, or None."""
        with self._mutex:
            info = self.consumer_table.get(group)
            return info.find_channel(client_id) if info is not None else None

    def register_consumer(
        self,
        group: str,
        client_channel_info: ClientChannelInfo,
        consume_type: Any,
        message_model: Any,
        consume_from_where: Any,
        subscriptions: Iterable[SubscriptionData],
        is_notify_consumer_ids_changed_enable: bool = True,
        now_ms: int | None = None,
    ) -> bool:
        """Upsert a member and merge its subscriptions (one heartbeat's ConsumerData).

        Returns True when the member is new or the group's topic set changed; then, if
        ``is_notify_consumer_ids_changed_enable``, every member is notified (CHANGE event).
        Mirrors ``ConsumerManager.registerConsumer``.
        """
        now = now_millis() if now_ms is None else now_ms
        with self._mutex:
            info = self.consumer_table.get(group)
            if info is None:
                info = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
                self.consumer_table[group] = info
            r1 = info.update_channel(
                client_channel_info, consume_type, message_model, consume_from_where, now
            )
            r2 = info.update_subscription(subscriptions, now)
            channels = info.get_all_channels()
        changed = r1 or r2
        if changed and is_notify_consumer_ids_changed_enable:
            self._fire(ConsumerGroupEvent.CHANGE, group, channels)
        return changed

    def unregister_consumer(
        self,
        group: str,
        client_channel_info: ClientChannelInfo,
        is_notify_consumer_ids_changed_enable: bool = True,
    ) -> bool:
        """Remove a member (UNREGISTER_CLIENT); notify the remaining ones. True when it was there.

        An emptied group is dropped. Mirrors ``ConsumerManager.unregisterConsumer``.
        """
        with self._mutex:
            info = self.consumer_table.get(group)
            if info is None or not info.unregister_channel(client_channel_info):
                return False
            emptied = not info.channel_info_table
            if emptied:
                del self.consumer_table[group]
            channels = info.get_all_channels()
        if emptied:
            self._fire(ConsumerGroupEvent.UNREGISTER, group, [])
        elif is_notify_consumer_ids_changed_enable:
            self._fire(ConsumerGroupEvent.CHANGE, group, channels)
        return True

    def do_channel_close_event(self, channel: ClientChannel | str) -> list[tuple[str, ClientChannelInfo]]:
        """Remove a closed connection (object or ``"ip:port"``) from every group.

        Remaining members of each affected group are notified. Returns ``(group, removed member)``
        pairs. Mirrors ``ConsumerManager.doChannelCloseEvent``.
        """
        addr = channel if isinstance(channel, str) else channel.remote_addr
        events: list[tuple[ConsumerGroupEvent, str, list[ClientChannel]]] = []
        removed: list[tuple[str, ClientChannelInfo]] = []
        with self._mutex:
            for group, info in list(self.consumer_table.items()):
                gone = info.do_channel_close_event(addr)
                if gone is None:
                    continue
                removed.append((group, gone))
                if not info.channel_info_table:
                    del self.consumer_table[group]
                    events.append((ConsumerGroupEvent.UNREGISTER, group, []))
                else:
                    events.append((ConsumerGroupEvent.CHANGE, group, info.get_all_channels()))
        for event, group, channels in events:
            self._fire(event, group, channels)
        return removed

    def scan_not_active_channel(self, now_ms: int) -> list[tuple[str, ClientChannelInfo]]:
        """Drop members silent for more than the channel expiry (120 s); notify the rest; then drop
        expired compensated subscriptions (:meth:`remove_expire_consumer_group_info`).

        Returns the dropped ``(group, member)`` pairs; the caller closes their channels.
        Mirrors ``ConsumerManager.scanNotActiveChannel``.
        """
        timeout = self.channel_expired_timeout_ms
        events: list[tuple[ConsumerGroupEvent, str, list[ClientChannel]]] = []
        removed: list[tuple[str, ClientChannelInfo]] = []
        with self._mutex:
            for group, info in list(self.consumer_table.items()):
                expired = [
                    addr
                    for addr, ch in info.channel_info_table.items()
                    if now_ms - ch.last_update_timestamp > timeout
                ]
                for addr in expired:
                    gone = info.channel_info_table.pop(addr)
                    removed.append((group, gone))
                    log.warning("consumer channel expired, group %s %s (%s)", group, gone.client_id, addr)
                if not expired:
                    continue
                if not info.channel_info_table:
                    del self.consumer_table[group]
                    events.append((ConsumerGroupEvent.UNREGISTER, group, []))
                else:
                    events.append((ConsumerGroupEvent.CHANGE, group, info.get_all_channels()))
        for event, group, channels in events:
            self._fire(event, group, channels)
        self.remove_expire_consumer_group_info(now_ms)
        return removed

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        """Groups that subscribe to ``topic``. Mirrors ``queryTopicConsumeByWho``."""
        with self._mutex:
            return {g for g, info in self.consumer_table.items() if topic in info.subscription_table}

    def groups(self) -> list[str]:
        """Names of the groups with at least one member, sorted."""
        with self._mutex:
            return sorted(self.consumer_table)


class ClientHousekeepingService:
    """Keeps client tables in step with connections. Mirrors ``ClientHousekeepingService``.

    Register it as a ``RemotingServer`` channel listener: a closed connection leaves every consumer
    and producer group (the other members are notified) and frees its orderly locks. The broker
    calls ``scan_exception_channel(now_ms)`` every 10 s to expire silent channels.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def on_channel_connect(self, channel: ClientChannel) -> None:
        """Nothing to do until the client heartbeats."""

    def on_channel_close(self, channel: ClientChannel) -> None:
        """Forget ``channel`` everywhere (consumer groups, producer groups, orderly locks)."""
        self.do_channel_close(channel)

    def on_channel_exception(self, channel: ClientChannel) -> None:
        """Same as a close."""
        self.do_channel_close(channel)

    def on_channel_idle(self, channel: ClientChannel) -> None:
        """Same as a close."""
        self.do_channel_close(channel)

    def do_channel_close(self, channel: ClientChannel | str) -> None:
        """Remove ``channel`` (object or ``"ip:port"``) from consumers, producers and locks."""
        removed = self.broker.consumer_manager.do_channel_close_event(channel)
        self.broker.producer_manager.do_channel_close_event(channel)
        self._release_locks(removed)

    def _release_locks(self, removed: Iterable[tuple[str, ClientChannelInfo]]) -> None:
        cm = self.broker.consumer_manager
        for group, info in removed:
            # Another connection of the same client still in the group keeps its locks.
            if cm.find_channel(group, info.client_id) is None:
                self.broker.rebalance_lock_manager.unlock_all(group, info.client_id)

    def scan_exception_channel(self, now_ms: int | None = None) -> None:
        """Expire consumer and producer channels silent for ``channel_expired_timeout`` and close them."""
        now = now_millis() if now_ms is None else now_ms
        removed = self.broker.consumer_manager.scan_not_active_channel(now)
        timeout = self.broker.consumer_manager.channel_expired_timeout_ms
        producers = self.broker.producer_manager.scan_not_active_channel(now, timeout)
        self._release_locks(removed)
        for info in [i for _, i in removed] + producers:
            try:
                info.channel.close()
            except Exception:  # closing a dead channel must not stop the scan
                log.debug("closing expired channel %s failed", info.channel.remote_addr, exc_info=True)
