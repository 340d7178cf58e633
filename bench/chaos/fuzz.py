"""Fuzzing: malformed frames against the broker and the name server of one ``tidemq serve``.

``workers`` concurrent connections (70 % to the broker, 30 % to the name server) send, until
``frames`` frames went out:

* random bytes; random JSON headers; real request codes with missing, ill-typed and huge
  ``extFields`` and random bodies (sometimes oneway); truncated frames; huge declared lengths;
  opaques outside Java's int range; connections dropped mid-frame.

Every request frame must be answered (a response with its opaque) or its connection closed by the
server within 10 s. Meanwhile a well-behaved client does round trips (send one message, pull it
back by its offset msg id). Afterwards: the process is alive, 0 failed round trips, 0 tracebacks in
its log, log growth per frame, descriptors and RSS back to (near) their baseline once every
connection is gone. The broker runs with ``serverChannelMaxIdleTimeSeconds=10`` (broker.conf) so
stuck connections are reaped within the bench's time.
"""

from __future__ import annotations

import asyncio
import json
import random
import struct
import time
from pathlib import Path
from typing import Any

from bench.chaos.common import ScenarioResult, fd_count, kill_pid, poll, rss_mb
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import FrameDecoder, RemotingCommand
from tidemq.testing import ServeProcess

TOPIC = "ChaosFuzz"
IDLE_S = 10
DESTRUCTIVE = {
    RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.DELETE_TOPIC_IN_NAMESRV,
    RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER,
    RequestCode.UPDATE_BROKER_CONFIG,
    RequestCode.UPDATE_NAMESRV_CONFIG,
    RequestCode.DELETE_EXPIRED_COMMITLOG,
    RequestCode.CLEAN_UNUSED_TOPIC,
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
    RequestCode.REGISTER_BROKER,
    RequestCode.UNREGISTER_BROKER,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
}
"""Legitimate admin operations (no ACL here) that could take the well-behaved client's topic away."""
CODES = [int(c) for c in RequestCode if c not in DESTRUCTIVE]
KEYS = [
    "topic",
    "consumerGroup",
    "queueId",
    "queueOffset",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subscription",
    "subVersion",
    "producerGroup",
    "defaultTopic",
    "defaultTopicQueueNums",
    "bornTimestamp",
    "flag",
    "properties",
    "reconsumeTimes",
    "unitMode",
    "batch",
    "group",
    "offset",
    "delayLevel",
    "originMsgId",
    "key",
    "maxNum",
    "beginTimestamp",
    "endTimestamp",
    "timestamp",
    "msgId",
    "brokerName",
    "brokerAddr",
    "clusterName",
    "namespace",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "i",
    "j",
    "k",
    "l",
    "m",
    "clientId",
    "readQueueNums",
    "writeQueueNums",
    "perm",
    "topicFilterType",
]


def _value(rng: random.Random) -> Any:
    kind = rng.random()
    if kind < 0.25:
        return str(rng.randint(-(2**63), 2**63))
    if kind < 0.4:
        return rng.choice(["", "true", "nope", "-1", "0", "1.5", "NaN", "%RETRY%x", "TBW102", TOPIC])
    if kind < 0.55:
        return "".join(rng.choice("abcXYZ_-%|!@ é\u0000\n") for _ in range(rng.randint(1, 40)))
    if kind < 0.6:
        return "x" * rng.choice([128, 256, 4096, 70_000])  # huge names
    if kind < 0.7:
        return rng.randint(-(2**40), 2**40)  # ill-typed: a number, not a string
    if kind < 0.75:
        return rng.choice([None, True, [1, 2], {"k": "v"}, 1.25])
    return str(rng.randint(0, 16))


def structured_frame(rng: random.Random, opaque: int) -> tuple[bytes, bool]:
    """A request with a real code and fuzzed fields; returns (frame, expects a response)."""
    code = rng.choice(CODES)
    ext = {k: _value(rng) for k in rng.sample(KEYS, rng.randint(0, 12))}
    oneway = rng.random() < 0.1
    header = {
        "code": code,
        "language": rng.choice(["JAVA", "CPP", "PYTHON", 7]),
        "version": rng.choice([317, 409, 0]),
        "opaque": opaque,
        "flag": 2 if oneway else 0,
        "extFields": ext,
        "serializeTypeCurrentRPC": "JSON",
    }
    body = (
        rng.randbytes(rng.choice([0, 0, 16, 200, 2000]))
        if rng.random() < 0.6
        else json.dumps(
            {"clientID": _value(rng), "consumerDataSet": [{"groupName": _value(rng)}], "producerDataSet": []}
        ).encode()
    )
    raw = json.dumps(header, default=str).encode()
    return struct.pack(">II", 4 + len(raw) + len(body), len(raw)) + raw + body, not oneway


