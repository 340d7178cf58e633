"""Consumer churn: a 3-member group on 8 queues; a random member SIGKILLed and replaced every few s.

A ``tidemq serve`` subprocess holds the topic (8 queues). Members are processes
(:mod:`bench.chaos.churn_member`) that append every consumed body to their own file before
acknowledging it. While ``messages`` unique bodies are produced, every 2-4 s a random member is
SIGKILLed (by pid) and a new one started, until at least ``kills`` kills happened and everything was
produced. Then the survivors consume the rest and stop cleanly (SIGTERM), the broker is stopped
cleanly (SIGTERM), and:

* nothing lost: every produced body appears in some member's file;
* duplicates (redelivery after a kill: the killed member's uncommitted range) counted, as a ratio;
* committed offsets reach the max offsets: ``consumerOffset.json`` vs the queues' max offsets.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson

from bench.chaos.common import ScenarioResult, kill_pid, poll
from tidemq.store import MessageStore
from tidemq.store.config import MessageStoreConfig
from tidemq.testing import ServeProcess

TOPIC, GROUP, QUEUES = "ChaosChurn", "chaos-churn", 8


class Member:
    """One consumer process and its output file."""

    def __init__(self, workdir: Path, namesrv: str, n: int) -> None:
        self.out = workdir / f"member-{n}.txt"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.chaos.churn_member",
                "--namesrv",
                namesrv,
                "--group",
                GROUP,
                "--topic",
                TOPIC,
                "--out",
                str(self.out),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def wait_ready(self, timeout: float = 60) -> bool:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip() == "ready"


def consumed(workdir: Path) -> list[bytes]:
    """Every line of every member file (duplicates included)."""
    out: list[bytes] = []
    for f in sorted(workdir.glob("member-*.txt")):
        out += f.read_bytes().splitlines()
    return out


def committed_vs_max(store_dir: Path) -> tuple[int, int]:
    """(sum of committed offsets of GROUP on TOPIC, sum of max offsets) after a clean stop."""
    data = orjson.loads((store_dir / "config" / "consumerOffset.json").read_bytes())
    table = data["offsetTable"].get(f"{TOPIC}@{GROUP}", {})
    committed = sum(int(v) for v in table.values())
    store = MessageStore(MessageStoreConfig(store_path_root_dir=str(store_dir)), store_host="127.0.0.1:1")
    store.load()
    try:
        high = sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES))
    finally:
        store.shutdown()
    return committed, high


def run(
    workdir: Path, *, messages: int = 50_000, kills: int = 20, seed: int = 10, timeout: float = 900
) -> ScenarioResult:
    """The churn scenario (see the module doc); bounded by ``timeout`` seconds."""
    from tidemq.client.producer.producer import Producer
    from tidemq.protocol.message import Message

    result = ScenarioResult("churn")
    start = time.monotonic()
    deadline = start + timeout
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    store_dir = workdir / "store"
    serve = ServeProcess(store_dir, log_path=workdir / "serve.log")
    members: list[Member] = []
    killed = 0
    sent: set[bytes] = set()
    try:
        serve.start()
        producer = Producer(
            namesrv_addr=serve.namesrv_addr, producer_group="chaos-churn-p", default_topic_queue_nums=QUEUES
        )
        producer.start()
        producer.send(Message(TOPIC, b"warmup"))  # creates the topic with 8 queues
        sent.add(b"warmup")
        members = [Member(workdir, serve.namesrv_addr, n) for n in range(3)]
        for m in members:
            m.wait_ready()
        done_producing = threading.Event()

        def produce() -> None:
            batch = 32
            for i in range(0, messages, batch):
                bodies = [f"m-{j}".encode() for j in range(i, min(i + batch, messages))]
                producer.send_batch([Message(TOPIC, b) for b in bodies])
                sent.update(bodies)
                time.sleep(0.01)  # pacing: spread the messages over the churn
            done_producing.set()

        sender = threading.Thread(target=produce, name="churn-producer", daemon=True)
        sender.start()
        n = 3
        while (killed < kills or not done_producing.is_set()) and time.monotonic() < deadline:
            time.sleep(rng.uniform(2.0, 4.0))  # the churn period (fault timing)
            victim = members.pop(rng.randrange(len(members)))
            kill_pid(victim.proc)
            killed += 1
            fresh = Member(workdir, serve.namesrv_addr, n)
            n += 1
            fresh.wait_ready()
            members.append(fresh)
        sender.join(max(1.0, deadline - time.monotonic()))
        producer.shutdown()
        all_in = poll(lambda: sent <= set(consumed(workdir)), max(1.0, deadline - time.monotonic()), 0.5)
        for m in members:
            kill_pid(m.proc, sig=15)  # SIGTERM: clean shutdown, offsets committed
        members = []
        serve.stop()
        lines = consumed(workdir)
        distinct = set(lines)
        lost = len(sent - distinct)
        committed, high = committed_vs_max(store_dir)
        result.figures.update(
            messages=len(sent),
            kills=killed,
            consumed=len(lines),
            lost=lost,
            duplicates=len(lines) - len(distinct),
            duplicate_ratio=f"{(len(lines) - len(distinct)) / max(1, len(distinct)):.2%}",
            committed_offsets=committed,
            max_offsets=high,
        )
        if lost or not all_in:
            result.fail(f"{lost} of {len(sent)} messages never consumed")
        if committed != high:
            result.fail(f"committed offsets {committed} != max offsets {high}")
        if killed < kills:
            result.fail(f"only {killed} of {kills} kills within {timeout:g}s")
    finally:
        for m in members:
            kill_pid(m.proc)
        kill_pid(serve.proc)
    result.seconds = time.monotonic() - start
    return result
