"""The transactional sink's driver side: commit and abort of a batch's half messages.

Split from :mod:`tidemq.spark.tx_sink` (the write tasks and Spark's writer classes; no PySpark
here, so the decisions are unit-tested without it). See that module and docs/spark.md,
"Exactly-once".

Commit of batch B: record B in the checkpoint (the first record wins), END_TRANSACTION COMMIT every
half the record names and ROLLBACK the others; ``ended/B`` once every COMMIT answered SUCCESS; a
COMMIT refused because the half is gone fails the batch with :class:`TransactionLostError`,
recorded in ``lost/B`` so every later commit of B fails the same way until the user renames it
``.accepted`` or deletes it (with ``commits/B``). Then up to :data:`RETRIES_PER_COMMIT` older
batches not ended are confirmed, and ended batches older than what Spark keeps are purged
(:mod:`tidemq.spark.tx_retention`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tidemq.errors import ClientError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import EndTransactionRequestHeader
from tidemq.protocol.message_codec import MessageSysFlag
from tidemq.spark import tx_retention
from tidemq.spark.conn import connections
from tidemq.spark.options import SinkOptions
from tidemq.spark.tx_state import CommitRecord, HalfRef, LostBatch, TxState, fault_point

__all__ = [
    "ENDS_IN_FLIGHT",
    "LOST_REMARK",
    "RETRIES_PER_COMMIT",
    "EndFailure",
    "TransactionLostError",
    "TxCommitter",
    "end_request",
    "lost_message",
]

log = logging.getLogger(__name__)

ENDS_IN_FLIGHT = 64
"""END_TRANSACTION requests in flight during a driver commit."""
RETRIES_PER_COMMIT = 4
"""Older batches not yet ended whose halves a driver commit confirms (COMMIT again)."""
LOST_REMARK = "Find prepared transaction message failed"
"""How a broker's refusal of a COMMIT begins when the half is gone (RocketMQ's remark; tidemq adds
": ... was discarded / rolled back ...")."""


class TransactionLostError(ClientError):
    """The broker refused to commit half messages of a batch recorded committed: their rows will
    never be in the topic. The message names the batch, the halves and what to do."""


@dataclass(frozen=True, slots=True)
class EndFailure:
    """An END_TRANSACTION that did not answer SUCCESS: ``code`` None when no answer came."""

    half: HalfRef
    code: int | None
    remark: str

    @property
    def lost(self) -> bool:
        """True when the broker says the half is gone (discarded, rolled back, or not found): a
        COMMIT can never succeed. Other failures (no answer, a flush timeout, a busy broker) leave
        the half pending, and the broker's check commits it from the checkpoint."""
        return self.code == ResponseCode.SYSTEM_ERROR and self.remark.startswith(LOST_REMARK)

    def __str__(self) -> str:
        code = "no answer" if self.code is None else str(self.code)
        return f"{self.half.msg_id}: {code} {self.remark}"


def lost_message(lost: LostBatch, state: TxState, stream: bool = True) -> str:
    """The text of :class:`TransactionLostError` for ``lost``: the batch, its lost halves (the
    first 10), the rows, and the two ways on (``stream``; a batch write has failed, no more)."""
    path = state.lost_path(lost.batch_id)
    named = "; ".join(
        f"{h.msg_id} ({h.rows} rows, broker {h.broker_name} {h.broker_addr}, commitLogOffset "
        f"{h.commit_log_offset}): {remark}"
        for h, remark in lost.halves[:10]
    )
    more = f"; and {len(lost.halves) - 10} more (all in {path})" if len(lost.halves) > 10 else ""
    head = (
        f"tidemq sink: batch {lost.batch_id} is recorded committed, but the broker refused to commit "
        f"{len(lost.halves)} of its half messages, {lost.rows} rows that will never be in the topic "
        f"(the other {lost.committed_rows} rows of the batch are): {named}{more}."
    )
    if not stream:
        return f"{head} The batch write failed part-way: write the rows again (the committed ones twice)."
    return (
        f"{head} The query stops, "
        f"and fails the same way at every restart from this checkpoint until you decide: to go on "
        f"without those rows, rename {path} to {path.name}.accepted; to write the whole batch again "
        f"(its {lost.committed_rows} committed rows a second time), delete {path} and "
        f'{state.root / "commits" / str(lost.batch_id)}. See docs/spark.md, "When the broker refuses '
        f"a batch's commit\"."
    )