def bad_frame(rng: random.Random) -> bytes:
    """A frame the server must refuse by closing the connection."""
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randbytes(rng.randint(1, 300))
    if kind == 1:  # random JSON header
        raw = json.dumps(
            rng.choice([{"code": "x"}, [1, 2], {"opaque": 1}, "str", {"code": 10, "flag": {}}])
        ).encode()
        return struct.pack(">II", 4 + len(raw), len(raw)) + raw
    if kind == 2:  # huge declared length
        return struct.pack(">II", rng.choice([0x7FFFFFFF, 0xFFFFFFF0, 64 * 1024 * 1024]), 10) + b"x" * 10
    if kind == 3:  # opaque outside int32
        raw = json.dumps({"code": 34, "opaque": rng.choice([2**31, -(2**31) - 7, 2**70]), "flag": 0}).encode()
        return struct.pack(">II", 4 + len(raw), len(raw)) + raw
    if kind == 4:  # header length beyond the frame
        return struct.pack(">II", 8, 1000) + b"abcd"
    return struct.pack(">II", 3, 0)  # length below the minimum


class Counters:
    def __init__(self) -> None:
        self.frames = 0
        self.requests = 0
        self.answered = 0
        self.closed_unanswered = 0
        self.unanswered = 0
        self.connections = 0


async def _session(addr: tuple[str, int], rng: random.Random, c: Counters) -> None:
    try:
        reader, writer = await asyncio.open_connection(*addr)
    except OSError:
        return
    c.connections += 1
    pending: set[int] = set()
    try:
        kind = rng.random()
        if kind < 0.15:  # garbage, then the server closes
            writer.write(bad_frame(rng))
            c.frames += 1
        elif kind < 0.22:  # dropped mid-frame
            frame, _ = structured_frame(rng, rng.randint(1, 2**31 - 1))
            writer.write(frame[: rng.randint(1, max(1, len(frame) - 1))])
            c.frames += 1
            await writer.drain()
            writer.transport.abort()
            return
        else:
            for _ in range(rng.randint(1, 30)):
                opaque = rng.randint(1, 2**31 - 1)
                frame, expects = structured_frame(rng, opaque)
                writer.write(frame)
                c.frames += 1
                c.requests += expects
                if expects:
                    pending.add(opaque)
            if rng.random() < 0.1:
                writer.write(bad_frame(rng))
                c.frames += 1
        await writer.drain()
        decoder = FrameDecoder()
        deadline = time.monotonic() + 10
        while pending and time.monotonic() < deadline:
            try:
                data = await asyncio.wait_for(reader.read(65536), max(0.01, deadline - time.monotonic()))
            except TimeoutError:
                break
            if not data:  # closed by the server: what it did not answer is accounted as closed
                c.closed_unanswered += len(pending)
                pending.clear()
                break
            for cmd in decoder.feed(data):
                if cmd.opaque in pending:
                    pending.discard(cmd.opaque)
                    c.answered += 1
        c.unanswered += len(pending)
    except (OSError, ConnectionError):
        c.closed_unanswered += len(pending)
    except Exception:  # a response we cannot decode counts against the server
        c.unanswered += len(pending)
    finally:
        writer.transport.abort()


async def _round_trips(serve: ServeProcess, stop: asyncio.Event) -> tuple[int, int]:
    """Send one message and read it back by its commit-log offset (VIEW_MESSAGE_BY_ID), until
    ``stop``; returns (ok, failed)."""
    from tidemq.client.producer.producer import AsyncProducer
    from tidemq.protocol.message import Message
    from tidemq.protocol.message_codec import decode_messages, decode_offset_msg_id
    from tidemq.remoting import RemotingClient

    producer = AsyncProducer(namesrv_addr=serve.namesrv_addr, producer_group="chaos-fuzz-good")
    await producer.start()
    client = RemotingClient()
    ok = failed = i = 0
    try:
        while not stop.is_set():
            body = f"good-{i}".encode()
            i += 1
            try:
                sent = await producer.send(Message(TOPIC, body))
                _, phy = decode_offset_msg_id(sent.offset_msg_id)
                request = RemotingCommand.create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phy)})
                resp = await client.invoke(serve.broker_addr, request, 10.0)
                msgs = decode_messages(resp.body) if resp.code == ResponseCode.SUCCESS else []
                if msgs and msgs[0].body == body:
                    ok += 1
                else:
                    failed += 1
            except Exception:
                failed += 1
            try:
                await asyncio.wait_for(stop.wait(), 0.05)
            except TimeoutError:
                pass
    finally:
        await client.close()
        await producer.shutdown()
    return ok, failed


