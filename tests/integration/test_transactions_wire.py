"""Transactional messages on a real broker, at the wire: half, END, the C++ 2.x frames replayed,
rejectTransactionMessage, crash-cut commits (transactions.md §1)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import orjson

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import FrameDecoder, RemotingCommand
from tidemq.protocol.message import MessageExt
from tidemq.protocol.message_codec import decode_messages, decode_offset_msg_id
from tidemq.remoting import RemotingClient
from tidemq.testing import run_cluster

from ..helpers import wait_for
from .conftest import Wire

CPP2 = Path(__file__).resolve().parents[1] / "fixtures" / "cpp2_client" / "cpp2_client-stub-transaction.jsonl"
HALF = {"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": "U"}


def end_request(group: str, send_answer: RemotingCommand, kind: int, **extra: str) -> RemotingCommand:
    _, commit_log_offset = decode_offset_msg_id(send_answer.ext_fields["msgId"])
    fields = {
        "producerGroup": group,
        "tranStateTableOffset": send_answer.ext_fields["queueOffset"],
        "commitLogOffset": str(commit_log_offset),
        "commitOrRollback": str(kind),
        "fromTransactionCheck": "false",
        "msgId": "U",
    }
    fields.update(extra)
    return RemotingCommand.create_request(RequestCode.END_TRANSACTION, fields)


async def messages(wire: Wire, topic: str, queue_id: int = 0) -> list:  # type: ignore[type-arg]
    r = await wire.pull(topic, 0, queue_id=queue_id)
    return decode_messages(r.body) if r.code == ResponseCode.SUCCESS else []


async def test_half_invisible_until_commit_then_once(wire: Wire) -> None:
    """A half message is invisible; commit makes it visible once (sysFlag 8, TRAN_MSG and REAL_*
    gone); a second commit, a rollback after it and UNKNOW change nothing; a wrong group is refused."""
    sent = await wire.send("TxWire", b"order-1", properties=HALF, sys_flag=4, queue_id=1)
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    assert sent.ext_fields["queueId"] == "1"
    assert await messages(wire, "TxWire", 1) == []
    (half,) = await messages(wire, "RMQ_SYS_TRANS_HALF_TOPIC")
    service = wire.cluster.broker.transaction_service
    assert service is not None
    image = service.find_half(half.commit_log_offset, 0, "PG")  # served from memory: the same record
    stored = wire.cluster.broker.store.lookup.look_message_by_offset(half.commit_log_offset)
    assert isinstance(image, MessageExt) and image is not stored and stored is not None
    fields = ("topic", "body", "flag", "queue_id", "queue_offset", "sys_flag", "born_timestamp", "born_host")
    fields += (
        "store_timestamp",
        "store_host",
        "offset_msg_id",
        "commit_log_offset",
        "properties",
        "store_size",
    )
    assert {f: getattr(image, f) for f in fields} == {f: getattr(stored, f) for f in fields}
    assert half.offset_msg_id == sent.ext_fields["msgId"] and half.properties["REAL_QID"] == "1"
    unknow = end_request("PG", sent, 0)
    unknow.mark_oneway()
    await wire.client.invoke_oneway(wire.addr, unknow)
    wrong = await wire.client.invoke(wire.addr, end_request("other", sent, 8), 5)
    assert (wrong.code, wrong.remark) == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
    bad_offset = end_request("PG", sent, 8, tranStateTableOffset="7")
    r = await wire.client.invoke(wire.addr, bad_offset, 5)
    assert r.remark == "The transaction state table offset wrong"
    for kind in (8, 8, 12):
        r = await wire.client.invoke(wire.addr, end_request("PG", sent, kind), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
    (msg,) = await messages(wire, "TxWire", 1)
    assert msg.body == b"order-1" and msg.sys_flag & 0xC == 8
    assert "TRAN_MSG" not in msg.properties and "REAL_TOPIC" not in msg.properties
    assert msg.prepared_transaction_offset == decode_offset_msg_id(sent.ext_fields["msgId"])[1]
    (op,) = await messages(wire, "RMQ_SYS_TRANS_OP_HALF_TOPIC")
    assert op.body == sent.ext_fields["queueOffset"].encode() and op.tags == "d"


async def test_rollback_delivers_nothing(wire: Wire) -> None:
    sent = await wire.send("TxRollback", b"x", properties=HALF, sys_flag=4)
    r = await wire.client.invoke(wire.addr, end_request("PG", sent, 12), 5)
    assert r.code == ResponseCode.SUCCESS
    r = await wire.client.invoke(wire.addr, end_request("PG", sent, 8), 5)  # too late: rolled back
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark is not None
    assert r.remark.startswith("Find prepared transaction message failed: ") and "rolled back" in r.remark
    assert await messages(wire, "TxRollback") == []
    assert wire.cluster.broker.transaction_service is not None
    assert wire.cluster.broker.transaction_service.pending == {}


async def test_reject_transaction_message(tmp_path: Path) -> None:
    """rejectTransactionMessage: a half send gets NO_PERMISSION with RocketMQ's remark."""
    async with run_cluster(tmp_path, reject_transaction_message=True) as cluster:
        client = RemotingClient()
        try:
            r = await Wire(client, cluster).send("TxNo", b"x", properties=HALF, sys_flag=4)
        finally:
            await client.close()
    assert r.code == ResponseCode.NO_PERMISSION
    assert r.remark == f"the broker[{cluster.broker_addr}] sending transaction message is forbidden"


