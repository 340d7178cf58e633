"""Pure parts of the transactional sink: the checkpoint state's answers, its records, the broker's
commit of a batch-body half message, the driver's commit when the broker refuses, the purge."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from tidemq.broker.transaction.bridge import BATCH_BODY, committed_batch
from tidemq.protocol.message import Message, MessageConst, MessageExt
from tidemq.protocol.message_codec import (
    MessageSysFlag,
    compress_body,
    decode_offset_msg_id,
    encode_batch_body,
)
from tidemq.spark.tx_state import CommitRecord, Decision, HalfRef, LostBatch, TxState, state_root

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


# -- the driver's commit when the broker refuses (a scripted END) and the purge of old batches ------

LOST = "Find prepared transaction message failed: the transaction of half message BB (half queue offset 8) was discarded"


def _committer(
    root: Path, answers: dict[HalfRef, tuple[int | None, str]], checkpoint: Path | None = None
) -> Any:
    """A stream's TxCommitter whose END_TRANSACTIONs are answered from ``answers`` (else SUCCESS);
    it keeps what it sent in ``sent``: ``[(commit, [halves])]``. ``checkpoint`` defaults to one
    with no ``offsets/`` (nothing purged)."""
    pytest.importorskip("pyspark")
    from tidemq.spark.options import SinkOptions
    from tidemq.spark.tx_commit import EndFailure, TxCommitter

    class Scripted(TxCommitter):
        sent: list[tuple[bool, list[HalfRef]]]

        def _end(self, halves: list[HalfRef], commit: bool) -> list[EndFailure]:
            if halves:
                self.sent.append((commit, list(halves)))
            return [EndFailure(h, *answers[h]) for h in halves if h in answers]

    committer = Scripted(SinkOptions("127.0.0.1:1", transactional=True), str(root), str(checkpoint or root))
    committer.sent = []
    return committer


def _msgs(run: str, *halves: HalfRef) -> list[Any]:
    from tidemq.spark.tx_sink import TxCommitMessage

    return [TxCommitMessage(i, h.rows, run, f"{i}:0", [h]) for i, h in enumerate(halves)]


def test_a_refused_commit_fails_the_batch_at_every_restart_until_accepted(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from tidemq.spark.tx_commit import TransactionLostError, lost_message

    refused = {H2: (1, LOST)}
    state = TxState(tmp_path)
    with pytest.raises(TransactionLostError) as err:
        _committer(tmp_path, refused).commit(_msgs("r1", H1, H2), 0)
    text = str(err.value)
    assert "batch 0" in text and "BB (5 rows" in text and "discarded" in text  # the batch, the half
    assert "5 rows that will never be in the topic (the other 10 rows of the batch are)" in text
    assert f"rename {state.lost_path(0)} to 0.accepted" in text
    lost = state.lost(0)
    assert lost is not None and [h for h, _ in lost.halves] == [H2] and not lost.accepted
    assert lost_message(lost, state, stream=False).endswith(
        "write the rows again (the committed ones twice)."
    )
    assert not state.ended(0)
    # a restart replays batch 0 (another run, its own halves): the same error, no COMMIT sent
    h3 = HalfRef("broker-a", "127.0.0.1:1", 300, 9, "CC", 15)
    again = _committer(tmp_path, {})
    with pytest.raises(TransactionLostError, match="batch 0 is recorded committed"):
        again.commit(_msgs("r2", h3), 0)
    assert again.sent == [(False, [h3])]  # only the replay's own half, rolled back
    # the user accepts the loss: the batch ends without those rows, and the query goes on
    state.lost_path(0).rename(state.lost_path(0).with_name("0.accepted"))
    accepted = _committer(tmp_path, {})
    accepted.commit(_msgs("r2", h3), 0)
    assert accepted.sent == [(True, [H1]), (False, [h3])] and state.ended(0)


def test_an_unanswered_commit_is_confirmed_by_the_next_batch(tmp_path: Path) -> None:
    """No answer (a timeout) leaves the half to the broker's check: the batch goes on, not ended;
    the next batch's commit COMMITs it again (SUCCESS now: the check committed it, or this does)."""
    first = _committer(tmp_path, {H2: (None, "timed out")})
    first.commit(_msgs("r1", H1, H2), 0)
    state = TxState(tmp_path)
    assert not state.ended(0) and state.lost(0) is None
    h3 = HalfRef("broker-a", "127.0.0.1:1", 300, 9, "CC", 15)
    second = _committer(tmp_path, {})
    second.commit(_msgs("r1", h3), 1)
    assert second.sent == [(True, [h3]), (True, [H1, H2])]
    assert state.ended(0) and state.ended(1)
    from tidemq.spark.tx_commit import EndFailure

    assert EndFailure(H1, 1, "Find prepared transaction message failed").lost  # gone: segment deleted
    assert not EndFailure(H1, 1, "The producer group wrong").lost  # still pending: the check decides
    assert not EndFailure(H1, 17, "").lost and not EndFailure(H1, None, "timed out").lost
    busy = _committer(tmp_path, {H2: (2, "[TIMEOUT_CLEAN_QUEUE]broker busy")})  # not a loss either
    busy.settle(CommitRecord(5, "r1", frozenset({"0:0"}), (H2,)), [])
    assert not state.ended(5) and state.lost(5) is None


