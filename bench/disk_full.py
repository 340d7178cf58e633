"""A full disk never costs an acknowledged message: the long form of tests/reliability/test_disk_full.py.

On a size-limited tmpfs (root only) a broker with small segments is filled with acknowledged sends
(ASYNC_FLUSH, then SYNC_FLUSH on a fresh store) until it refuses them; then:

* the refusal is SERVICE_NOT_AVAILABLE with RocketMQ's "disk is full" remark, at what df says;
* every acknowledged message is readable, live and after a restart on the full disk;
* the first send accepted after the ballast is removed, and how long that took;
* three delayed messages that come due during a ``--full-seconds`` full-disk period (default 60 s,
  the issue's claim) are delivered once space returns, and are all there after a restart;
* a backlog no group has consumed survives retention with the disk above diskMaxUsedSpaceRatio
  and every segment expired.

Also the broker's ratio against df's on this machine's own disk. Prints one JSON line. Run:
``python -m bench.disk_full [--fs-mib 128] [--segment-kib 4096] [--full-seconds 60]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tidemq.client.producer.producer import AsyncProducer
from tidemq.errors import BrokerError
from tidemq.protocol.message import Message
from tidemq.protocol.message_codec import decode_messages
from tidemq.store.disk import disk_usage
from tidemq.testing import Cluster, run_cluster

BODY = random.Random(24).randbytes(16 * 1024)


def df_percent(path: Path) -> int:
    """df's Use% of the file system holding ``path``."""
    out = subprocess.run(["df", "--output=pcent", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.splitlines()[-1].strip().rstrip("%"))


def fill_to(fs: Path, percent: float) -> None:
    """Grow or shrink ``fs/ballast`` so the file system is ``percent`` used (df's definition)."""
    ballast = fs / "ballast"
    have = ballast.stat().st_size if ballast.exists() else 0
    usage = disk_usage(fs)
    want = max(0, have + int((usage.used + usage.available) * percent / 100) - usage.used)
    with open(ballast, "ab") as f:
        f.truncate(min(have, want))
        f.seek(0, os.SEEK_END)
        while f.tell() < want:
            f.write(b"\xff" * min(1 << 20, want - f.tell()))


def readable(cluster: Cluster, topic: str) -> list[bytes]:
    """Every body a consumer of ``topic`` can read now, in queue order."""
    store = cluster.broker.store
    out: list[bytes] = []
    for qid in store.consume_queues.topics_and_queues().get(topic, []):
        offset = store.get_min_offset_in_queue(topic, qid)
        while True:
            result = store.get_message("b", topic, qid, offset, 32, None)
            if not result.message_count:
                break
            out += [m.body for buf in result.message_buffers for m in decode_messages(buf)]
            offset = result.next_begin_offset
    return out


async def wait(cond: Any, timeout: float) -> float:
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)
    return time.monotonic() - start


async def fill_run(fs: Path, flush: str, store: dict[str, Any]) -> dict[str, Any]:
    """Fill with acknowledged sends until refused; check reads, restart, resume."""
    async with run_cluster(fs / flush, flush_disk_type=flush, **store) as cluster:
        fill_to(fs, 50)
        producer = AsyncProducer(
            namesrv_addr=cluster.namesrv_addr, producer_group="pg", retry_times_when_send_failed=0
        )
        await producer.start()
        acked: list[bytes] = []
        start = time.monotonic()
        try:
            while True:
                body = b"%08d" % len(acked) + BODY
                try:
                    await producer.send(Message("Full", body))
                except BrokerError as exc:
                    refusal = exc
                    break
                acked.append(body)
            fill_s = time.monotonic() - start
            refused_at = df_percent(fs)
            live_ok = sorted(readable(cluster, "Full")) == acked
            await cluster.restart_broker()
            restart_ok = sorted(readable(cluster, "Full")) == acked
            (fs / "ballast").unlink()
            t0 = time.monotonic()
            while True:
                try:
                    await producer.send(Message("Full", b"after"))
                    break
                except BrokerError:
                    await asyncio.sleep(0.01)
            resume_ms = (time.monotonic() - t0) * 1000
        finally:
            await producer.shutdown()
        return {
            "acked": len(acked),
            "fill_s": round(fill_s, 2),
            "refused_code": refusal.code,
            "remark_has_disk_full": "disk is full [CL:" in refusal.remark and "disk full" in refusal.remark,
            "refused_at_df_pct": refused_at,
            "lost_live": 0 if live_ok else len(acked) - len(readable(cluster, "Full")),
            "lost_after_restart": 0 if restart_ok else -1,
            "resume_after_free_ms": round(resume_ms, 1),
        }


