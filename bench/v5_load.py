"""Load driver for ``bench.grpc``: RocketMQ 5's official Python client (run with ``.venv-v5``'s python).

``python bench/v5_load.py produce ENDPOINT TOPIC COUNT SIZE WINDOW`` sends COUNT messages of SIZE bytes
with ``send_async``, at most WINDOW in flight; ``python bench/v5_load.py consume ENDPOINT TOPIC COUNT
GROUP`` receives (batches of 32, invisible 30 s) and acks each until COUNT arrived. Prints one JSON
line: ``{"count": n, "elapsed_s": s}`` (client start-up and shutdown excluded).
``python bench/v5_load.py member ENDPOINT TOPIC SECONDS GROUP`` is one member of a consumer group
for SECONDS (receive, ack at once) and prints ``{"ids": [message ids received]}``.
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def produce(endpoint: str, topic: str, count: int, size: int, window: int) -> dict[str, float]:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
    producer.startup()
    body = b"x" * size
    pending: deque = deque()
    try:
        warm = Message()
        warm.topic, warm.body = topic, body
        producer.send(warm)
        start = time.perf_counter()
        for _ in range(count):
            msg = Message()
            msg.topic, msg.body = topic, body
            pending.append(producer.send_async(msg))
            if len(pending) >= window:
                pending.popleft().result()
        while pending:
            pending.popleft().result()
        elapsed = time.perf_counter() - start
    finally:
        producer.shutdown()
    return {"count": count, "elapsed_s": elapsed}


def consume(endpoint: str, topic: str, count: int, group: str) -> dict[str, float]:
    consumer = SimpleConsumer(
        ClientConfiguration(endpoint, Credentials()), group, {topic: FilterExpression("*")}, 5
    )
    consumer.startup()
    got = 0
    try:
        start = time.perf_counter()
        deadline = time.monotonic() + 120
        while got < count and time.monotonic() < deadline:
            for msg in consumer.receive(32, 30) or []:
                consumer.ack(msg)
                got += 1
        elapsed = time.perf_counter() - start
    finally:
        consumer.shutdown()
    return {"count": got, "elapsed_s": elapsed}


def member(endpoint: str, topic: str, seconds: float, group: str) -> dict[str, object]:
    """One member of a group for ``seconds``: receive (batches of 16, invisible 30 s, await 1 s)
    and ack each message at once; the message ids received."""
    consumer = SimpleConsumer(
        ClientConfiguration(endpoint, Credentials()), group, {topic: FilterExpression("*")}, 1
    )
    consumer.startup()
    ids: list[str] = []
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msg in consumer.receive(16, 30) or []:
                consumer.ack(msg)
                ids.append(msg.message_id)
    finally:
        consumer.shutdown()
    return {"ids": ids}


if __name__ == "__main__":
    action, endpoint, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    if action == "produce":
        out = produce(endpoint, topic, int(count), int(sys.argv[5]), int(sys.argv[6]))
    elif action == "member":
        out = member(endpoint, topic, float(count), sys.argv[5])
    else:
        out = consume(endpoint, topic, int(count), sys.argv[5])
    print(json.dumps(out), flush=True)
