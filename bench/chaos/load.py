"""Load: many connections heartbeating and sending, many consumer groups pulling, for minutes.

Against one ``tidemq serve`` (SYNC_FLUSH off): ``connections`` client connections (one
``RemotingClient`` each) send a HEART_BEAT every 10 s and one message every ``send_every`` s
(SEND_MESSAGE_V2, 256 bytes); ``groups`` of them also register a consumer group on the topic and
long-poll its 8 queues with PULL_MESSAGE (committing offsets with the pull). The broker's RSS and
open descriptors are sampled every 5 s. Checks: no failed request, descriptors flat (the same
after warm-up as at the end), RSS flat (the last third's median within 10 MB or 15 % of the
second third's), and after every client closed, descriptors back to the baseline.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import orjson

from bench import create_topic
from bench.chaos.common import ScenarioResult, fd_count, kill_pid, poll, rss_mb
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    PullMessageRequestHeader,
    PullSysFlag,
    SendMessageRequestHeader,
)
from tidemq.remoting import RemotingClient
from tidemq.testing import ServeProcess

TOPIC, QUEUES = "ChaosLoad", 8


class Stats:
    def __init__(self) -> None:
        self.sent = 0
        self.heartbeats = 0
        self.pulled = 0
        self.errors = 0
        self.first_errors: list[str] = []

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.first_errors) < 5:
            self.first_errors.append(what)


def heartbeat(client_id: str, group: str | None) -> RemotingCommand:
    consumers = (
        [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [
                    {"topic": TOPIC, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 0}
                ],
                "unitMode": False,
            }
        ]
        if group
        else []
    )
    body = {"clientID": client_id, "consumerDataSet": consumers, "producerDataSet": [{"groupName": "load-p"}]}
    return RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, orjson.dumps(body))


async def _client(n: int, addr: str, group: str | None, send_every: float, until: float, st: Stats) -> None:
    client = RemotingClient()
    client_id = f"127.0.0.1@load-{n}"
    offsets = dict.fromkeys(range(QUEUES), -1)
    try:
        next_hb = 0.0
        next_send = time.monotonic() + (n % 100) * send_every / 100
        queue = n % QUEUES
        while time.monotonic() < until:
            now = time.monotonic()
            try:
                if now >= next_hb:
                    r = await client.invoke(addr, heartbeat(client_id, group), 10)
                    st.heartbeats += 1
                    if r.code != ResponseCode.SUCCESS:
                        st.error(f"heartbeat: {r.code} {r.remark}")
                    next_hb = now + 10
                if now >= next_send:
                    h = SendMessageRequestHeader(
                        producer_group="load-p",
                        topic=TOPIC,
                        default_topic="TBW102",
                        default_topic_queue_nums=QUEUES,
                        queue_id=queue,
                        sys_flag=0,
                        born_timestamp=int(time.time() * 1000),
                        flag=0,
                    )
                    body = (b"%06d-" % n).ljust(256, b"x")
                    r = await client.invoke(
                        addr,
                        RemotingCommand.create_request(
                            RequestCode.SEND_MESSAGE_V2, h.to_v2_ext_fields(), body
                        ),
                        10,
                    )
                    st.sent += 1
                    if r.code != ResponseCode.SUCCESS:
                        st.error(f"send: {r.code} {r.remark}")
                    queue = (queue + 1) % QUEUES
                    next_send = now + send_every
                if group is not None:
                    qid = int(now) % QUEUES
                    if offsets[qid] < 0:
                        r = await client.invoke(
                            addr,
                            RemotingCommand.create_request(
                                RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(qid)}
                            ),
                            10,
                        )
                        offsets[qid] = int(r.ext_fields.get("offset", "0"))
                    ph = PullMessageRequestHeader(
                        consumer_group=group,
                        topic=TOPIC,
                        queue_id=qid,
                        queue_offset=offsets[qid],
                        max_msg_nums=32,
                        sys_flag=PullSysFlag.FLAG_SUBSCRIPTION
                        | PullSysFlag.FLAG_COMMIT_OFFSET
                        | PullSysFlag.FLAG_SUSPEND,
                        commit_offset=offsets[qid],
                        suspend_timeout_millis=1000,
                        subscription="*",
                        sub_version=0,
                    )
                    r = await client.invoke(
                        addr, RemotingCommand.create_request(RequestCode.PULL_MESSAGE, ph.to_ext_fields()), 10
                    )
                    if r.code == ResponseCode.SUCCESS:
                        st.pulled += 1
                    if "nextBeginOffset" in r.ext_fields:
                        offsets[qid] = int(r.ext_fields["nextBeginOffset"])
                    elif r.code not in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
                        st.error(f"pull: {r.code} {r.remark}")
                else:
                    await asyncio.sleep(max(0.0, min(next_hb, next_send) - time.monotonic()))
            except Exception as exc:
                st.error(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(1)
    finally:
        await client.close()


async def _warm_up(serve: ServeProcess) -> None:
    """Create the topic and touch every queue once, so the store's files are open before the baseline."""
    admin = RemotingClient()
    try:
        await create_topic(admin, serve.broker_addr, TOPIC, QUEUES)
        st = Stats()
        await _client(0, serve.broker_addr, None, 0.05, time.monotonic() + 2, st)  # every queue once
    finally:
        await admin.close()


