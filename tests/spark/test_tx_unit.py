"""Pure parts of the transactional sink: the checkpoint state's answers, its records, the broker's
commit of a batch-body half message."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tidemq.broker.transaction.bridge import BATCH_BODY, committed_batch
from tidemq.protocol.message import Message, MessageConst, MessageExt
from tidemq.protocol.message_codec import MessageSysFlag, compress_body, encode_batch_body
from tidemq.spark.tx_state import CommitRecord, Decision, HalfRef, TxState, state_root

H1 = HalfRef("broker-a", "127.0.0.1:1", 100, 7, "AA", 10)
H2 = HalfRef("broker-a", "127.0.0.1:1", 200, 8, "BB", 5)


def test_decisions_follow_the_checkpoint(tmp_path: Path) -> None:
    state = TxState(tmp_path)
    state.register_run("r1")
    assert state.decide(0, "r1", "0:0") is Decision.UNKNOW  # batch 0 still running
    mine = CommitRecord(0, "r1", frozenset({"0:0", "1:1"}), (H1, H2))
    assert state.record_commit(mine) == mine
    assert state.decide(0, "r1", "0:0") is Decision.COMMIT
    assert state.decide(0, "r1", "1:1") is Decision.COMMIT
    assert state.decide(0, "r1", "1:0") is Decision.ROLLBACK  # a failed attempt of partition 1
    assert state.decide(0, "r0", "0:0") is Decision.ROLLBACK  # another run's halves of batch 0
    # a replay of batch 0 by a later run reads the first record
    later = CommitRecord(0, "r2", frozenset({"0:0"}), (H2,))
    assert state.record_commit(later) == mine
    assert TxState(tmp_path).commit_record(0) == mine  # from the file, in a new object


def test_dead_and_aborted_runs_roll_back(tmp_path: Path) -> None:
    state = TxState(tmp_path)
    state.register_run("r1")
    assert not state.run_dead("r1")
    state.register_run("r2")  # a newer driver of the query
    state.register_run("r1")  # idempotent: keeps its first time
    assert state.run_dead("r1") and not state.run_dead("r2")
    assert state.decide(3, "r1", "0:0") is Decision.ROLLBACK
    assert state.decide(3, "r2", "0:0") is Decision.UNKNOW
    state.record_abort(3, "r2")
    assert state.decide(3, "r2", "0:0") is Decision.ROLLBACK


def test_records_round_trip_and_pickle(tmp_path: Path) -> None:
    record = CommitRecord(5, "r", frozenset({"2:0"}), (H1,))
    assert CommitRecord.from_bytes(record.to_bytes()) == record
    assert pickle.loads(pickle.dumps(H1)) == H1
    assert state_root("file:///x/cp") == Path("/x/cp/tidemq-tx")
    assert state_root("/x/cp") == Path("/x/cp/tidemq-tx")
    with pytest.raises(ValueError, match="not a local"):
        state_root("hdfs://nn/cp")


def test_check_state_answers_from_the_half_properties(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from tidemq.client.producer.transaction import LocalTransactionState
    from tidemq.spark.tx_sink import BATCH_BODY as SINK_BATCH_BODY
    from tidemq.spark.tx_sink import TX_ATTEMPT, TX_BATCH, TX_RUN, TX_STATE, check_state

    assert SINK_BATCH_BODY == BATCH_BODY
    state = TxState(tmp_path)
    state.record_commit(CommitRecord(1, "r1", frozenset({"0:0"}), (H1,)))
    props = {TX_STATE: str(tmp_path), TX_BATCH: "1", TX_RUN: "r1", TX_ATTEMPT: "0:0"}
    assert check_state(props) is LocalTransactionState.COMMIT_MESSAGE
    assert check_state({**props, TX_ATTEMPT: "0:1"}) is LocalTransactionState.ROLLBACK_MESSAGE
    assert check_state({**props, TX_BATCH: "2"}) is LocalTransactionState.UNKNOW
    assert check_state({**props, TX_STATE: str(tmp_path / "gone")}) is LocalTransactionState.UNKNOW
    assert check_state({}) is LocalTransactionState.UNKNOW


@pytest.mark.parametrize("compressed", [False, True])
def test_commit_of_a_batch_body_half_puts_every_item(compressed: bool) -> None:
    items = [Message("T", f"row{i}".encode(), properties={"SPARK_ROW_KEY": f"q:0:0:{i}"}) for i in range(3)]
    body = encode_batch_body(items)
    half = MessageExt(
        "RMQ_SYS_TRANS_HALF_TOPIC",
        compress_body(body) if compressed else body,
        sys_flag=MessageSysFlag.COMPRESSED_FLAG if compressed else 0,
        commit_log_offset=4096,
        properties={
            BATCH_BODY: "1",
            MessageConst.PROPERTY_REAL_TOPIC: "T",
            MessageConst.PROPERTY_REAL_QUEUE_ID: "1",
            MessageConst.PROPERTY_TRANSACTION_PREPARED: "true",
        },
    )
    batch = committed_batch(half)
    assert batch is not None
    assert (batch.topic, batch.queue_id, batch.prepared_transaction_offset) == ("T", 1, 4096)
    assert batch.bodies == [b"row0", b"row1", b"row2"]
    assert [p.split("\x01")[1] for p in batch.properties] == ["q:0:0:0", "q:0:0:1", "q:0:0:2"]
    assert not batch.sys_flag & MessageSysFlag.COMPRESSED_FLAG
    assert MessageSysFlag.get_transaction_value(batch.sys_flag) == MessageSysFlag.TRANSACTION_COMMIT_TYPE
