"""Pure producer helpers: batch splitting, hash selector (Java-compatible), route -> queues."""

from __future__ import annotations

import pytest

from tidemq.client.producer.producer import split_batch
from tidemq.client.producer.selector import SelectMessageQueueByHash, java_hash_code
from tidemq.client.route import route_to_publish_info, route_to_subscribe_queues
from tidemq.errors import ClientError, NoRouteError
from tidemq.protocol.body import BrokerData, QueueData, TopicRouteData
from tidemq.protocol.message import Message, MessageQueue


def test_split_batch_respects_the_limit() -> None:
    """Consecutive chunks, each within max_bytes; an oversized single message is an error."""
    msgs = [Message("T", b"x" * 100) for _ in range(10)]
    chunks = split_batch(msgs, max_bytes=500)
    assert [m for c in chunks for m in c] == msgs
    assert [len(c) for c in chunks] == [2, 2, 2, 2, 2]  # 170 bytes each: 22 + 100 + 48 UNIQ_KEY room
    with pytest.raises(ClientError):
        split_batch([Message("T", b"x" * 1000)], max_bytes=500)


def test_hash_selector_matches_java_string_hashcode() -> None:
    """abs(String.hashCode % n): "order-1".hashCode() = -1207111310 in Java -> Java's % gives -6 -> queue 6."""
    assert java_hash_code("order-1") == -1207111310
    assert java_hash_code(7) == 7
    mqs = [MessageQueue("T", "b", i) for i in range(8)]
    assert SelectMessageQueueByHash().select(mqs, Message("T", b"x"), "order-1").queue_id == 6


def route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[
            QueueData(broker_name="b", read_queue_nums=2, write_queue_nums=3, perm=6),
            QueueData(broker_name="a", read_queue_nums=4, write_queue_nums=4, perm=4),
            QueueData(broker_name="c", read_queue_nums=1, write_queue_nums=1, perm=6),
        ],
        broker_datas=[
            BrokerData(cluster="C", broker_name="a", broker_addrs={0: "h:1"}),
            BrokerData(cluster="C", broker_name="b", broker_addrs={0: "h:2"}),
            BrokerData(cluster="C", broker_name="c", broker_addrs={1: "h:3"}),
        ],
    )


def test_route_to_queues() -> None:
    """Publish: writable queue data with a master, sorted by broker; subscribe: readable queue data."""
    info = route_to_publish_info("T", route())
    assert info.message_queue_list == [MessageQueue("T", "b", i) for i in range(3)]
    assert route_to_subscribe_queues("T", route()) == {MessageQueue("T", "a", i) for i in range(4)} | {
        MessageQueue("T", "b", i) for i in range(2)
    } | {MessageQueue("T", "c", 0)}
    capped = route_to_publish_info("New", route(), max_queue_nums=1)
    assert capped.message_queue_list == [MessageQueue("New", "b", 0)]


def test_select_one_message_queue_avoids_the_last_broker() -> None:
    """A retry goes to another broker when there is one; no queues -> NoRouteError."""
    r = route()
    r.broker_datas[2].broker_addrs = {0: "h:3"}
    info = route_to_publish_info("T", r)
    for _ in range(10):
        assert info.select_one_message_queue("b").broker_name == "c"
    with pytest.raises(NoRouteError):
        route_to_publish_info("T", TopicRouteData()).select_one_message_queue()
