"""Crash: SIGKILL ``tidemq serve`` at random moments of a send loop; every SEND_OK must survive.

Per broker life: start ``tidemq serve`` on the same store (``--flush sync`` or ``async``), start a
producer (the tidemq ``Producer`` in this process, or the RocketMQ C++ client's producer as a
subprocess: ``tests/interop/cpp_producer.py``), let it send unique bodies for a random 0.3-2.0 s,
then SIGKILL the broker by pid. After the last life the store is opened directly (recovery runs)
and every acknowledged message is looked up at its reported queue offset (and, for tidemq sends,
its commit-log offset from the offset msg id) and its body compared.

SYNC_FLUSH: an acknowledged message is on disk, so every one must be readable. ASYNC_FLUSH: a
SIGKILL keeps the page cache, so they survive too; a power cut would not (the figure is reported,
not required).
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.chaos.common import ScenarioResult, kill_pid
from tidemq.protocol.message_codec import decode_messages, decode_offset_msg_id
from tidemq.store import GetMessageStatus, MessageStore
from tidemq.store.config import MessageStoreConfig
from tidemq.testing import ServeProcess

TOPIC = "ChaosCrash"
CPP_PRODUCER = Path(__file__).resolve().parents[2] / "tests" / "interop" / "cpp_producer.py"


def cpp_available() -> bool:
    """Whether the RocketMQ C++ client (``rocketmq==0.4.4``) can be imported here."""
    try:
        import rocketmq.client  # noqa: F401
    except Exception:
        return False
    return CPP_PRODUCER.exists()


class Acks:
    """Acknowledged sends: ``(body, queue_id or -1, queue_offset, commit-log offset or -1)``."""

    def __init__(self) -> None:
        self.items: list[tuple[str, int, int, int]] = []
        self.lock = threading.Lock()

    def add(self, body: str, queue_id: int, queue_offset: int, phy: int) -> None:
        with self.lock:
            self.items.append((body, queue_id, queue_offset, phy))


def tidemq_life(serve: ServeProcess, life: int, seconds: float, acks: Acks) -> int:
    """Send with the tidemq producer until the broker dies ``seconds`` s in; returns sends acknowledged."""
    from tidemq.client.producer.producer import Producer
    from tidemq.protocol.message import Message

    producer = Producer(
        namesrv_addr=serve.namesrv_addr,
        producer_group="chaos-crash",
        retry_times_when_send_failed=0,
        send_msg_timeout=3.0,
    )
    producer.start()
    stop = threading.Event()
    count = 0

    def loop() -> None:
        nonlocal count
        i = 0
        while not stop.is_set():
            body = f"t{life}-{i}"
            i += 1
            try:
                result = producer.send(Message(TOPIC, body.encode()))
            except Exception:
                if stop.is_set():
                    return
                continue
            if result.send_status == "SEND_OK":
                _, phy = decode_offset_msg_id(result.offset_msg_id)
                acks.add(body, result.message_queue.queue_id, result.queue_offset, phy)
                count += 1

    thread = threading.Thread(target=loop, name=f"crash-send-{life}", daemon=True)
    thread.start()
    time.sleep(seconds)  # the random moment of the crash (fault timing, not synchronisation)
    serve.kill()
    stop.set()
    thread.join(30)
    with contextlib.suppress(Exception):
        producer.shutdown()
    return count


def cpp_life(serve: ServeProcess, life: int, seconds: float, acks: Acks) -> int:
    """Send with the C++ producer (subprocess) and kill the broker ``seconds`` s after its first ack."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(CPP_PRODUCER),
            "--namesrv",
            serve.namesrv_addr,
            "--topic",
            TOPIC,
            "--group",
            "chaos-cpp",
            "--mode",
            "sync",
            "--count",
            "1000000",
            "--prefix",
            f"c{life}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    count = 0
    first = threading.Event()

    def reader() -> None:
        nonlocal count
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "sent" and event.get("status") == 0:
                acks.add(event["body"], -1, int(event["offset"]), -1)
                count += 1
                first.set()

    thread = threading.Thread(target=reader, name=f"crash-cpp-{life}", daemon=True)
    thread.start()
    try:
        first.wait(30)
        time.sleep(seconds)  # the random moment of the crash
        serve.kill()
        time.sleep(0.2)  # let acks already on the wire be printed before the producer goes
    finally:
        kill_pid(proc)
        thread.join(10)
    return count


