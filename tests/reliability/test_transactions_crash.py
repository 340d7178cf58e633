"""SIGKILL of a real ``tidemq serve`` at the two points that matter for transactions: between a
half message and its END_TRANSACTION, and between a commit's real message and its op record.
After each restart every committed transaction is delivered exactly once, no rolled-back one,
and the pending ones are checked back (docs/transactions.md)."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

from tidemq.client import LocalTransactionState, TransactionListener, TransactionProducer
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import EndTransactionRequestHeader
from tidemq.protocol.message import Message, MessageExt
from tidemq.protocol.message_codec import decode_message, decode_offset_msg_id, read_size_and_magic
from tidemq.remoting import RemotingClient
from tidemq.testing import ServeProcess

from ..helpers import wait_for_sync
from ..integration.test_broker_crash import read_queue

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
TOPIC = "TxCrash"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def deliveries(broker_addr: str) -> list[bytes]:
    async def read() -> list[bytes]:
        client = RemotingClient()
        try:
            return [b for q in range(4) for b in (await read_queue(client, broker_addr, TOPIC, q)).values()]
        finally:
            await client.close()

    return sorted(asyncio.run(read()))


def cut_last_op_record(store: Path) -> None:
    """Zero the commit log's last record, which must be an op record: what a kill between a commit's
    two records would leave (the real message written, its op not)."""
    (path,) = sorted((store / "commitlog").iterdir())
    with path.open("rb") as f:
        data = bytearray(f.read(1 << 20))  # the test writes a few KiB; the file is 1 GiB, mostly zeros
    pos = last = 0
    while pos + 8 <= len(data):
        size, magic = read_size_and_magic(data, pos)
        if size <= 0 or magic == 0:
            break
        last, pos = pos, pos + size
    msg, _ = decode_message(bytes(data[last:pos]))
    assert msg.topic == "RMQ_SYS_TRANS_OP_HALF_TOPIC", msg.topic
    with path.open("r+b") as f:
        f.seek(last)
        f.write(bytes(pos - last))


def late_commit(broker_addr: str, sent: Any) -> tuple[int, str | None]:
    """An answered END_TRANSACTION COMMIT for the half of ``sent`` (a TransactionSendResult)."""
    header = EndTransactionRequestHeader(
        producer_group="TxCrashPG",
        tran_state_table_offset=sent.queue_offset,
        commit_log_offset=decode_offset_msg_id(sent.offset_msg_id)[1],
        commit_or_rollback=8,
        from_transaction_check=False,
        msg_id=sent.msg_id,
        transaction_id=sent.msg_id,
    )

    async def end() -> tuple[int, str | None]:
        client = RemotingClient()
        try:
            request = RemotingCommand.create_request(RequestCode.END_TRANSACTION, header.to_ext_fields())
            answer = await client.invoke(broker_addr, request, 5)
            return answer.code, answer.remark
        finally:
            await client.close()

    return asyncio.run(end())


class LocalDb(TransactionListener):
    """The 'database': body -> decided state; C blocks inside its local transaction until released."""

    def __init__(self) -> None:
        self.db: dict[bytes, LocalTransactionState] = {}
        self.plan = {b"A": COMMIT, b"B": ROLLBACK, b"C": COMMIT, b"D": COMMIT, b"E": COMMIT, b"F": COMMIT}
        self.answer = {b"D": UNKNOW, b"F": UNKNOW}
        self.in_c = threading.Event()
        self.release_c = threading.Event()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        self.db[msg.body] = self.plan[msg.body]
        if msg.body == b"C":
            self.in_c.set()
            assert self.release_c.wait(20)
        return self.answer.get(msg.body, self.plan[msg.body])

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return self.db.get(msg.body, UNKNOW)


def test_sigkill_between_half_and_end_and_inside_a_commit(tmp_path: Path) -> None:
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    # pinned ports so the producer finds the restarted broker; the HA port stays ephemeral (it would
    # default to broker port + 1, which another process may hold)
    conf.write_text(
        "brokerName=broker-a\nhaListenPort=0\nmappedFileSizeCommitLog=4194304\n"
        "transactionCheckInterval=200\ntransactionTimeOut=400\n"
    )
    ports = ["--namesrv-port", str(free_port()), "--broker-port", str(free_port()), "-c", str(conf)]

    def serve() -> ServeProcess:
        return ServeProcess(store, extra_args=ports).start()

    proc = serve()
    local = LocalDb()
    producer = TransactionProducer(
        local, namesrv_addr=proc.namesrv_addr, producer_group="TxCrashPG", heartbeat_broker_interval=0.2
    )
    producer.start()
    try:
        sent = {
            body: producer.send_message_in_transaction(Message(TOPIC, body)) for body in (b"A", b"B", b"D")
        }
        # kill point 1: C's half message is stored, its local transaction commits, END cannot go
        worker = threading.Thread(target=producer.send_message_in_transaction, args=(Message(TOPIC, b"C"),))
        worker.start()
        assert local.in_c.wait(10)
        proc.kill()
        local.release_c.set()
        worker.join(10)
        proc = serve()
        wait_for_sync(lambda: deliveries(proc.broker_addr) == [b"A", b"C", b"D"], 20, "A, C, D after restart")
        # kill point 2: E committed (real message + op), then the op is cut off as a torn write would
        producer.send_message_in_transaction(Message(TOPIC, b"E"))
        wait_for_sync(lambda: b"E" in deliveries(proc.broker_addr), 10, "E delivered")
        proc.kill()
        cut_last_op_record(store)
        proc = serve()
        # F is checked back on a later pass than any check of E would be: once F is there, a second
        # E would be too
        producer.send_message_in_transaction(Message(TOPIC, b"F"))
        wait_for_sync(lambda: b"F" in deliveries(proc.broker_addr), 20, "F checked back and delivered")
        assert deliveries(proc.broker_addr) == [b"A", b"C", b"D", b"E", b"F"]
        # late ENDs after two SIGKILLs: A's duplicate COMMIT is idempotent, B's COMMIT is refused
        assert late_commit(proc.broker_addr, sent[b"A"]) == (0, None)
        code, remark = late_commit(proc.broker_addr, sent[b"B"])
        assert code == 1 and remark is not None and "was rolled back" in remark
        assert deliveries(proc.broker_addr) == [b"A", b"C", b"D", b"E", b"F"]
    finally:
        producer.shutdown()
        proc.stop()
    assert "cut by a crash before its op record; completed" in proc.log_tail(200)