def test_purge_drops_ended_batches_spark_keeps_no_more(tmp_path: Path) -> None:
    from tidemq.spark import tx_retention

    cp = tmp_path / "cp"
    state = TxState(state_root(str(cp)))
    for b in range(8):
        state.record_commit(CommitRecord(b, "r1", frozenset({"0:0"}), (H1,)))
    assert tx_retention.adopt_legacy_records(state, 6) == 6  # an earlier version's records: ended
    assert tx_retention.adopt_legacy_records(state, 8) == 0  # once only
    (state.root / "ended" / "2").unlink()  # batch 2's halves not all confirmed
    state.record_abort(1, "r0")
    state.record_lost(LostBatch(3, ((H2, LOST),), 10))
    state.lost_path(3).rename(state.lost_path(3).with_name("3.accepted"))
    (cp / "offsets").mkdir()
    for name in ("5", "6", "7", ".5.crc", "tmp-x"):
        (cp / "offsets" / name).write_text("v1")
    assert tx_retention.oldest_retained_batch(cp) == 5
    assert tx_retention.unended(state, 5) == [2]
    assert tx_retention.purge(state, 5) == 4
    assert sorted(p.name for p in (state.root / "commits").iterdir()) == ["2", "5", "6", "7"]
    assert sorted(p.name for p in (state.root / "ended").iterdir()) == ["5"]
    assert list((state.root / "aborts").iterdir()) == [] and list((state.root / "lost").iterdir()) == []
    assert state.purged_below() == 5 and tx_retention.purge(state, 5) == 0  # idempotent
    state.mark_ended(4)  # a purge killed after the record went, before its marker did
    tx_retention.purge(state, 5)
    assert sorted(p.name for p in (state.root / "ended").iterdir()) == ["5"]
    assert state.decide(1, "r1", "0:0") is Decision.ROLLBACK  # purged: what is pending is not its
    assert state.decide(2, "r1", "0:0") is Decision.COMMIT  # kept: its record still answers
    assert state.decide(6, "r1", "9:9") is Decision.ROLLBACK


def test_a_stream_commit_purges_below_the_oldest_offsets_entry(tmp_path: Path) -> None:
    cp = tmp_path / "cp"
    root = state_root(str(cp))
    (cp / "offsets").mkdir(parents=True)
    for b in range(3):
        (cp / "offsets" / str(b)).write_text("v1")
        _committer(root, {}, cp).commit(_msgs("r1", H1), b)
    assert sorted(p.name for p in (root / "commits").iterdir()) == ["0", "1", "2"]
    (cp / "offsets" / "0").unlink()  # Spark's retention moved on
    (cp / "offsets" / "3").write_text("v1")
    _committer(root, {}, cp).commit(_msgs("r1", H2), 3)
    assert sorted(p.name for p in (root / "commits").iterdir()) == ["1", "2", "3"]
    assert TxState(root).purged_below() == 1