async def _fuzz(serve: ServeProcess, frames: int, workers: int, seed: int, c: Counters) -> tuple[int, int]:
    def split(addr: str) -> tuple[str, int]:
        host, port = addr.rsplit(":", 1)
        return host, int(port)

    broker, namesrv = split(serve.broker_addr), split(serve.namesrv_addr)
    stop = asyncio.Event()
    good = asyncio.ensure_future(_round_trips(serve, stop))

    async def worker(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        while c.frames < frames:
            await _session(broker if rng.random() < 0.7 else namesrv, rng, c)

    await asyncio.gather(*(worker(n) for n in range(workers)))
    stop.set()
    return await good


def run(workdir: Path, *, frames: int = 1_000_000, workers: int = 32, seed: int = 10) -> ScenarioResult:
    """The fuzzing scenario (see the module doc)."""
    result = ScenarioResult("fuzz")
    start = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / "broker.conf"
    conf.write_text(f"brokerName=chaos-fuzz\nserverChannelMaxIdleTimeSeconds={IDLE_S}\n")
    log_path = workdir / "serve.log"
    serve = ServeProcess(workdir / "store", extra_args=["-c", str(conf)], log_path=log_path)
    try:
        serve.start()
        pid = serve.pid
        warm = Counters()
        asyncio.run(_fuzz(serve, 200, 4, seed + 1, warm))  # warm up: routes, topics, caches
        poll(lambda: fd_count(pid) <= 40, IDLE_S + 30, 0.5)
        fd0, rss0, log0 = fd_count(pid), rss_mb(pid), log_path.stat().st_size
        c = Counters()
        t0 = time.monotonic()
        ok, failed = asyncio.run(_fuzz(serve, frames, workers, seed, c))
        fuzz_s = time.monotonic() - t0
        fd_peak, rss_peak = fd_count(pid), rss_mb(pid)
        alive = serve.proc is not None and serve.proc.poll() is None
        back = poll(lambda: fd_count(pid) <= fd0 + 3, IDLE_S + 60, 0.5)
        poll(lambda: rss_mb(pid) <= rss0 * 1.2 + 5, 20, 1.0)
        fd1, rss1 = fd_count(pid), rss_mb(pid)
        log_bytes = log_path.stat().st_size - log0
        tracebacks = log_path.read_text(errors="replace").count("Traceback")
        result.figures.update(
            frames=c.frames,
            frames_per_s=round(c.frames / fuzz_s),
            connections=c.connections,
            requests=c.requests,
            answered=c.answered,
            closed_before_answer=c.closed_unanswered,
            unanswered=c.unanswered,
            round_trips_ok=ok,
            round_trips_failed=failed,
            tracebacks=tracebacks,
            log_kb=round(log_bytes / 1024, 1),
            log_bytes_per_1k_frames=round(1000 * log_bytes / max(1, c.frames)),
            fds=f"{fd0}->{fd_peak}->{fd1}",
            rss_mb=f"{rss0:.0f}->{rss_peak:.0f}->{rss1:.0f}",
        )
        if not alive:
            result.fail("the broker process died")
        if failed or not ok:
            result.fail(f"{failed} failed round trips ({ok} ok)")
        if c.unanswered:
            result.fail(f"{c.unanswered} requests neither answered nor closed within 10 s")
        if tracebacks:
            result.fail(f"{tracebacks} tracebacks in {log_path}")
        if not back:
            result.fail(f"descriptors did not return to baseline: {fd0} -> {fd1}")
        if rss1 > rss0 * 1.2 + 10:
            result.fail(f"RSS did not return near baseline: {rss0:.0f} -> {rss1:.0f} MB")
        if log_bytes > 2 * 1024 * 1024 + 200 * c.frames // 1000:
            result.fail(f"log grew by {log_bytes} bytes for {c.frames} frames")
    finally:
        kill_pid(serve.proc, sig=15)
        kill_pid(serve.proc)
    result.seconds = time.monotonic() - start
    return result
