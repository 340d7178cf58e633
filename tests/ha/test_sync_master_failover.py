"""SYNC_MASTER + one slave as real processes: SIGKILL the master in the middle of a send loop.

Every message that got SEND_OK must be readable from the slave: a tidemq PushConsumer and the real
C++ push consumer (``rocketmq==0.4.4``) keep consuming from it while the master is gone; the
restarted master serves again (sends are SEND_OK once its slave is back) and the slave holds a
byte-for-byte copy of the master's commit log.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.ha.conftest import Spawn, StartCluster, create_topic, slave_has_topic
from tests.helpers import poll, wait_for_sync
from tidemq.client import ConsumeConcurrentlyStatus, Producer, PushConsumer
from tidemq.protocol.message import Message

pytest.importorskip("rocketmq.client")
pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPIC = "HaSyncT"


class Received:
    """Bodies a tidemq listener got (thread-safe)."""

    def __init__(self) -> None:
        self.bodies: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        with self._lock:
            self.bodies.update(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def has(self, bodies: set[str]) -> bool:
        with self._lock:
            return bodies <= self.bodies


def send_loop(producer: Producer, ok: list[str], stop: threading.Event, prefix: str) -> None:
    """Send until ``stop``; SEND_OK bodies go to ``ok`` (failures are expected once the master dies)."""
    i = 0
    while not stop.is_set():
        body = f"{prefix}-{i}"
        i += 1
        try:
            result = producer.send(Message(TOPIC, body.encode()))
        except Exception:
            continue
        if result.send_status == "SEND_OK":
            ok.append(body)


def commit_logs_equal(master: Path, slave: Path) -> bool:
    files = sorted(p.name for p in (master / "store" / "commitlog").iterdir())
    return all(
        (master / "store" / "commitlog" / f).read_bytes() == (slave / "store" / "commitlog" / f).read_bytes()
        for f in files
    )


def test_slave_serves_everything_acknowledged_after_master_sigkill(
    start_cluster: StartCluster, spawn: Spawn
) -> None:
    cluster = start_cluster(groups=1, replicas=1, sync=True)
    ns = cluster.namesrv_addr
    create_topic(cluster, TOPIC, 4)
    wait_for_sync(lambda: slave_has_topic(cluster, "broker-a-1", TOPIC), 30, "the slave to copy the topic")

    py_got = Received()
    consumer = PushConsumer(
        namesrv_addr=ns,
        consumer_group="ha-py",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        poll_name_server_interval=1.0,
        persist_consumer_offset_interval=1.0,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(py_got)
    cpp = spawn(
        "cpp_push_consumer.py",
        "--namesrv",
        ns,
        "--group",
        "ha-cpp",
        "--topic",
        TOPIC,
        "--duration",
        "150",
        name="cpp-consumer",
    )
    producer = Producer(
        namesrv_addr=ns, producer_group="ha-p", poll_name_server_interval=1.0, send_msg_timeout=2.0
    )
    producer.start()
    consumer.start()
    ok: list[str] = []
    stop = threading.Event()
    sender = threading.Thread(target=send_loop, args=(producer, ok, stop, "m"), daemon=True)
    try:
        assert cpp.wait_event("started", 30), cpp.describe()
        sender.start()
        wait_for_sync(lambda: len(ok) >= 150, 60, "150 SEND_OK before the kill")
        cluster.kill("broker-a-0")  # SIGKILL while the loop is sending
        killed_at = len(ok)
        assert not poll(lambda: len(ok) > killed_at + 1, 3.0), "SEND_OK with the only master dead"
        stop.set()
        sender.join(30)
        acked = set(ok)
        assert len(acked) >= 150

        wait_for_sync(lambda: py_got.has(acked), 60, "the tidemq consumer to read every SEND_OK message")
        cpp_bodies = lambda: {e["body"] for e in cpp.of("msg")}  # noqa: E731
        assert cpp.wait_until(lambda p: acked <= cpp_bodies(), 60), (
            f"C++ consumer misses {len(acked - cpp_bodies())} acknowledged messages: {cpp.describe()}"
        )

        # the master comes back at its address; its slave reconnects and SYNC_MASTER acks again
        cluster.start_node("broker-a-0")
        after: list[str] = []

        def one_more() -> bool:
            body = f"after-{len(after)}"
            try:
                if producer.send(Message(TOPIC, body.encode())).send_status == "SEND_OK":
                    after.append(body)
            except Exception:
                pass
            return len(after) >= 20

        wait_for_sync(one_more, 60, "20 SEND_OK from the restarted master", interval=0.05)
        wait_for_sync(lambda: py_got.has(set(after)), 60, "the tidemq consumer to read the new messages")
        assert cpp.wait_until(lambda p: set(after) <= cpp_bodies(), 60), cpp.describe()
        master, slave = Path(cluster.node("broker-a-0").dir), Path(cluster.node("broker-a-1").dir)
        wait_for_sync(lambda: commit_logs_equal(master, slave), 30, "the slave to hold the master's log", 0.2)
    finally:
        stop.set()
        consumer.shutdown()
        producer.shutdown()
