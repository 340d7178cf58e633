"""tidemq Producer -> C++ push consumer, and C++ producer -> tidemq PushConsumer, fields intact.

Every message carries a body, a tag, keys and user properties; every 4th body is 6,000 bytes (and
one tidemq body exactly 4 KiB), above both clients' 4 KiB compression threshold, so compressed
bodies cross in both directions (checked in the broker's store: the COMPRESSED sys flag is set).
"""

from __future__ import annotations

import threading

import pytest

from tests.helpers import wait_for_sync
from tests.interop.conftest import Spawn
from tests.interop.harness import stored_messages
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ClusterThread

pytest.importorskip("rocketmq.client")
pytestmark = pytest.mark.interop

COMPRESSED_FLAG = 0x1
COUNT = 20


def py_body(i: int) -> str:
    """``py-<i>|`` then a letter pattern up to 6,000 bytes every 4th message (4,096 for i == 1)."""
    size = 6000 if i % 4 == 0 else 4096 if i == 1 else 0
    body = f"py-{i}|"
    while len(body) < size:
        body += "abcdefghijklmnopqrstuvwxyz0123456789"[(len(body) * 7 + i) % 36]
    return body[:size] if size else body


def compressed_bodies(cluster: ClusterThread, topic: str) -> set[str]:
    """Message ids (UNIQ_KEY) whose stored record has the COMPRESSED sys flag."""
    stored = [m for msgs in stored_messages(cluster.broker, topic).values() for m in msgs]
    return {m.msg_id for m in stored if m.sys_flag & COMPRESSED_FLAG}


def test_tidemq_producer_to_cpp_consumer(cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic = cluster.namesrv_addr, "PyToCppTopic"
    producer = Producer(namesrv_addr=ns, producer_group="py-to-cpp-pg")
    producer.start()
    sent: dict[str, dict[str, object]] = {}
    try:
        for i in range(COUNT):
            body = py_body(i)
            props = {"color": f"c{i % 3}", "idx": str(i), "note": f"héllo wörld {i}"}
            tags = "TagA" if i % 2 == 0 else "TagB"
            msg = Message(topic, body.encode(), tags=tags, keys=[f"key-{i}", f"alt-{i}"], properties=props)
            result = producer.send(msg)
            sent[result.msg_id] = {"body": body, "tags": tags, "keys": f"key-{i} alt-{i}", "props": props}
    finally:
        producer.shutdown()
    big = {mid for mid, s in sent.items() if len(str(s["body"])) >= 4096}
    assert len(big) == 6
    assert compressed_bodies(cluster, topic) == big, "tidemq should compress bodies of 4 KiB or more"

    consumer = spawn(
        "cpp_props.py",
        "consume",
        "--namesrv",
        ns,
        "--topic",
        topic,
        "--group",
        "PyToCppGroup",
        "--props",
        "color,idx,note",
        "--count",
        str(COUNT),
        "--duration",
        "45",
        name="cpp-consumer",
    )
    assert consumer.wait_until(lambda p: len(p.of("msg")) >= COUNT, 40), consumer.describe()
    got = {m["msg_id"]: m for m in consumer.of("msg")}
    assert set(got) == set(sent), consumer.describe()
    for mid, want in sent.items():
        m = got[mid]
        assert m["body"] == want["body"], mid
        assert m["tags"] == want["tags"]
        assert m["keys"] == want["keys"]
        assert m["props"] == want["props"]
        assert m["topic"] == topic


def test_cpp_producer_to_tidemq_consumer(cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic = cluster.namesrv_addr, "CppToPyTopic"
    producer = spawn(
        "cpp_props.py",
        "produce",
        "--namesrv",
        ns,
        "--topic",
        topic,
        "--count",
        str(COUNT),
        "--big-every",
        "4",
        "--big-size",
        "6000",
        name="cpp-producer",
    )
    assert producer.wait_event("done", 40), producer.describe()
    assert producer.wait_exit(15) == 0, producer.describe()
    sent = {e["msg_id"]: e for e in producer.of("sent")}
    assert len(sent) == COUNT
    big = {mid for mid, e in sent.items() if len(e["body"]) > 4096}
    assert len(big) == 5
    assert compressed_bodies(cluster, topic) == big, "the C++ client should compress bodies over 4 KiB"

    got: dict[str, MessageExt] = {}
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
        with lock:
            for m in msgs:
                got[m.msg_id] = m

    consumer = PushConsumer(
        namesrv_addr=ns, consumer_group="CppToPyGroup", consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(topic, "TagA || TagB")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        wait_for_sync(lambda: len(got) >= COUNT, 30, "every C++ message", interval=0.02)
    finally:
        consumer.shutdown()
    assert set(got) == set(sent)
    for mid, want in sent.items():
        m = got[mid]
        assert m.body.decode() == want["body"], mid
        assert m.tags == want["tags"]
        assert m.keys == want["keys"]
        assert {k: m.properties.get(k) for k in want["props"]} == want["props"]
        assert m.topic == topic
