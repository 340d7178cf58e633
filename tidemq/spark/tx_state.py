"""The transactional sink's state in the checkpoint: which batch committed through which attempt.

Pure file code (no Spark, no sockets), shared by the write tasks, the driver's commit and every
check listener of the producer group: each of them reads the same files, so a broker check is
answered the same way whichever process it reaches, and after any crash (docs/spark.md,
"Exactly-once").

Layout under the state root (``<checkpointLocation>/tidemq-tx`` for a stream; a batch write's own
directory ``<checkpointLocation or tmp>/tidemq-tx/<jobId>``)::

    runs/<runId>          a run of the query (a driver's start; a batch write's job): registration
                          time in ns, written before any of its tasks sends a half message
    commits/<batchId>     the commit record of a batch (JSON, :class:`CommitRecord`); the first
                          one written wins, later commits of the batch read it
    aborts/<batchId>.<runId>   the run gave the batch up (Spark called abort)
    ended/<batchId>       every half the record names was committed (the broker answered SUCCESS)
    lost/<batchId>        halves of the record the broker refused to commit (JSON, :class:`LostBatch`):
                          the driver fails the batch while this file is there
    lost/<batchId>.accepted   the same, renamed by the user: go on without those rows
    purged                the batches below this id have had their files purged
                          (:mod:`tidemq.spark.tx_retention`)

Every file is written to a temporary name, fsynced, hard-linked to its name (which fails if the name
exists: the first writer wins, atomically) and the directory fsynced, so a record the driver wrote
before ending any transaction survives a crash of the machine too.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CommitRecord", "Decision", "HalfRef", "LostBatch", "TxState", "fault_point", "state_root"]

log = logging.getLogger(__name__)

STATE_DIR = "tidemq-tx"
FAULT_FILE = "_fault"


class Decision(enum.Enum):
    """What a check of a half message is answered (LocalTransactionState's names)."""

    COMMIT = "COMMIT_MESSAGE"
    ROLLBACK = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


@dataclass(frozen=True, slots=True)
class HalfRef:
    """One half message as END_TRANSACTION names it (any process of the producer group can end it).

    Attributes:
        broker_name / broker_addr: where it is stored (``host:port``).
        commit_log_offset: the half record's commit-log offset (from its offset msgId).
        queue_offset: its offset in the half queue (``tranStateTableOffset``).
        msg_id: its ``UNIQ_KEY``.
        rows: rows it carries (a batch body).
    """

    broker_name: str
    broker_addr: str
    commit_log_offset: int
    queue_offset: int
    msg_id: str
    rows: int

    def to_json(self) -> list[object]:
        """``[broker_name, broker_addr, commit_log_offset, queue_offset, msg_id, rows]``."""
        return [
            self.broker_name,
            self.broker_addr,
            self.commit_log_offset,
            self.queue_offset,
            self.msg_id,
            self.rows,
        ]

    @classmethod
    def from_json(cls, raw: list[object]) -> HalfRef:
        """Read what :meth:`to_json` wrote.

        Raises:
            ValueError, TypeError: ``raw`` is not six such values.
        """
        name, addr, clo, qo, mid, rows = raw
        return cls(str(name), str(addr), int(clo), int(qo), str(mid), int(rows))  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """A batch recorded committed: the run and task attempts (``"partition:attempt"``) whose half
    messages are the batch's, and those half messages (what a restarted driver commits again)."""

    batch_id: int
    run_id: str
    attempts: frozenset[str]
    halves: tuple[HalfRef, ...]

    def to_bytes(self) -> bytes:
        """The ``commits/<batchId>`` file's content: compact JSON ``{"batchId", "runId",
        "attempts": ["partition:attempt", ...] sorted, "halves": [HalfRef.to_json(), ...]}``."""
        return json.dumps(
            {
                "batchId": self.batch_id,
                "runId": self.run_id,
                "attempts": sorted(self.attempts),
                "halves": [h.to_json() for h in self.halves],
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> CommitRecord:
        """Read what :meth:`to_bytes` wrote.

        Raises:
            ValueError, KeyError, TypeError: ``raw`` is not a commit record.
        """
        obj = json.loads(raw)
        return cls(
            int(obj["batchId"]),
            str(obj["runId"]),
            frozenset(obj["attempts"]),
            tuple(HalfRef.from_json(h) for h in obj["halves"]),
        )


@dataclass(frozen=True, slots=True)
class LostBatch:
    """Halves of a batch's record that the broker refused to commit: their rows will never be in the
    topic. ``halves``: ``(half, the broker's remark)``; ``committed_rows``: rows of the record's
    other halves; ``accepted``: the user renamed the file to ``<batchId>.accepted``."""

    batch_id: int
    halves: tuple[tuple[HalfRef, str], ...]
    committed_rows: int
    accepted: bool = False

    @property
    def rows(self) -> int:
        """Rows lost."""
        return sum(h.rows for h, _ in self.halves)

    def to_bytes(self) -> bytes:
        """The ``lost/<batchId>`` file's content: compact JSON ``{"batchId", "committedRows",
        "halves": [[broker_name, broker_addr, commit-log offset, queue offset, msg id, rows,
        remark], ...]}``."""
        halves = [[*h.to_json(), remark] for h, remark in self.halves]
        obj = {"batchId": self.batch_id, "committedRows": self.committed_rows, "halves": halves}
        return json.dumps(obj, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes, accepted: bool = False) -> LostBatch:
        """Read what :meth:`to_bytes` wrote; ``accepted``: the file was renamed ``.accepted``.

        Raises:
            ValueError, KeyError, IndexError, TypeError: ``raw`` is not such a file.
        """
        obj = json.loads(raw)
        halves = tuple((HalfRef.from_json(h[:6]), str(h[6])) for h in obj["halves"])
        return cls(int(obj["batchId"]), halves, int(obj["committedRows"]), accepted)


def state_root(checkpoint_location: str) -> Path:
    """``<checkpointLocation>/tidemq-tx`` as a local path (``file:`` URIs accepted).

    Raises:
        ValueError: a location on another file system (``hdfs://``...): every process of the
            producer group must be able to read the state with plain file calls.
    """
    loc = checkpoint_location
    if loc.startswith("file://"):
        loc = loc[len("file://") :]
    elif loc.startswith("file:"):
        loc = loc[len("file:") :]
    if "://" in loc:
        raise ValueError(
            f"the transactional tidemq sink keeps its state in the checkpoint with plain file calls; "
            f"checkpointLocation {checkpoint_location!r} is not a local (or mounted) path"
        )
    return Path(loc) / STATE_DIR


def fault_point(root: str | Path, point: str) -> None:
    """Test hook: SIGKILL this process when ``<root>/_fault`` holds ``point`` (the file is removed
    first, so the restarted query passes). Points: ``before-record``, ``after-record``,
    ``mid-commit`` (driver commits; ``before-record`` in the non-transactional sink's too).
    ``pause-<point>`` instead makes the process write ``paused-<point>`` there and wait (60 s at
    most) until the test removes the file."""
    path = Path(root) / FAULT_FILE
    try:
        wanted = path.read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return
    if wanted == f"pause-{point}":
        path.write_text(f"paused-{point}")
        deadline = time.monotonic() + 60
        while path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return
    if wanted == point:
        path.unlink()
        log.warning("tidemq sink: fault %s: killing the committing process %d", point, os.getpid())
        os.kill(os.getpid(), signal.SIGKILL)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(path: Path, data: bytes) -> Path:
    """``data`` written and fsynced to a new temporary file next to ``path`` (its directory made
    first); returns the temporary file's path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def write_replace(path: Path, data: bytes) -> None:
    """Write ``data`` durably at ``path``, replacing what is there (temporary file, fsync, rename,
    fsync of the directory): a reader sees the old content or the new, never a part."""
    os.replace(_write_temp(path, data), path)
    _fsync_dir(path.parent)


def write_once(path: Path, data: bytes) -> bool:
    """Write ``data`` durably at ``path`` unless a file is there already; True if this call wrote it."""
    tmp = _write_temp(path, data)
    try:
        os.link(tmp, path)
        wrote = True
    except FileExistsError:
        wrote = False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    if wrote:
        _fsync_dir(path.parent)
    return wrote


class TxState:
    """The state files of one query (or one batch write) under ``root``. See the module doc."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # -- runs -----------------------------------------------------------------------------------

    def register_run(self, run_id: str) -> None:
        """Record ``run_id`` (idempotent: the first registration's time stays)."""
        path = self.root / "runs" / run_id
        if not path.exists():
            write_once(path, str(time.time_ns()).encode())

    def run_dead(self, run_id: str) -> bool:
        """True when a run registered after ``run_id`` exists: a newer driver of the query started,
        so ``run_id``'s driver is gone and will commit nothing more."""
        runs = self.root / "runs"
        try:
            mine = int((runs / run_id).read_bytes() or b"0")
        except (FileNotFoundError, ValueError):
            mine = 0
        try:
            names = [n for n in os.listdir(runs) if not n.startswith(".") and n != run_id]
        except FileNotFoundError:
            return False
        for name in names:
            try:
                if int((runs / name).read_bytes() or b"0") > mine:
                    return True
            except (FileNotFoundError, ValueError):
                continue
        return False

    # -- commits and aborts ---------------------------------------------------------------------

    def commit_record(self, batch_id: int) -> CommitRecord | None:
        """The batch's commit record, or None when it has none."""
        try:
            return CommitRecord.from_bytes((self.root / "commits" / str(batch_id)).read_bytes())
        except FileNotFoundError:
            return None

    def record_commit(self, record: CommitRecord) -> CommitRecord:
        """Record ``record`` durably unless the batch has one; returns the batch's record (the
        earlier one if there was one: a replayed batch commits what its first commit named)."""
        path = self.root / "commits" / str(record.batch_id)
        if write_once(path, record.to_bytes()):
            return record
        existing = self.commit_record(record.batch_id)
        assert existing is not None
        return existing

    def record_abort(self, batch_id: int, run_id: str) -> None:
        """Record that ``run_id`` gave up ``batch_id`` (its half messages are rolled back)."""
        write_once(self.root / "aborts" / f"{batch_id}.{run_id}", b"")

    def aborted(self, batch_id: int, run_id: str) -> bool:
        """True when :meth:`record_abort` recorded that ``run_id`` gave up ``batch_id``."""
        return (self.root / "aborts" / f"{batch_id}.{run_id}").exists()

    def ended(self, batch_id: int) -> bool:
        """True when every half of the batch's record was committed (:meth:`mark_ended`)."""
        return (self.root / "ended" / str(batch_id)).exists()

    def mark_ended(self, batch_id: int) -> None:
        """Record that the broker committed every half of the batch's record. Not fsynced: a marker
        a machine crash loses only makes the next commit confirm the batch's halves again."""
        path = self.root / "ended" / str(batch_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def lost_path(self, batch_id: int) -> Path:
        """``lost/<batchId>``: rename it to ``<batchId>.accepted`` to go on without those rows."""
        return self.root / "lost" / str(batch_id)

    def lost(self, batch_id: int) -> LostBatch | None:
        """The batch's lost halves (``lost/<batchId>``, or ``.accepted`` when only that is there)."""
        path = self.lost_path(batch_id)
        for candidate, accepted in ((path, False), (path.with_name(f"{path.name}.accepted"), True)):
            try:
                return LostBatch.from_bytes(candidate.read_bytes(), accepted)
            except FileNotFoundError:
                continue
        return None

    def record_lost(self, lost: LostBatch) -> LostBatch:
        """Record ``lost`` (joined with the halves recorded before, accepted or not) as
        ``lost/<batchId>``, durably; returns what was recorded (not accepted)."""
        earlier = self.lost(lost.batch_id)
        halves = dict(earlier.halves) if earlier is not None else {}
        halves.update(lost.halves)
        joined = LostBatch(lost.batch_id, tuple(halves.items()), lost.committed_rows)
        write_replace(self.lost_path(lost.batch_id), joined.to_bytes())
        return joined

    def purged_below(self) -> int:
        """Batches below this id had their files purged (0: none)."""
        try:
            return int((self.root / "purged").read_bytes() or b"0")
        except (FileNotFoundError, ValueError):
            return 0

    # -- checks ---------------------------------------------------------------------------------

    def decide(self, batch_id: int, run_id: str, attempt: str) -> Decision:
        """The answer to a check of a half message of ``batch_id`` sent by task attempt ``attempt``
        (``"partition:attemptNumber"``) of ``run_id``:

        * the batch is recorded committed: COMMIT if through this run and attempt, else ROLLBACK;
        * else ROLLBACK if the batch's files were purged (every half its record named was
          committed: what is still pending is not the batch's);
        * else ROLLBACK if the run aborted the batch or a newer run exists (the run is dead);
        * else UNKNOW: the batch is still running (the broker asks again later).
        """
        record = self.commit_record(batch_id)
        if record is not None:
            ok = record.run_id == run_id and attempt in record.attempts
            return Decision.COMMIT if ok else Decision.ROLLBACK
        if batch_id < self.purged_below():
            return Decision.ROLLBACK
        if self.aborted(batch_id, run_id) or self.run_dead(run_id):
            return Decision.ROLLBACK
        return Decision.UNKNOW
