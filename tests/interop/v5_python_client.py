"""Drive RocketMQ 5's official Python client (PyPI ``rocketmq-python-client`` 5.1.2) for the interop tests.

Run with the interpreter of ``.venv-v5`` (its package ``rocketmq`` is not the C++ client's), one JSON
spec as the only argument; prints one JSON object on stdout::

    {"action": "produce", "endpoint": "127.0.0.1:8081", "topic": "T", "namespace": "",
     "messages": [{"body": "b", "tag": "TagA", "keys": ["k"], "props": {"color": "red"},
                   "group": "g1", "delay_ms": 2000, "tx": "commit" | "rollback" | "check-commit",
                   "recall": "now" | "late"}]}
    -> {"sent": [{"message_id": "...", "transaction_id": "...", "recalled": "...", "recall_error": "..."}]}

    {"action": "consume" | "push", "endpoint": ..., "topic": "T", "group": "G", "expect": 3,
     "invisible_s": 15, "await_s": 5, "timeout_s": 20, "ack": true, "change_first_s": 0}
    -> {"received": [{"body": ..., "tag": ..., "keys": [...], "props": {...}, "message_id": ...,
                      "group": ..., "attempt": 1, "queue_id": 0, "queue_offset": 0, "type": "NORMAL"}]}

``tx: "check-commit"`` leaves the transaction open: the server's orphaned-transaction check
commits it through the checker. ``ack: false`` leaves the received messages un-acked.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
)
from rocketmq.grpc_protocol import TransactionResolution
from rocketmq.v5.producer import TransactionChecker


class Checker(TransactionChecker):  # type: ignore[misc]
    """Commits every orphaned transaction the server asks about."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, message: Any) -> Any:
        self.checked.append(message.message_id)
        return TransactionResolution.COMMIT


def config(spec: dict[str, Any]) -> Any:
    creds = Credentials(spec.get("ak", ""), spec.get("sk", ""))
    return ClientConfiguration(spec["endpoint"], creds, spec.get("namespace", ""))


def build(topic: str, m: dict[str, Any]) -> Any:
    msg = Message()
    msg.topic = topic
    msg.body = m["body"].encode()
    if m.get("tag"):
        msg.tag = m["tag"]
    if m.get("keys"):
        for key in m["keys"]:  # a setter that adds to a set, one key at a time
            msg.keys = key
    for k, v in (m.get("props") or {}).items():
        msg.add_property(k, v)
    if m.get("group"):
        msg.message_group = m["group"]
    if m.get("delay_ms"):
        # 5.1.2 copies this into Timestamp.seconds (its docstring says ms): give it seconds, rounded up
        msg.delivery_timestamp = -int(-(time.time() + int(m["delay_ms"]) / 1000) // 1)
    return msg


def produce(spec: dict[str, Any]) -> dict[str, Any]:
    checker = Checker()
    producer = Producer(config(spec), (spec["topic"],), checker)
    producer.startup()
    sent = []
    try:
        for m in spec["messages"]:
            msg = build(spec["topic"], m)
            if m.get("tx"):
                tx = producer.begin_transaction()
                receipt = producer.send(msg, tx)
                if m["tx"] == "commit":
                    tx.commit()
                elif m["tx"] == "rollback":
                    tx.rollback()
                sent.append({"message_id": receipt.message_id, "transaction_id": receipt.transaction_id})
            else:
                receipt = producer.send(msg)
                sent.append({"message_id": receipt.message_id, **recall(producer, spec["topic"], m, receipt)})
        deadline = time.time() + float(spec.get("check_wait_s", 0))
        want = sum(1 for m in spec["messages"] if m.get("tx") == "check-commit")
        while len(checker.checked) < want and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(float(spec.get("linger_s", 0)))
    finally:
        producer.shutdown()
    return {"sent": sent, "checked": checker.checked}


def recall(producer: Any, topic: str, m: dict[str, Any], receipt: Any) -> dict[str, Any]:
    """``recall: "now"`` recalls a delay message at once; ``"late"`` once its delivery time has passed
    (the server must refuse: it is delivered)."""
    if not m.get("recall"):
        return {}
    if m["recall"] == "late":
        time.sleep(int(m.get("delay_ms", 0)) / 1000 + 1.2)  # due at most 1 s later
    try:
        return {"recalled": producer.recall_message(topic, receipt.recall_handle)}
    except Exception as exc:  # the client raises a plain Exception with the server's status
        return {"recall_error": str(exc)}


def view(msg: Any) -> dict[str, Any]:
    return {
        "body": msg.body.decode(),
        "tag": msg.tag,
        "keys": sorted(msg.keys or []),
        "props": dict(msg.properties or {}),
        "message_id": msg.message_id,
        "group": msg.message_group,
        "attempt": msg.delivery_attempt,
        "type": Message.message_type_desc(msg.message_type) if msg.message_type is not None else None,
        "delivery_ms": msg.delivery_timestamp,
    }


def consume(spec: dict[str, Any]) -> dict[str, Any]:
    expression = FilterExpression(spec.get("tag", "*"))
    consumer = SimpleConsumer(
        config(spec), spec["group"], {spec["topic"]: expression}, spec.get("await_s", 5)
    )
    consumer.startup()
    received: list[dict[str, Any]] = []
    deadline = time.time() + float(spec.get("timeout_s", 20))
    changed = False
    try:
        while len(received) < spec["expect"] and time.time() < deadline:
            for msg in consumer.receive(32, int(spec.get("invisible_s", 15))) or []:
                received.append(view(msg))
                if spec.get("change_first_s") and not changed:
                    consumer.change_invisible_duration(msg, int(spec["change_first_s"]))
                    changed = True
                if spec.get("ack", True):
                    consumer.ack(msg)
    finally:
        consumer.shutdown()
    return {"received": received}


class Collector(MessageListener):  # type: ignore[misc]
    """Records every message the PushConsumer hands over and answers SUCCESS."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def consume(self, message: Any) -> Any:
        self.received.append(view(message))
        return ConsumeResult.SUCCESS


def push(spec: dict[str, Any]) -> dict[str, Any]:
    listener = Collector()
    expression = FilterExpression(spec.get("tag", "*"))
    consumer = PushConsumer(config(spec), spec["group"], listener, {spec["topic"]: expression})
    consumer.startup()
    deadline = time.time() + float(spec.get("timeout_s", 20))
    try:
        while len(listener.received) < spec["expect"] and time.time() < deadline:
            time.sleep(0.05)
    finally:
        consumer.shutdown()
    return {"received": listener.received}


def main() -> None:
    spec = json.loads(sys.argv[1])
    actions = {"produce": produce, "consume": consume, "push": push}
    out = actions[spec["action"]](spec)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
