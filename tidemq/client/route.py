"""From a topic route to the queues a client may use (pure). Mirrors RocketMQ's ``TopicPublishInfo``
and ``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``topicRouteData2TopicSubscribeInfo``.

Publish list: for each writable QueueData, sorted by broker name, whose broker has a master
(id 0): queues ``0..writeQueueNums-1`` -- or, when ``orderTopicConf`` (``"brokerA:4;brokerB:4"``)
is set, exactly the queues it lists. Subscribe set: for each readable QueueData, queues
``0..readQueueNums-1``. A producer auto-creating a topic uses ``TBW102``'s route with at most
``default_topic_queue_nums`` queues per broker.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from tidemq.errors import NoRouteError
from tidemq.protocol.body import BrokerData, TopicRouteData
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.topic import MASTER_ID, PermName

__all__ = [
    "FindBrokerResult",
    "TopicPublishInfo",
    "find_broker_addr",
    "find_broker_in_admin",
    "find_broker_in_subscribe",
    "route_to_publish_info",
    "route_to_subscribe_queues",
]


@dataclass(slots=True)
class TopicPublishInfo:
    """Writable queues of a topic plus a round-robin cursor. Mirrors ``TopicPublishInfo``.

    Attributes:
        topic: the topic.
        message_queue_list: writable queues, broker by broker.
        order_topic: built from ``orderTopicConf``.
        route: the route it came from (None for an empty placeholder).
    """

    topic: str
    message_queue_list: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    route: TopicRouteData | None = None
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(random.randrange(1 << 16)))

    @property
    def ok(self) -> bool:
        """True when there is at least one writable queue. Mirrors ``TopicPublishInfo.ok``."""
        return bool(self.message_queue_list)

    def next_index(self) -> int:
        """The next value of the round-robin cursor (``sendWhichQueue.incrementAndGet()``)."""
        return next(self._counter)

    def queue_nums_of_broker(self, broker_name: str) -> int:
        """How many writable queues ``broker_name`` has here. Mirrors ``getQueueIdByBroker``."""
        return sum(1 for mq in self.message_queue_list if mq.broker_name == broker_name)

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """Next queue round-robin, avoiding ``last_broker_name`` when another broker exists.

        Mirrors ``selectOneMessageQueue(lastBrokerName)``: a retry moves to another queue (and
        broker, if there is one).

        Raises:
            NoRouteError: no writable queue.
        """
        mqs = self.message_queue_list
        if not mqs:
            raise NoRouteError(f"no writable queue for topic {self.topic}")
        if last_broker_name is not None:
            for _ in range(len(mqs)):
                mq = mqs[next(self._counter) % len(mqs)]
                if mq.broker_name != last_broker_name:
                    return mq
        return mqs[next(self._counter) % len(mqs)]


def _brokers(route: TopicRouteData) -> dict[str, BrokerData]:
    return {bd.broker_name: bd for bd in route.broker_datas}


def route_to_publish_info(
    topic: str, route: TopicRouteData, *, max_queue_nums: int | None = None
) -> TopicPublishInfo:
    """Writable queues of ``topic`` from ``route``.

    Args:
        topic: the topic the queues are named after (differs from the route's own topic when
            the ``TBW102`` route is used for auto-creation).
        route: the name server's answer.
        max_queue_nums: cap per broker (``default_topic_queue_nums`` for auto-creation).
    """
    info = TopicPublishInfo(topic, route=route)
    conf = getattr(route, "order_topic_conf", None)
    if conf:
        for item in str(conf).split(";"):
            name, _, count = item.partition(":")
            if name and count.strip().isdigit():
                info.message_queue_list += [MessageQueue(topic, name, i) for i in range(int(count))]
        info.order_topic = True
        return info
    brokers = _brokers(route)
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if not qd.perm & PermName.PERM_WRITE:
            continue
        bd = brokers.get(qd.broker_name)
        if bd is None or MASTER_ID not in _addrs(bd):
            continue
        nums = (
            qd.write_queue_nums
            if max_queue_nums is None
            else min(qd.write_queue_nums, max_queue_nums, qd.read_queue_nums)
        )
        info.message_queue_list += [MessageQueue(topic, qd.broker_name, i) for i in range(nums)]
    return info


def route_to_subscribe_queues(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """Readable queues of ``topic``. Mirrors ``topicRouteData2TopicSubscribeInfo``."""
    return {
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if qd.perm & PermName.PERM_READ
        for i in range(qd.read_queue_nums)
    }


def _addrs(bd: BrokerData) -> dict[int, str]:
    return {int(k): v for k, v in bd.broker_addrs.items()}


def find_broker_addr(route: TopicRouteData, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
    """Address of ``broker_name``'s ``broker_id`` (default the master), else any of its addresses."""
    bd = _brokers(route).get(broker_name)
    if bd is None:
        return None
    addrs = _addrs(bd)
    if broker_id in addrs:
        return addrs[broker_id]
    return addrs[min(addrs)] if addrs else None


@dataclass(frozen=True, slots=True)
class FindBrokerResult:
    """A broker address picked from a broker group. Mirrors ``FindBrokerResult``.

    Attributes:
        broker_addr: ``"host:port"``.
        slave: True when it is not the master (broker id != 0).
        broker_id: the id it was found under.
    """

    broker_addr: str
    slave: bool
    broker_id: int


def find_broker_in_subscribe(
    addrs: dict[int, str] | None, broker_id: int, *, only_this_broker: bool = False
) -> FindBrokerResult | None:
    """Where to pull from in one broker group ``{broker id: address}``. Mirrors
    ``MQClientInstance.findBrokerAddressInSubscribe``: ``broker_id`` itself; for a slave id missing
    from the group, ``broker_id + 1``; then (unless ``only_this_broker``) the lowest id present --
    the master when it is there, else a slave (a consumer keeps reading from a slave while the
    master is gone from the route). None for an empty or unknown group."""
    if not addrs:
        return None
    addr = addrs.get(broker_id)
    if addr:
        return FindBrokerResult(addr, broker_id != MASTER_ID, broker_id)
    if broker_id != MASTER_ID and addrs.get(broker_id + 1):
        return FindBrokerResult(addrs[broker_id + 1], True, broker_id + 1)
    if only_this_broker:
        return None
    first = min(addrs)
    return FindBrokerResult(addrs[first], first != MASTER_ID, first)


def find_broker_in_admin(addrs: dict[int, str] | None) -> FindBrokerResult | None:
    """Where offsets are committed and queried in one broker group: the master when present, else
    the lowest-id slave. Mirrors ``MQClientInstance.findBrokerAddressInAdmin``."""
    if not addrs:
        return None
    first = min(addrs)
    return FindBrokerResult(addrs[first], first != MASTER_ID, first)