def verify(store_dir: Path, acks: Acks) -> tuple[int, list[str]]:
    """Open the store (recovery runs) and check every ack; returns (readable count, problems)."""
    cfg = MessageStoreConfig(store_path_root_dir=str(store_dir))
    store = MessageStore(cfg, store_host="127.0.0.1:1")
    store.load()
    problems: list[str] = []
    readable = 0
    try:
        by_queue_offset: dict[tuple[int, int], str] = {}
        for qid in store.consume_queues.topics_and_queues().get(TOPIC, []):
            offset = store.get_min_offset_in_queue(TOPIC, qid)
            while (
                res := store.get_message("verify", TOPIC, qid, offset, 32, None)
            ).status is GetMessageStatus.FOUND:
                for m in decode_messages(b"".join(res.message_buffers)):
                    by_queue_offset[(qid, m.queue_offset)] = m.body.decode(errors="replace")
                offset = res.next_begin_offset
        at_offset: dict[int, set[str]] = {}
        for (_qid, qoff), body in by_queue_offset.items():
            at_offset.setdefault(qoff, set()).add(body)
        for body, qid, qoff, phy in acks.items:
            ok = by_queue_offset.get((qid, qoff)) == body if qid >= 0 else body in at_offset.get(qoff, set())
            if ok and phy >= 0:
                msg = store.lookup.look_message_by_offset(phy)
                ok = msg is not None and msg.body.decode(errors="replace") == body
            if ok:
                readable += 1
            else:
                problems.append(f"acknowledged {body} (queue {qid} offset {qoff}, phy {phy}) not readable")
    finally:
        store.shutdown()
    return readable, problems


def run_phase(workdir: Path, flush: str, kinds: list[str], rng: random.Random) -> dict[str, Any]:
    """One store, ``len(kinds)`` broker lives each ended by SIGKILL; the figures of the phase."""
    store_dir = workdir / f"store-{flush}"
    acks = Acks()
    sent = {"tidemq": 0, "cpp": 0}
    for life, kind in enumerate(kinds):
        serve = ServeProcess(store_dir, flush=flush, log_path=workdir / f"serve-{flush}.log")
        try:
            serve.start()
            seconds = rng.uniform(0.3, 2.0)
            if kind == "cpp":
                sent["cpp"] += cpp_life(serve, life, seconds, acks)
            else:
                sent["tidemq"] += tidemq_life(serve, life, seconds, acks)
        finally:
            kill_pid(serve.proc)
    readable, problems = verify(store_dir, acks)
    return {
        "kills": len(kinds),
        "acked": len(acks.items),
        "acked_tidemq": sent["tidemq"],
        "acked_cpp": sent["cpp"],
        "readable": readable,
        "lost": len(acks.items) - readable,
        "problems": problems[:5],
    }


def run(
    workdir: Path, *, kills: int = 20, cpp_kills: int = 5, async_kills: int = 5, seed: int = 10
) -> ScenarioResult:
    """The crash scenario: ``kills`` SYNC_FLUSH lives (``cpp_kills`` of them with the C++ producer)
    and ``async_kills`` ASYNC_FLUSH lives."""
    result = ScenarioResult("crash")
    start = time.monotonic()
    rng = random.Random(seed)
    use_cpp = cpp_available()
    kinds = ["cpp" if use_cpp and i < cpp_kills else "tidemq" for i in range(kills)]
    rng.shuffle(kinds)
    sync = run_phase(workdir, "sync", kinds, rng)
    result.figures["SYNC_FLUSH"] = {k: v for k, v in sync.items() if k != "problems"}
    if sync["lost"] or not sync["acked"]:
        result.fail(
            f"SYNC_FLUSH: {sync['lost']} of {sync['acked']} acknowledged messages lost {sync['problems']}"
        )
    if cpp_kills and not use_cpp:
        result.figures["cpp_producer"] = "unavailable (rocketmq==0.4.4 not importable)"
    if async_kills:
        asy = run_phase(workdir, "async", ["tidemq"] * async_kills, rng)
        result.figures["ASYNC_FLUSH"] = {k: v for k, v in asy.items() if k != "problems"}
        result.figures["async_survived"] = f"{asy['readable']}/{asy['acked']}"
    result.figures["sync_lost"] = sync["lost"]
    result.figures["sync_acked"] = sync["acked"]
    result.seconds = time.monotonic() - start
    return result