async def test_cpp2_frames_replayed(wire: Wire) -> None:
    """The C++ 2.x client's own frames, sent as captured: three half sends, then its END frames with
    every value a string (offsets swapped for this broker's answers, kept strings): COMMIT delivers
    i=0, ROLLBACK drops i=1, UNKNOW leaves i=2 pending."""
    records = [json.loads(line) for line in CPP2.read_text().splitlines()]
    c2s = [
        r
        for r in records
        if r.get("kind") == "frame" and r.get("listener") == "broker" and r["direction"] == "c2s"
    ]
    reader, writer = await asyncio.open_connection(*wire.addr.rsplit(":", 1))
    decoder = FrameDecoder()

    async def roundtrip(raw: bytes, opaque: int) -> RemotingCommand:
        """Send ``raw``; the answer with ``opaque`` (END's answers, flag 0 asks for one, are skipped)."""
        writer.write(raw)
        await writer.drain()
        while True:
            for got in decoder.feed(await asyncio.wait_for(reader.read(65536), 5)):
                if got.opaque == opaque:
                    return got

    answers: list[RemotingCommand] = []
    try:
        for record in c2s:
            code = record["header"]["code"]
            if code == RequestCode.SEND_MESSAGE_V2:
                answers.append(
                    await roundtrip(base64.b64decode(record["raw_b64"]), record["header"]["opaque"])
                )
            elif (
                code == RequestCode.END_TRANSACTION
                and record["header"]["extFields"]["fromTransactionCheck"] == "0"
            ):
                sent = answers[-1]  # the client ends each transaction before its next send
                header = record["header"]
                ext = dict(header["extFields"])
                ext["commitLogOffset"] = str(decode_offset_msg_id(sent.ext_fields["msgId"])[1])
                ext["tranStateTableOffset"] = sent.ext_fields["queueOffset"]
                assert all(isinstance(v, str) for v in ext.values())
                frame = orjson.dumps({**header, "extFields": ext})
                writer.write(len(frame + b"    ").to_bytes(4, "big") + len(frame).to_bytes(4, "big") + frame)
                await writer.drain()
    finally:
        writer.close()
    assert all(a.code == ResponseCode.SUCCESS for a in answers)
    service = wire.cluster.broker.transaction_service
    assert service is not None

    await wait_for(lambda: len(service.pending) == 1, 5, "the END frames to be processed")
    bodies = [m.body for q in range(4) for m in await messages(wire, "TxTopic", q)]
    assert bodies == [b"tx-body-0"]
    (pending,) = service.pending_stats()
    assert (pending["producerGroup"], pending["topic"], pending["count"]) == ("TxProducerGroup", "TxTopic", 1)


