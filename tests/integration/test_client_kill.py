"""A push-consumer member killed with SIGKILL: the rest of the group takes its queues, nothing is lost.

The victim is a real ``tidemq consume`` process (``python -m tidemq consume --json``) in a group
with two in-process :class:`PushConsumer` members on a topic of 8 queues. It is killed as soon as
it printed its first test message, so messages it had pulled but not printed (or printed but not
committed) are in flight. The broker notices the closed connection, notifies the survivors
(NOTIFY_CONSUMER_IDS_CHANGED) and they rebalance onto all 8 queues, resuming from the victim's
committed offsets. Duplicates are allowed, counted and printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.helpers import wait_for_sync as wait_for
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ClusterThread

TOPIC, GROUP, QUEUES = "KillTopic", "KillGroup", 8


class ConsumeProcess:
    """``python -m tidemq consume --json`` as a subprocess; its JSON lines collected by a thread.

    ``kill_on_body_prefix`` SIGKILLs it from the reader thread the moment it prints a message whose
    body starts with that prefix (the test's payload, not the setup message that created the topic:
    killing on that one could happen before the group had even split three ways).
    """

    def __init__(self, args: list[str], log: Path, *, kill_on_body_prefix: str | None = None) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tidemq", "consume", "--json", *args],
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        self.log_path = log
        self.kill_on_body_prefix = kill_on_body_prefix
        self.events: list[dict[str, Any]] = []
        self.killed_at: float | None = None
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            event = json.loads(raw)
            with self._lock:
                self.events.append(event)
            prefix = self.kill_on_body_prefix
            if prefix is not None and event["event"] == "message" and event["body"].startswith(prefix):
                self.proc.kill()
                self.killed_at = time.monotonic()
                self.kill_on_body_prefix = None

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["event"] == kind]

    def assignment(self) -> set[int]:
        """Queue ids of the last assignment line (empty before the first)."""
        last = self.of("assignment")
        return {q["queueId"] for q in last[-1]["queues"]} if last else set()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)
        self._log.close()

    def describe(self) -> str:
        tail = self.log_path.read_text(errors="replace")[-2000:]
        return f"rc={self.proc.poll()} events={len(self.events)} stderr=...{tail}"


def test_sigkilled_member_queues_are_taken_over_and_nothing_is_lost(tmp_path: Path) -> None:
    with ClusterThread(tmp_path) as cluster:
        ns = cluster.namesrv_addr
        producer = Producer(namesrv_addr=ns, producer_group="kill-pg", default_topic_queue_nums=QUEUES)
        producer.start()
        received: Counter[str] = Counter()
        lock = threading.Lock()

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            with lock:
                received.update(m.body.decode() for m in msgs)

        members: list[PushConsumer] = []
        victim: ConsumeProcess | None = None
        try:
            producer.send(Message(TOPIC, b"create"))
            for _ in range(2):
                member = PushConsumer(
                    namesrv_addr=ns, consumer_group=GROUP, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
                )
                member.subscribe(TOPIC, "*")
                member.register_message_listener(listener)
                member.start()
                members.append(member)
            victim = ConsumeProcess(
                ["--namesrv", ns, "--topic", TOPIC, "--group", GROUP, "--from", "first", "--duration", "60"],
                tmp_path / "victim.stderr.log",
                kill_on_body_prefix="m-",
            )

            def owned(m: PushConsumer) -> list[int]:
                return [q.queue_id for q in m.assignment() if q.topic == TOPIC]

            def split_three_ways() -> bool:
                assert victim is not None
                parts = [owned(m) for m in members] + [sorted(victim.assignment())]
                flat = [q for p in parts for q in p]
                return sorted(flat) == list(range(QUEUES)) and all(parts)

            wait_for(split_three_ways, 30, "8 queues split over 3 members")

            bodies = [f"m-{i}" for i in range(400)]
            for body in bodies[:200]:
                producer.send(Message(TOPIC, body.encode()))
            assert victim.proc.wait(20) == -9, victim.describe()
            assert victim.killed_at is not None

            def survivors_own_all() -> bool:
                parts = [owned(m) for m in members]
                return sorted(q for p in parts for q in p) == list(range(QUEUES)) and all(parts)

            wait_for(survivors_own_all, 30, "the survivors to own all 8 queues")
            # an upper bound (the sends above overlap it); the 20 s rebalance timer would be far slower
            takeover = time.monotonic() - victim.killed_at
            for body in bodies[200:]:
                producer.send(Message(TOPIC, body.encode()))

            printed_by_victim = Counter(e["body"] for e in victim.of("message"))

            def everything_consumed() -> bool:
                with lock:
                    return all(received[b] or printed_by_victim[b] for b in bodies)

            wait_for(everything_consumed, 30, "every message consumed")
        finally:
            for m in members:
                m.shutdown()
            producer.shutdown()
            if victim is not None:
                victim.stop()
        with lock:
            total = received + printed_by_victim
        duplicates = sum(total[b] - 1 for b in bodies)
        print(
            f"victim printed {sum(printed_by_victim.values())} before SIGKILL; survivors took over "
            f"within {takeover:.3f}s; {len(bodies)} sent, {duplicates} duplicate deliveries"
        )
        assert all(total[b] >= 1 for b in bodies)
        assert takeover < 5.0, "takeover should follow the broker's notify, not the 20 s timer"