async def _run(
    serve: ServeProcess,
    connections: int,
    groups: int,
    seconds: float,
    send_every: float,
    samples: list[tuple[float, int, float]],
    st: Stats,
) -> None:
    pid = serve.pid
    start = time.monotonic()
    until = start + seconds
    tasks = []
    for n in range(connections):
        group = f"load-g{n}" if n < groups else None
        tasks.append(asyncio.ensure_future(_client(n, serve.broker_addr, group, send_every, until, st)))
        if n % 50 == 49:
            await asyncio.sleep(0.05)  # ramp up: 50 connections at a time
    while time.monotonic() < until:
        samples.append((time.monotonic() - start, fd_count(pid), rss_mb(pid)))
        await asyncio.sleep(5)
    await asyncio.gather(*tasks)


def run(
    workdir: Path,
    *,
    seconds: float = 600,
    connections: int = 1000,
    groups: int = 100,
    send_every: float = 2.0,
) -> ScenarioResult:
    """The load scenario (see the module doc)."""
    result = ScenarioResult("load")
    start = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    serve = ServeProcess(workdir / "store", log_path=workdir / "serve.log")
    st = Stats()
    samples: list[tuple[float, int, float]] = []
    try:
        serve.start()
        pid = serve.pid
        asyncio.run(_warm_up(serve))
        poll(lambda: fd_count(pid) <= 40, 30, 0.5)
        fd0, rss0 = fd_count(pid), rss_mb(pid)
        asyncio.run(_run(serve, connections, groups, seconds, send_every, samples, st))
        back = poll(lambda: fd_count(pid) <= fd0 + 3, 30, 0.5)
        poll(lambda: rss_mb(pid) <= rss0 * 1.2 + 5, 20, 1.0)
        fd_end, rss_end = fd_count(pid), rss_mb(pid)
        steady = [s for s in samples if s[0] >= seconds / 3]
        mid = [s for s in steady if s[0] < 2 * seconds / 3] or steady[:1]
        last = [s for s in steady if s[0] >= 2 * seconds / 3] or steady[-1:]
        rss_mid = statistics.median(s[2] for s in mid) if mid else rss0
        rss_last = statistics.median(s[2] for s in last) if last else rss0
        fds_mid = max((s[1] for s in mid), default=fd0)
        fds_last = max((s[1] for s in last), default=fd0)
        result.figures.update(
            connections=connections,
            groups=groups,
            load_s=seconds,
            sent=st.sent,
            heartbeats=st.heartbeats,
            pulls_found=st.pulled,
            errors=st.errors,
            fds=f"{fd0}->{fds_mid}->{fds_last}->{fd_end}",
            rss_mb=f"{rss0:.0f}->{rss_mid:.0f}->{rss_last:.0f}->{rss_end:.0f}",
        )
        if st.errors:
            result.fail(f"{st.errors} failed requests, e.g. {st.first_errors}")
        if fds_last > fds_mid + 5:
            result.fail(f"descriptors grew under steady load: {fds_mid} -> {fds_last}")
        if rss_last > max(rss_mid + 10, rss_mid * 1.15):
            result.fail(f"RSS grew under steady load: {rss_mid:.0f} -> {rss_last:.0f} MB")
        if not back:
            result.fail(f"descriptors not back to baseline after the clients left: {fd0} -> {fd_end}")
    finally:
        kill_pid(serve.proc, sig=15)
        kill_pid(serve.proc)
    result.seconds = time.monotonic() - start
    return result