def test_driver_commit_against_a_broker_that_discarded_a_half(tmp_path: Path) -> None:
    """Real broker, real END_TRANSACTIONs: of a batch's two halves one was discarded after its checks
    before the driver's commit: the commit puts the other's rows once and raises naming the lost one;
    a retried commit raises again and puts nothing twice."""
    pytest.importorskip("pyspark")
    from tidemq.client import LocalTransactionState, TransactionListener, TransactionProducer
    from tidemq.clock import now_ms
    from tidemq.protocol.message import Message
    from tidemq.spark.options import SinkOptions
    from tidemq.spark.tx_commit import TransactionLostError, TxCommitter
    from tidemq.testing import ClusterThread

    class Undecided(TransactionListener):
        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            return LocalTransactionState.UNKNOW

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.UNKNOW

    with ClusterThread(tmp_path / "broker", transaction_check_max=1) as cluster:
        producer = TransactionProducer(
            Undecided(), namesrv_addr=cluster.namesrv_addr, producer_group="SparkTxPG"
        )
        producer.start()
        service = cluster.broker.transaction_service
        halves = []

        def send(body: bytes) -> None:
            sent = producer.send_message_in_transaction(Message("SparkTxLost", body), None)
            clo = decode_offset_msg_id(sent.offset_msg_id)[1]
            halves.append(HalfRef("broker-a", cluster.broker_addr, clo, sent.queue_offset, sent.msg_id, 1))

        try:
            send(b"lost")
            service.clock_ms = lambda: now_ms() + 3_600_000
            cluster.run(service.check_pass())  # checked once
            cluster.run(service.check_pass())  # transactionCheckMax reached: discarded
            assert service.discarded == 1 and not service.pending
            service.clock_ms = now_ms
            send(b"kept")  # pending until the driver's commit
        finally:
            producer.shutdown()
        halves.reverse()
        committer = TxCommitter(
            SinkOptions(cluster.namesrv_addr, producer_group="SparkTxPG"), str(tmp_path / "tx")
        )
        for _ in range(2):
            with pytest.raises(TransactionLostError, match=f"batch 0 .*{halves[1].msg_id} \\(1 rows"):
                committer.commit(_msgs("r1", *halves), 0)
        store = cluster.broker.store
        assert sum(store.get_max_offset_in_queue("SparkTxLost", q) for q in range(4)) == 1  # "kept", once


def test_batch_write_directories_go_a_day_after_their_last_change(tmp_path: Path) -> None:
    import os

    from tidemq.spark import tx_retention

    parent = tmp_path / "tidemq-tx"
    now = 1_000_000.0
    day = tx_retention.BATCH_WRITE_KEEP_S

    def job(name: str, age_s: float, *, record: bool, ended: bool) -> Path:
        state = TxState(parent / name)
        state.register_run(name)
        if record:
            state.record_commit(CommitRecord(0, name, frozenset({"0:0"}), (H1,)))
        if ended:
            state.mark_ended(0)
        for path in [state.root, *state.root.iterdir()]:
            os.utime(path, (now - age_s, now - age_s))
        return state.root

    job("batch-old-ended", day + 60, record=True, ended=True)
    job("batch-old-unconfirmed", day + 60, record=True, ended=False)  # its checks still answer COMMIT
    job("batch-old-no-record", day + 60, record=False, ended=False)  # a driver that died: nothing to commit
    job("batch-recent", 60, record=True, ended=True)
    (parent / ".trash-batch-x" / "commits").mkdir(parents=True)  # a purge killed half-way
    assert tx_retention.purge_batch_writes(parent, now=now) == 2
    assert sorted(p.name for p in parent.iterdir()) == ["batch-old-unconfirmed", "batch-recent"]
    assert tx_retention.purge_batch_writes(tmp_path / "none", now=now) == 0
