"""Purging the transactional sink's state files of batches Spark no longer keeps.

Spark keeps the last ``spark.sql.streaming.minBatchesToRetain`` (default 100) batches in the
checkpoint's ``offsets/`` and ``commits/`` logs and deletes older ones; it can replay only the
newest batch. The sink's files of a batch older than the oldest batch in ``offsets/`` are needed no
more once the broker committed every half its record names (``ended/<batchId>``): no replay will
read the record, and any half of the batch still pending is not one of the record's, so the
answer to its check is ROLLBACK whatever the files say.

Crash-safe order (:func:`purge`): the ``purged`` watermark is written durably first (a check of a
batch below it with no record answers ROLLBACK: :meth:`TxState.decide`), then per batch the commit
record, then its ``ended`` marker (so a crash in between leaves a record that is purged next time,
never a record without its marker), its aborts and an accepted ``lost`` file. A batch below the
watermark whose record is not ended keeps its record: its checks still answer COMMIT, and the
driver confirms its halves again (:func:`unended`). ``runs/`` and an ``lost/<batchId>`` file not
accepted are kept.

A batch write's directory (``tidemq-tx/batch-<uuid>``) goes whole (:func:`purge_batch_writes`,
at the next transactional batch write to the same location) once it has not changed for
:data:`BATCH_WRITE_KEEP_S`, unless it holds a commit record not ended (its checks still answer
COMMIT). A half of a failed task attempt cannot stay pending that long with the broker's defaults
(discarded after about 15 minutes); were one to, its check would be answered UNKNOW from then on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Final

from tidemq.spark.tx_state import TxState, write_replace

__all__ = [
    "BATCH_WRITE_KEEP_S",
    "adopt_legacy_records",
    "oldest_retained_batch",
    "purge",
    "purge_batch_writes",
    "unended",
]

log = logging.getLogger(__name__)

BATCH_WRITE_KEEP_S: Final = 24 * 3600.0
"""How long a batch write's state directory stays after its last change (seconds)."""
_TRASH = ".trash-"


def _batch_ids(directory: Path) -> list[tuple[int, str]]:
    """``(batch id, file name)`` of the files in ``directory`` named ``<id>`` or ``<id>.<rest>``,
    sorted."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        head = name.partition(".")[0]
        if head.isascii() and head.isdigit():
            out.append((int(head), name))
    return sorted(out)


def oldest_retained_batch(checkpoint: str | Path) -> int | None:
    """The oldest batch id Spark keeps in ``<checkpoint>/offsets`` (None when it has none)."""
    ids = [b for b, name in _batch_ids(Path(checkpoint) / "offsets") if name == str(b)]
    return ids[0] if ids else None


def adopt_legacy_records(state: TxState, below: int) -> int:
    """A state directory from before ``ended/`` markers: mark every record below ``below`` ended
    (their ENDs were sent by an earlier version, which did not record the answers), so they are
    neither confirmed again nor kept forever. Returns how many; nothing once ``ended/`` exists."""
    ended_dir = state.root / "ended"
    if ended_dir.exists():
        return 0
    ended_dir.mkdir(parents=True, exist_ok=True)
    old = [b for b, name in _batch_ids(state.root / "commits") if name == str(b) and b < below]
    for b in old:
        state.mark_ended(b)
    if old:
        log.info("tidemq sink: %d commit records from an earlier version taken as ended", len(old))
    return len(old)


def unended(state: TxState, below: int) -> list[int]:
    """Batches below ``below`` with a commit record whose halves are not all known committed."""
    return [
        b
        for b, name in _batch_ids(state.root / "commits")
        if name == str(b) and b < below and not state.ended(b)
    ]


def _unlink(path: Path) -> bool:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        return True
    return False


def purge(state: TxState, below: int) -> int:
    """Delete the files of the ended batches below ``below`` (the oldest batch Spark keeps), in the
    module doc's order; returns how many commit records went."""
    root = state.root
    if below <= 0:
        return 0
    if below > state.purged_below():
        write_replace(root / "purged", str(below).encode())
    removed = 0
    for b, name in _batch_ids(root / "commits"):
        if b < below and name == str(b) and state.ended(b):
            removed += _unlink(root / "commits" / name)
    for b, name in _batch_ids(root / "ended"):
        if b < below and not (root / "commits" / str(b)).exists():
            _unlink(root / "ended" / name)
    for b, name in _batch_ids(root / "aborts"):
        if b < below:
            _unlink(root / "aborts" / name)
    for b, name in _batch_ids(root / "lost"):
        if b < below and name.endswith(".accepted") and not (root / "commits" / str(b)).exists():
            _unlink(root / "lost" / name)
    if removed:
        log.info("tidemq sink: purged the state files of %d batches below %d", removed, below)
    return removed


def _last_change(path: Path) -> float:
    """The newest mtime of ``path`` and the directories in it (a file added to ``commits/`` moves
    ``commits/``'s)."""
    newest = path.stat().st_mtime
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
    return newest


def purge_batch_writes(
    parent: str | Path, keep_s: float = BATCH_WRITE_KEEP_S, now: float | None = None
) -> int:
    """Delete the batch-write directories under ``parent`` (``<location>/tidemq-tx``) unchanged
    for ``keep_s`` seconds, except those with a commit record not ended; each is renamed to
    ``.trash-<name>`` first (atomic), so a crash leaves a name this removes next time. Returns how
    many went."""
    now = time.time() if now is None else now
    try:
        entries = sorted(os.scandir(parent), key=lambda e: e.name)
    except FileNotFoundError:
        return 0
    removed = 0
    for entry in entries:
        path = Path(entry.path)
        if entry.name.startswith(_TRASH):
            shutil.rmtree(path, ignore_errors=True)
            continue
        if not entry.name.startswith("batch-") or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            if now - _last_change(path) < keep_s:
                continue
            if (path / "commits" / "0").exists() and not (path / "ended" / "0").exists():
                continue
            trash = path.with_name(f"{_TRASH}{entry.name}")
            os.rename(path, trash)
        except FileNotFoundError:  # another writer's purge got there first
            continue
        shutil.rmtree(trash, ignore_errors=True)
        removed += 1
    if removed:
        log.info("tidemq sink: removed %d batch-write state directories older than %.0f s", removed, keep_s)
    return removed