ACL_YML = """\
accounts:
  - accessKey: AppAccessKey
    secretKey: AppSecretKey
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: ReaderAccessKey
    secretKey: ReaderSecretKey
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


async def test_end_transaction_needs_pub_on_the_real_topic(tmp_path: Path) -> None:
    """With ACL, an END signed by an account without PUB on the half's real topic is refused and
    changes nothing; the publisher's own END commits."""
    from tidemq.acl import AclClientRPCHook, SessionCredentials

    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YML)
    async with run_cluster(tmp_path, acl_enable=True, acl_file=str(acl)) as cluster:
        app, reader = RemotingClient(), RemotingClient()
        app.register_rpc_hook(AclClientRPCHook(SessionCredentials("AppAccessKey", "AppSecretKey")))
        reader.register_rpc_hook(AclClientRPCHook(SessionCredentials("ReaderAccessKey", "ReaderSecretKey")))
        try:
            wire = Wire(app, cluster)
            sent = await wire.send("TxAcl", b"x", properties=HALF, sys_flag=4)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            refused = await reader.invoke(cluster.broker_addr, end_request("PG", sent, 8), 5)
            assert refused.code == ResponseCode.SYSTEM_ERROR and "TxAcl" in (refused.remark or "")
            assert await messages(wire, "TxAcl") == []
            ok = await app.invoke(cluster.broker_addr, end_request("PG", sent, 8), 5)
            assert ok.code == ResponseCode.SUCCESS, ok.remark
            assert [m.body for m in await messages(wire, "TxAcl")] == [b"x"]
        finally:
            await app.close()
            await reader.close()


async def test_start_up_completes_a_commit_cut_before_its_op(wire: Wire) -> None:
    """The commit log ends with a committed message whose op record is missing (a torn write):
    loading writes the op; a last record that is not that transaction's commit changes nothing."""
    from tidemq.broker.transaction.bridge import committed_batch

    service = wire.cluster.broker.transaction_service
    store = wire.cluster.broker.store
    assert service is not None
    sent = await wire.send("TxTorn", b"cut", properties=HALF, sys_flag=4)
    other = await wire.send("TxTorn", b"other", properties={**HALF, "UNIQ_KEY": "V"}, sys_flag=4)
    half = service.find_half(decode_offset_msg_id(sent.ext_fields["msgId"])[1], 0, "PG")
    assert isinstance(half, MessageExt)
    real = committed_batch(half)
    assert real is not None
    stray = store.put_message_batch(real)  # the real message alone: what the torn write leaves
    assert stray.status.value == "PUT_OK"
    await wire.send("TxTorn", b"plain")  # not the commit's last record: nothing to repair
    service.load()
    assert len(service.pending) == 2
    store.put_message_batch(real)
    service.load()
    assert list(service.pending) == [int(other.ext_fields["queueOffset"])]
    (op,) = await messages(wire, "RMQ_SYS_TRANS_OP_HALF_TOPIC")
    assert op.body == b"0"


async def test_slave_replicates_and_refuses_to_end(tmp_path: Path) -> None:
    """A slave copies half, op and committed records like any others, answers END with
    SLAVE_NOT_AVAILABLE, never checks, and can rebuild the pending table from its copy (what it
    does when it becomes master)."""
    from tests.ha.test_replication import slave_of

    async with run_cluster(tmp_path / "master") as cluster, slave_of(cluster, tmp_path) as slave:
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            done = await wire.send("TxHa", b"committed", properties=HALF, sys_flag=4)
            await wire.send("TxHa", b"pending", properties={**HALF, "UNIQ_KEY": "P"}, sys_flag=4)
            r = await client.invoke(cluster.broker_addr, end_request("PG", done, 8), 5)
            assert r.code == ResponseCode.SUCCESS

            def copied() -> bool:  # records and their consume-queue entries (dispatched after the copy)
                store = slave.store
                return (
                    store.get_max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0) >= 2
                    and store.get_max_offset_in_queue("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) >= 1
                )

            await wait_for(copied, 10, "the slave copied the half and op records")
            refused = await client.invoke(slave.addr, end_request("PG", done, 12), 5)
            assert refused.code == ResponseCode.SLAVE_NOT_AVAILABLE
        finally:
            await client.close()
        service = slave.transaction_service
        assert service is not None
        assert await service.check_pass() == 0 and service.pending == {}
        service.load()  # as after a promotion: the replicated records are enough
    assert [tx.topic for tx in service.pending.values()] == ["TxHa"] and len(service.pending) == 1