def end_request(group: str, half: HalfRef, commit: bool) -> RemotingCommand:
    """END_TRANSACTION (37, answered) for ``half`` of producer group ``group``."""
    header = EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=half.queue_offset,
        commit_log_offset=half.commit_log_offset,
        commit_or_rollback=(
            MessageSysFlag.TRANSACTION_COMMIT_TYPE if commit else MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
        ),
        from_transaction_check=False,
        msg_id=half.msg_id,
        transaction_id=half.msg_id,
    )
    return RemotingCommand.create_request(RequestCode.END_TRANSACTION, header.to_ext_fields())


class TxCommitter:
    """The driver side of one query's (or batch write's) transactions: commit and abort.

    Args:
        opts: the sink's options (producer group, send timeout).
        root: the state root (:func:`tidemq.spark.tx_state.state_root`).
        checkpoint: a stream's checkpoint directory (its ``offsets/`` says which batches Spark
            keeps: older ended ones are purged); None for a batch write (nothing purged).
    """

    def __init__(self, opts: SinkOptions, root: str, checkpoint: str | None = None) -> None:
        self.opts = opts
        self.root = root
        self.state = TxState(root)
        self.checkpoint = checkpoint

    def commit(self, messages: Sequence[Any], batch_id: int) -> None:
        """Record ``batch_id`` committed (unless it is: then its record wins), then COMMIT its
        record's halves and ROLLBACK the other halves of ``messages``; then confirm older batches
        not yet ended and purge what Spark keeps no more.

        Raises:
            ClientError: the run is dead (a newer run of the query started): nothing recorded.
            TransactionLostError: the broker refused to commit halves of this batch's record (or of
                an older batch's): recorded in ``lost/<batchId>``, raised again at every commit
                of that batch until the user renames it ``.accepted`` or deletes it.
        """
        msgs = _task_messages(messages)
        fault_point(self.root, "before-record")
        run = msgs[0].run_id if msgs else ""
        if run and self.state.commit_record(batch_id) is None and self.state.run_dead(run):
            raise ClientError(
                f"batch {batch_id} of run {run} not committed: a newer run of the query started"
            )
        tx_retention.adopt_legacy_records(self.state, batch_id)
        mine = CommitRecord(
            batch_id, run, frozenset(m.attempt for m in msgs), tuple(h for m in msgs for h in m.halves)
        )
        record = self.state.record_commit(mine)
        fault_point(self.root, "after-record")
        named = set(record.halves)
        self.settle(record, [h for m in msgs for h in m.halves if h not in named])
        for older in tx_retention.unended(self.state, batch_id)[:RETRIES_PER_COMMIT]:
            old = self.state.commit_record(older)
            if old is not None:
                self.settle(old, [])
        if self.checkpoint is not None:
            oldest = tx_retention.oldest_retained_batch(self.checkpoint)
            if oldest is not None:
                tx_retention.purge(self.state, min(oldest, batch_id))

    def settle(self, record: CommitRecord, others: list[HalfRef]) -> None:
        """COMMIT the halves of ``record`` (none when the batch ended; not those recorded lost)
        and ROLLBACK ``others``; mark the batch ended when every COMMIT succeeded.

        Raises:
            TransactionLostError: the batch has lost halves not accepted, before or now.
        """
        batch_id = record.batch_id
        lost = self.state.lost(batch_id)
        if lost is not None and not lost.accepted:
            self._end(others, False)
            raise TransactionLostError(lost_message(lost, self.state, self.checkpoint is not None))
        skip = {h for h, _ in lost.halves} if lost is not None else set()
        todo = [] if self.state.ended(batch_id) else [h for h in record.halves if h not in skip]
        failed = self._end(todo, True)
        failed += self._end(others, False)
        committing = set(record.halves)
        refused = [(f.half, f.remark) for f in failed if f.lost and f.half in committing]
        rows = sum(h.rows for h in record.halves)
        if refused:
            gone = {h for h, _ in refused} | skip
            lost = self.state.record_lost(
                LostBatch(batch_id, tuple(refused), sum(h.rows for h in record.halves if h not in gone))
            )
            raise TransactionLostError(lost_message(lost, self.state, self.checkpoint is not None))
        if any(f.half in committing for f in failed):
            log.warning(
                "tidemq sink: batch %d committed (%d rows); %d END_TRANSACTION failed, the broker's check "
                "will end them from the checkpoint (the next commit confirms them): %s",
                batch_id,
                rows,
                len(failed),
                [str(f) for f in failed[:3]],
            )
            return
        if failed:
            log.info("tidemq sink: batch %d: %d ROLLBACK failed (the check ends them)", batch_id, len(failed))
        if not self.state.ended(batch_id):
            self.state.mark_ended(batch_id)
        if todo:
            log.info(
                "tidemq sink: batch %d committed, %d rows in %d half messages", batch_id, rows, len(todo)
            )

    def abort(self, messages: Sequence[Any], batch_id: int, run_id: str | None = None) -> None:
        """Record the runs of ``messages`` (and ``run_id``) as having given ``batch_id`` up, then
        ROLLBACK their halves; a batch recorded committed is settled again instead (its lost
        halves, if any, are logged: the next commit of the batch raises)."""
        msgs = _task_messages(messages)
        record = self.state.commit_record(batch_id)
        if record is not None:
            named = set(record.halves)
            try:
                self.settle(record, [h for m in msgs for h in m.halves if h not in named])
            except TransactionLostError:
                log.error(
                    "tidemq sink: abort of batch %d: the broker refused to commit some of its halves "
                    "(%s); the next commit of the batch fails",
                    batch_id,
                    self.state.lost_path(batch_id),
                )
            return
        for run in {m.run_id for m in msgs} | ({run_id} if run_id else set()):
            self.state.record_abort(batch_id, run)
        self._end([h for m in msgs for h in m.halves], False)
        log.warning("tidemq sink: batch %d aborted; its half messages rolled back", batch_id)

    def _end(self, halves: list[HalfRef], commit: bool) -> list[EndFailure]:
        """END_TRANSACTION for each of ``halves`` (concurrently); the failures. With the
        ``mid-commit`` fault, the process is killed after the first half of the COMMITs."""
        if not halves:
            return []
        conns = connections()
        group, timeout = self.opts.producer_group, self.opts.send_timeout
        cut = len(halves) // 2 if commit else -1

        async def end_all() -> list[EndFailure]:
            gate = asyncio.Semaphore(ENDS_IN_FLIGHT)
            failed: list[EndFailure] = []

            async def one(half: HalfRef) -> None:
                async with gate:
                    try:
                        answer = await conns.remoting.invoke(
                            half.broker_addr, end_request(group, half, commit), timeout
                        )
                    except Exception as exc:  # the check decides it then
                        failed.append(EndFailure(half, None, str(exc)))
                        return
                if answer.code != ResponseCode.SUCCESS:
                    failed.append(EndFailure(half, answer.code, answer.remark or ""))

            if cut > 0:
                await asyncio.gather(*(one(h) for h in halves[:cut]))
                await asyncio.get_running_loop().run_in_executor(None, fault_point, self.root, "mid-commit")
            await asyncio.gather(*(one(h) for h in halves[max(cut, 0) :]))
            return failed

        return conns.loop.run(end_all(), timeout * (len(halves) // ENDS_IN_FLIGHT + 2))


def _task_messages(messages: Sequence[Any]) -> list[Any]:
    """The tasks' commit messages (``TxCommitMessage``: ``run_id``, ``attempt``, ``halves``) among
    what Spark handed over (a failed task's entry is None)."""
    return [m for m in messages if m is not None and hasattr(m, "halves") and hasattr(m, "attempt")]
