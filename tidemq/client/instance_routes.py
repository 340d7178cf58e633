"""The route and broker-address tables of a :class:`~tidemq.client.instance.ClientInstance`.

Mirrors the route half of RocketMQ's ``MQClientInstance`` (``updateTopicRouteInfoFromNameServer``,
``findBrokerAddressIn*``) and ``MQAdminImpl``'s offset lookups: routes come from the name servers
(GET_ROUTEINFO_BY_TOPIC, each tried once, starting from the last that answered), are pushed to the
registered producers and consumers, and give the broker addresses requests go to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from tidemq.client.api import ClientAPI
from tidemq.client.config import ClientConfig
from tidemq.client.route import (
    FindBrokerResult,
    find_broker_in_admin,
    find_broker_in_subscribe,
    route_to_publish_info,
    route_to_subscribe_queues,
)
from tidemq.errors import ClientError, NoRouteError, TideMQError
from tidemq.protocol.body import TopicRouteData
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.topic import MASTER_ID

if TYPE_CHECKING:
    from tidemq.client.instance import ConsumerInner, ProducerInner

__all__ = ["RouteTables"]

log = logging.getLogger("tidemq.client.instance")  # the instance's logger, as before the split


class RouteTables:
    """Topic routes and broker addresses; :class:`~tidemq.client.instance.ClientInstance` sets the
    attributes below in its constructor.

    Attributes:
        topic_route_table: ``{topic: TopicRouteData}`` of the topics in use.
        broker_addr_table: ``{broker_name: {broker_id: "host:port"}}`` of every broker seen.
    """

    config: ClientConfig
    api: ClientAPI
    namesrv_addrs: list[str]
    _namesrv_index: int
    _route_lock: asyncio.Lock
    producers: dict[str, ProducerInner]
    consumers: dict[str, ConsumerInner]
    topic_route_table: dict[str, TopicRouteData]
    broker_addr_table: dict[str, dict[int, str]]

    async def get_route(self, topic: str, timeout: float | None = None) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC from the name servers (tries each once).

        Raises:
            NoRouteError: no name server knows ``topic``.
            RemotingError: no name server could be reached.
        """
        timeout = self.config.mq_client_api_timeout if timeout is None else timeout
        last: Exception | None = None
        n = len(self.namesrv_addrs)
        for k in range(n):
            addr = self.namesrv_addrs[(self._namesrv_index + k) % n]
            try:
                route = await self.api.get_topic_route_info_from_name_server(addr, topic, timeout)
            except NoRouteError:
                raise
            except TideMQError as exc:
                last = exc
                continue
            self._namesrv_index = (self._namesrv_index + k) % n
            return route
        assert last is not None
        raise last

    async def update_topic_route_info_from_name_server(self, topic: str | None = None) -> bool:
        """Refresh one topic's route (or every topic in use). Mirrors ``updateTopicRouteInfoFromNameServer``.

        Returns:
            True when ``topic``'s route was fetched (and tables updated).
        """
        if topic is None:
            topics: set[str] = set()
            for c in self.consumers.values():
                topics |= c.subscribed_topics()
            for p in self.producers.values():
                topics |= p.publish_topics()
            for t in sorted(topics):
                with contextlib.suppress(TideMQError):
                    await self.update_topic_route_info_from_name_server(t)
            return True
        async with self._route_lock:
            try:
                route = await self.get_route(topic)
            except NoRouteError:
                log.debug("no route for %s", topic)
                return False
            self.apply_route(topic, route)
            return True

    def apply_route(self, topic: str, route: TopicRouteData) -> None:
        """Store ``route`` and push publish/subscribe queue lists to producers and consumers."""
        self.topic_route_table[topic] = route
        self.remember_brokers(route)
        if self.producers:
            info = route_to_publish_info(topic, route)
            for p in self.producers.values():
                if topic in p.publish_topics():
                    p.update_topic_publish_info(topic, info)
        mqs = route_to_subscribe_queues(topic, route)
        for c in self.consumers.values():
            if topic in c.subscribed_topics():
                c.update_topic_subscribe_info(topic, mqs)

    def remember_brokers(self, route: TopicRouteData) -> None:
        """Add ``route``'s broker addresses to the address table (without storing the route)."""
        for bd in route.broker_datas:
            self.broker_addr_table[bd.broker_name] = {int(k): v for k, v in bd.broker_addrs.items()}

    def _all_broker_addrs(self) -> list[str]:
        return sorted({a for addrs in self.broker_addr_table.values() for a in addrs.values()})

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        """The master address of ``broker_name``. Mirrors ``findBrokerAddressInPublish``."""
        return self.broker_addr_table.get(broker_name, {}).get(MASTER_ID)

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
        """``broker_id``'s address, else any address of ``broker_name``. Mirrors ``findBrokerAddressInSubscribe``."""
        found = find_broker_in_subscribe(self.broker_addr_table.get(broker_name), broker_id)
        return found.broker_addr if found else None

    def find_broker_result_in_subscribe(
        self, broker_name: str, broker_id: int, *, only_this_broker: bool = False
    ) -> FindBrokerResult | None:
        """Address + slave flag for pulling from ``broker_name`` (see :func:`find_broker_in_subscribe`)."""
        return find_broker_in_subscribe(
            self.broker_addr_table.get(broker_name), broker_id, only_this_broker=only_this_broker
        )

    def find_broker_address_in_admin(self, broker_name: str) -> str | None:
        """The master of ``broker_name``, else a slave. Mirrors ``findBrokerAddressInAdmin``
        (where consumer offsets are committed and queried)."""
        found = find_broker_in_admin(self.broker_addr_table.get(broker_name))
        return found.broker_addr if found else None

    async def find_broker_addr(self, broker_name: str, *, topic: str | None = None) -> str:
        """Master (else a slave) address of ``broker_name``, refreshing ``topic``'s route once if
        unknown. Mirrors the ``findBrokerAddressInAdmin`` + route refresh pattern (offset commits
        and queries, admin calls).

        Raises:
            ClientError: the broker is unknown.
        """
        addr = self.find_broker_address_in_admin(broker_name)
        if addr is None and topic is not None:
            await self.update_topic_route_info_from_name_server(topic)
            addr = self.find_broker_address_in_admin(broker_name)
        if addr is None:
            raise ClientError(f"the broker {broker_name} does not exist (no address known)")
        return addr

    async def max_offset(self, mq: MessageQueue, timeout: float) -> int:
        """GET_MAX_OFFSET of ``mq`` on its master. Mirrors ``MQAdminImpl.maxOffset``.

        Raises:
            ClientError: the broker is unknown; BrokerError / RemotingError from the request.
        """
        addr = await self.find_broker_addr(mq.broker_name, topic=mq.topic)
        return await self.api.get_max_offset(addr, mq, timeout)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int, timeout: float) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (ms) on ``mq``'s master. Mirrors ``MQAdminImpl.searchOffset``."""
        addr = await self.find_broker_addr(mq.broker_name, topic=mq.topic)
        return await self.api.search_offset(addr, mq, timestamp_ms, timeout)