async def delay_run(fs: Path, store: dict[str, Any], full_seconds: float) -> dict[str, Any]:
    """Three delayed messages due during a full-disk period: delivered after it and after a restart."""
    async with run_cluster(fs / "delay", **store) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg")
        await producer.start()
        try:
            for i in range(3):
                msg = Message("Later", b"delayed %d" % i)
                msg.delay_time_level = 1
                await producer.send(msg)
        finally:
            await producer.shutdown()
        fill_to(fs, 95)
        full_at = time.monotonic()
        service = cluster.broker.schedule_message_service
        assert service is not None
        await wait(lambda: service.disk_full_waits > 0, 10)
        await asyncio.sleep(max(0.0, full_seconds / 2 - (time.monotonic() - full_at)))
        await cluster.restart_broker()  # a restart in the middle of the full period
        await asyncio.sleep(max(0.0, full_seconds - (time.monotonic() - full_at)))
        during = len(readable(cluster, "Later"))
        (fs / "ballast").unlink()
        delivered_s = await wait(lambda: len(readable(cluster, "Later")) == 3, 30)
        await cluster.restart_broker()
        after_restart = sorted(readable(cluster, "Later"))
        return {
            "full_s": round(time.monotonic() - full_at - delivered_s, 1),
            "delivered_during_full": during,
            "delivered_after_free_s": round(delivered_s, 2),
            "after_restart": len(after_restart),
            "exactly_once": after_restart == [b"delayed 0", b"delayed 1", b"delayed 2"],
        }


async def backlog_run(fs: Path, store: dict[str, Any]) -> dict[str, Any]:
    """An unconsumed backlog on a disk above diskMaxUsedSpaceRatio, every segment expired."""
    async with run_cluster(fs / "backlog", file_reserved_time=0, **store) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg")
        await producer.start()
        try:
            acked = [b"%08d" % i + BODY for i in range(1000)]
            for body in acked:
                await producer.send(Message("Backlog", body))
        finally:
            await producer.shutdown()
        broker = cluster.broker
        for qid in broker.store.consume_queues.topics_and_queues()["Backlog"]:
            broker.consumer_offset_manager.commit_offset("b", "g", "Backlog", qid, 0)
        fill_to(fs, 85)
        for _ in range(3):
            await broker._retention_check()
        left = sorted(readable(cluster, "Backlog"))
        return {"backlog": len(acked), "kept": len(left), "disk_pct": df_percent(fs)}


async def main_async(args: argparse.Namespace, fs: Path) -> dict[str, Any]:
    store = {
        "mapped_file_size_commit_log": args.segment_kib * 1024,
        "mapped_file_size_consume_queue": 20 * 10_000,
        "message_index_enable": False,
        "max_message_size": 256 * 1024,
        "message_delay_level": "1s 5s",
    }
    out: dict[str, Any] = {"fs_mib": args.fs_mib, "segment_kib": args.segment_kib}
    for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        out[flush.lower()] = await fill_run(fs, flush, store)
        shutil.rmtree(fs / flush)
    out["backlog"] = await backlog_run(fs, store)
    shutil.rmtree(fs / "backlog")
    out["delay"] = await delay_run(fs, store, args.full_seconds)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fs-mib", type=int, default=128)
    parser.add_argument("--segment-kib", type=int, default=4096)
    parser.add_argument("--full-seconds", type=float, default=60.0)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench.disk_full mounts a tmpfs: run it as root")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with tempfile.TemporaryDirectory() as tmp:
        fs = Path(tmp) / "fs"
        fs.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.fs_mib}m", "tmpfs", str(fs)], check=True)
        try:
            out = asyncio.run(main_async(args, fs))
        finally:
            subprocess.run(["umount", "-l", str(fs)], check=False)
        root = Path(tmp)
        out["machine_disk"] = {"broker_pct": round(disk_usage(root).percent, 2), "df_pct": df_percent(root)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
