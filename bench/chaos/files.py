"""Damaged store files: each truncated and corrupted in turn, the broker restarted on the copy.

A baseline store is built with an in-process broker (403 messages in ``FA`` (4 queues), ``FB``
(2 queues), ``FC`` (delivered through delay level 1) and ``%RETRY%ga``; committed offsets of two
groups; subscription groups; delay offsets), stopped cleanly twice (so every config file has its
``.bak``) and snapshotted: readable ``(topic, queue, offset, body)``, committed offsets, topics,
groups, delay offsets. For each case a copy is damaged (the broker stopped), a broker started on
it, and the snapshot compared with the baseline:

* ``intact``: nothing differs (recovered from ``.bak`` or rebuilt from the commit log);
* ``refused``: the broker did not start and said why (one line, the file named);
* ``warned``: something differs and a WARNING said what was lost or rebuilt;
* ``SILENT``: something differs and nothing said so: the failure this scenario exists to catch.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.chaos.common import ScenarioResult
from tidemq.errors import TideMQError
from tidemq.protocol.message import MessageConst
from tidemq.protocol.message_codec import decode_messages
from tidemq.store import GetMessageStatus
from tidemq.store.results import MessageExtBrokerInner

SCHEDULE = "SCHEDULE_TOPIC_XXXX"
OVERRIDES: dict[str, Any] = {
    "message_delay_level": "1s 2s",
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 20 * 100,
    "max_hash_slot_num": 1000,  # small index files: the copies stay small
    "max_index_num": 4000,
}
RECOVERY_WORDS = (
    "lost",
    "damaged",
    "truncat",
    "rebuilt",
    "re-created",
    "missing",
    "backup",
    "corrupt",
    "skipped",
)


@dataclass
class Snapshot:
    """What a user can observe of a store through a broker."""

    messages: set[tuple[str, int, int, bytes]]
    offsets: dict[str, dict[int, int]]
    topics: set[str]
    groups: set[str]
    delay: dict[int, int]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _read_all(store: Any) -> set[tuple[str, int, int, bytes]]:
    out: set[tuple[str, int, int, bytes]] = set()
    for topic, qids in store.consume_queues.topics_and_queues().items():
        if topic == SCHEDULE:
            continue
        for q in qids:
            offset = store.get_min_offset_in_queue(topic, q)
            high = store.get_max_offset_in_queue(topic, q)
            while offset < high:
                res = store.get_message("chaos", topic, q, offset, 32, None)
                if res.status is GetMessageStatus.FOUND:
                    for m in decode_messages(b"".join(res.message_buffers)):
                        out.add((topic, q, m.queue_offset, m.body))
                if res.next_begin_offset <= offset:
                    break
                offset = res.next_begin_offset
    return out


def snapshot(broker: Any) -> Snapshot:
    sms = broker.schedule_message_service
    return Snapshot(
        messages=_read_all(broker.store),
        offsets={k: dict(v) for k, v in broker.consumer_offset_manager.offset_table.items()},
        topics=set(broker.topic_config_manager.topics()),
        groups=set(broker.subscription_group_manager.subscription_group_table),
        delay=dict(sms.offset_table) if sms is not None else {},
    )


async def _with_broker(store_dir: Path, action: Callable[[Any], Any]) -> Any:
    from tidemq.broker.broker import Broker
    from tidemq.testing import make_broker_configs

    bc, sc = make_broker_configs(store_dir, None, **OVERRIDES)
    broker = Broker(bc, sc)
    try:
        await broker.start()
        result = action(broker)
        if asyncio.iscoroutine(result):
            result = await result
        return result
    finally:
        await broker.shutdown()


async def _populate(broker: Any) -> None:
    from tidemq.broker.topic_config import make_topic_config

    store = broker.store
    tcm = broker.topic_config_manager
    for topic, queues in (("FA", 4), ("FB", 2), ("FC", 1), ("%RETRY%ga", 1)):
        tcm.update_topic_config(make_topic_config(topic, queues))
    for topic, queues, per in (("FA", 4, 50), ("FB", 2, 50)):
        for q in range(queues):
            for i in range(per):
                assert store.put_message(
                    MessageExtBrokerInner(topic, f"{topic}-{q}-{i}".encode(), queue_id=q)
                ).is_ok
    for i in range(3):
        assert store.put_message(MessageExtBrokerInner("%RETRY%ga", f"retry-{i}".encode(), queue_id=0)).is_ok
    for i in range(100):
        props = {MessageConst.PROPERTY_DELAY_TIME_LEVEL: "1"}
        assert store.put_message(
            MessageExtBrokerInner("FC", f"FC-{i}".encode(), queue_id=0, properties=props)
        ).is_ok
    delivered = asyncio.Event()
    sms = broker.schedule_message_service
    sms.on_delivered = lambda topic, qid: (
        delivered.set() if store.get_max_offset_in_queue("FC", 0) >= 100 else None
    )
    if store.get_max_offset_in_queue("FC", 0) < 100:
        await asyncio.wait_for(delivered.wait(), 30)  # the delayed messages are delivered
    for group in ("ga", "gb"):
        broker.subscription_group_manager.find_subscription_group_config(group)
    for q in range(4):
        broker.consumer_offset_manager.commit_offset("chaos", "ga", "FA", q, 10 + q)
    for q in range(2):
        broker.consumer_offset_manager.commit_offset("chaos", "gb", "FB", q, 20 + q)


def build_baseline(workdir: Path) -> tuple[Path, Snapshot]:
    base = workdir / "baseline"
    shutil.rmtree(base, ignore_errors=True)
    asyncio.run(_with_broker(base, _populate))
    asyncio.run(_with_broker(base, lambda b: None))  # second clean stop: every file has a .bak
    snap = asyncio.run(_with_broker(base, snapshot))
    return base, snap


# -- damage -----------------------------------------------------------------------------------------


def truncate(path: Path, rng: random.Random) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(max(0, size // 2 - 3))


def corrupt(path: Path, rng: random.Random, length: int = 60) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as f:
        pos = rng.randrange(0, max(1, size - length)) if size > length else 0
        f.seek(pos)
        f.write(rng.randbytes(min(length, max(1, size))))


def cq_file(store: Path, topic: str = "FA", queue: int = 1) -> Path:
    return sorted((store / "consumequeue" / topic / str(queue)).iterdir())[0]


def commitlog_segments(store: Path) -> list[Path]:
    return sorted((store / "commitlog").iterdir())


def _written_end(seg: Path) -> int:
    data = seg.read_bytes().rstrip(b"\x00")
    return len(data)


def damage_cl_tail_truncate(store: Path, rng: random.Random) -> None:
    last = commitlog_segments(store)[-1]
    end = _written_end(last)
    with open(last, "r+b") as f:  # zero the last ~200 written bytes: a torn tail
        f.seek(max(0, end - 200))
        f.write(bytes(min(200, end)))


def damage_cl_tail_corrupt(store: Path, rng: random.Random) -> None:
    last = commitlog_segments(store)[-1]
    end = _written_end(last)
    with open(last, "r+b") as f:
        f.seek(max(0, end - 150))
        f.write(rng.randbytes(100))


def damage_cl_middle(store: Path, rng: random.Random) -> None:
    segs = commitlog_segments(store)
    seg = segs[len(segs) // 2]
    end = _written_end(seg)
    with open(seg, "r+b") as f:
        f.seek(end // 2)
        f.write(rng.randbytes(200))


def garbage_cq_entries(path: Path, rng: random.Random) -> None:
    """60 bytes of garbage over entries 10..12 of a consume-queue file (the issue's fault)."""
    with open(path, "r+b") as f:
        f.seek(10 * 20)
        f.write(rng.randbytes(60))


def truncate_segment(store: Path, rng: random.Random) -> None:
    """Cut the last commit-log segment file 100 bytes before its written end (the file gets shorter)."""
    last = commitlog_segments(store)[-1]
    end = _written_end(last)
    with open(last, "r+b") as f:
        f.truncate(max(0, end - 100))


def _abort(store: Path) -> None:
    (store / "abort").touch()


def cases() -> list[tuple[str, Callable[[Path, random.Random], None]]]:
    """``(name, damage(store, rng))`` for every file and kind of damage."""
    out: list[tuple[str, Callable[[Path, random.Random], None]]] = []
    for name in ("consumerOffset.json", "topics.json", "subscriptionGroup.json", "delayOffset.json"):
        out.append((f"{name} truncated", lambda s, r, n=name: truncate(s / "config" / n, r)))
        out.append((f"{name} corrupted", lambda s, r, n=name: corrupt(s / "config" / n, r, 20)))
    for name in ("consumerOffset.json", "topics.json"):

        def gone(s: Path, r: random.Random, n: str = name) -> None:
            (s / "config" / n).unlink()
            (s / "config" / f"{n}.bak").unlink()

        out.append((f"{name} and .bak deleted", gone))
    out += [
        ("consume queue deleted", lambda s, r: cq_file(s).unlink()),
        ("consume queue deleted+abort", lambda s, r: (cq_file(s).unlink(), _abort(s))),
        ("consume queue truncated", lambda s, r: truncate(cq_file(s), r)),
        ("consume queue corrupted", lambda s, r: garbage_cq_entries(cq_file(s), r)),
        ("commit-log tail truncated", lambda s, r: (damage_cl_tail_truncate(s, r), _abort(s))),
        ("commit-log tail corrupted", lambda s, r: (damage_cl_tail_corrupt(s, r), _abort(s))),
        ("commit-log segment file truncated", lambda s, r: truncate_segment(s, r)),
        ("commit-log middle corrupted", lambda s, r: (damage_cl_middle(s, r), _abort(s))),
        ("checkpoint truncated", lambda s, r: (truncate(s / "checkpoint", r), _abort(s))),
        ("checkpoint corrupted", lambda s, r: (corrupt(s / "checkpoint", r, 16), _abort(s))),
    ]
    return out


def compare(base: Snapshot, got: Snapshot) -> list[str]:
    """What the damaged store lost compared with the baseline (empty: nothing)."""
    diffs: list[str] = []
    lost = base.messages - got.messages
    if lost:
        diffs.append(f"{len(lost)} messages unreadable")
    for key, queues in base.offsets.items():
        for q, off in queues.items():
            now = got.offsets.get(key, {}).get(q)
            if now != off:
                diffs.append(f"offset {key}/{q} {off} -> {now}")
                break
    missing_topics = base.topics - got.topics
    if missing_topics:
        diffs.append(f"topics missing: {sorted(missing_topics)}")
    for level, off in base.delay.items():
        if got.delay.get(level, 0) < off:
            diffs.append(f"delay level {level} offset {off} -> {got.delay.get(level, 0)}")
    return diffs


def run_case(
    base_dir: Path,
    base: Snapshot,
    workdir: Path,
    name: str,
    damage: Callable[[Path, random.Random], None],
    seed: int,
) -> dict[str, Any]:
    copy = workdir / ("case-" + "".join(c if c.isalnum() else "-" for c in name))
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(base_dir, copy)
    (copy / "lock").unlink(missing_ok=True)
    damage(copy, random.Random(seed))
    collector = _Collect()
    tidemq_log = logging.getLogger("tidemq")
    saved = tidemq_log.level, tidemq_log.propagate
    tidemq_log.addHandler(collector)
    tidemq_log.setLevel(logging.WARNING)
    tidemq_log.propagate = False  # the warnings are judged here, not printed
    try:
        got = asyncio.run(_with_broker(copy, snapshot))
    except TideMQError as exc:
        return {"case": name, "verdict": "refused", "detail": str(exc).splitlines()[0][:160]}
    finally:
        tidemq_log.removeHandler(collector)
        tidemq_log.setLevel(saved[0])
        tidemq_log.propagate = saved[1]
    diffs = compare(base, got)
    lines = [line.replace(str(copy), "<store>") for line in collector.lines]  # the path names the case
    said = [line for line in lines if any(w in line.lower() for w in RECOVERY_WORDS)]
    if not diffs:
        verdict = "intact"
    elif said:
        verdict = "warned"
    else:
        verdict = "SILENT"
    return {
        "case": name,
        "verdict": verdict,
        "detail": "; ".join(diffs)[:200],
        "warnings": len(said),
        "first_warning": said[0][:200] if said else "",
    }


def run(workdir: Path, *, seed: int = 10) -> ScenarioResult:
    """Every case of :func:`cases`; fails on a SILENT loss or an undamaged-looking crash."""
    result = ScenarioResult("files")
    start = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    base_dir, base = build_baseline(workdir)
    verdicts: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    for i, (name, damage) in enumerate(cases()):
        row = run_case(base_dir, base, workdir, name, damage, seed + i)
        rows.append(row)
        verdicts[name] = f"{row['verdict']}" + (f" ({row['detail']})" if row.get("detail") else "")
        if row["verdict"] == "SILENT":
            result.fail(f"{name}: silent loss: {row['detail']}")
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    result.figures.update(baseline_messages=len(base.messages), cases=len(rows), **counts)
    result.figures["verdicts"] = verdicts
    result.seconds = time.monotonic() - start
    if os.environ.get("CHAOS_FILES_ROWS"):
        result.figures["rows"] = rows
    return result
