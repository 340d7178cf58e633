"""``tidemq serve`` as a real process: clean SIGTERM stop, and SIGKILL during a SYNC_FLUSH send loop."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tidemq.broker.offset_manager import load_offset_table
from tidemq.errors import StoreError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import PullMessageRequestHeader, PullSysFlag, SendMessageRequestHeader
from tidemq.protocol.message_codec import decode_messages
from tidemq.remoting import RemotingClient
from tidemq.testing import ServeProcess

QUEUES = 4


def send_request(topic: str, queue_id: int, body: bytes) -> RemotingCommand:
    h = SendMessageRequestHeader(
        producer_group="PG",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=QUEUES,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp=int(time.time() * 1000),
        flag=0,
        properties="WAIT\x01true",
    )
    return RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, h.to_v2_ext_fields(), body)


async def read_queue(client: RemotingClient, addr: str, topic: str, queue_id: int) -> dict[int, bytes]:
    """Every message of a queue, by queue offset."""
    out: dict[int, bytes] = {}
    offset = 0
    while True:
        h = PullMessageRequestHeader(
            consumer_group="Reader",
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=32,
            sys_flag=PullSysFlag.FLAG_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription="*",
            sub_version=0,
        )
        r = await client.invoke(
            addr, RemotingCommand.create_request(RequestCode.PULL_MESSAGE, h.to_ext_fields()), 5
        )
        if r.code != ResponseCode.SUCCESS:
            return out
        for m in decode_messages(r.body):
            out[m.queue_offset] = m.body
        offset = int(r.ext_fields["nextBeginOffset"])


def test_serve_sigterm_stops_cleanly(tmp_path: Path) -> None:
    """SIGTERM: exit status 0 and no abort file (flushed, checkpointed)."""
    store = tmp_path / "store"
    proc = ServeProcess(store, flush="async").start()
    assert proc.namesrv_addr.startswith("127.0.0.1:") and proc.broker_addr.startswith("127.0.0.1:")
    assert (store / "abort").exists()
    assert proc.stop() == 0
    assert not (store / "abort").exists()
    assert (store / "checkpoint").exists()


def test_sync_flush_survives_sigkill(tmp_path: Path) -> None:
    """SIGKILL mid send loop under SYNC_FLUSH: every SEND_OK message is readable at its offset after
    restart, and the group offset that reached consumerOffset.json is intact."""
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\nflushConsumerOffsetInterval=100\n")
    proc = ServeProcess(store, flush="sync", extra_args=["-c", str(conf)]).start()
    acked: dict[tuple[int, int], bytes] = {}

    async def produce_and_kill() -> None:
        client = RemotingClient()
        try:
            r = await client.invoke(
                proc.broker_addr,
                RemotingCommand.create_request(
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    {"consumerGroup": "CG", "topic": "Crash", "queueId": "0", "commitOffset": "0"},
                ),
                5,
            )
            offsets_file = store / "config" / "consumerOffset.json"
            counter = 0

            async def sender(worker: int) -> None:
                nonlocal counter
                while True:
                    counter += 1
                    body = b"w%d-%08d" % (worker, counter) + b"." * 200
                    try:
                        r = await client.invoke(
                            proc.broker_addr, send_request("Crash", counter % QUEUES, body), 5
                        )
                    except Exception:
                        return  # the broker died under us
                    if r.code == ResponseCode.SUCCESS:
                        acked[(int(r.ext_fields["queueId"]), int(r.ext_fields["queueOffset"]))] = body

            workers = [asyncio.ensure_future(sender(w)) for w in range(8)]
            # commit a group offset and wait until it is on disk
            deadline = time.monotonic() + 10
            while len(acked) < 50:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.005)
            r = await client.invoke(
                proc.broker_addr,
                RemotingCommand.create_request(
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    {"consumerGroup": "CG", "topic": "Crash", "queueId": "0", "commitOffset": "7"},
                ),
                5,
            )
            assert r.code == ResponseCode.SUCCESS
            while True:
                try:
                    table = load_offset_table(offsets_file)  # the file and its journal
                    if table.get("Crash@CG", {}).get("0") == 7:
                        break
                except StoreError:
                    pass
                assert time.monotonic() < deadline, "offset never persisted"
                await asyncio.sleep(0.01)
            while len(acked) < 300:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.005)
            proc.kill()  # mid-loop: several sends are in flight
            await asyncio.gather(*workers, return_exceptions=True)
        finally:
            await client.close()

    asyncio.run(produce_and_kill())
    assert (store / "abort").exists()  # it really crashed
    proc2 = ServeProcess(store, flush="sync").start()
    try:

        async def verify() -> None:
            client = RemotingClient()
            try:
                for qid in range(QUEUES):
                    stored = await read_queue(client, proc2.broker_addr, "Crash", qid)
                    for (q, off), body in acked.items():
                        if q == qid:
                            assert stored.get(off) == body, f"acked message {q}:{off} lost or changed"
                r = await client.invoke(
                    proc2.broker_addr,
                    RemotingCommand.create_request(
                        RequestCode.QUERY_CONSUMER_OFFSET,
                        {"consumerGroup": "CG", "topic": "Crash", "queueId": "0"},
                    ),
                    5,
                )
                assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "7"
            finally:
                await client.close()

        asyncio.run(verify())
    finally:
        assert proc2.stop() == 0
