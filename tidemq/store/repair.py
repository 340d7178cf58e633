"""Consume queues checked against the commit log at start, and rebuilt from it when damaged.

RocketMQ trusts its consume queues after a clean stop and only re-dispatches the commit-log tail
after a crash, so a deleted, short or overwritten consume-queue file makes that queue's messages
unreadable although every record is still in the commit log. Here, at every start:

* a queue whose files cannot be opened (a file of the wrong size: truncated) is moved aside to
  ``<root>/damaged/consumequeue/...`` and rebuilt;
* a queue recorded in ``<root>/consumequeue.json`` (the manifest of every queue's max offset,
  written with the checkpoint) that is missing or shorter than recorded is rebuilt;
* every queue's entries are checked: the first and the last :data:`SAMPLE` entries after a clean
  stop (fast: 20-byte entries, no commit-log reads), all of them after a crash (the abort-file
  path): commit-log offsets in range and increasing; the first and last entries' records are read
  and must be of that topic, queue and queue offset;
* rebuilding = one scan of the commit log dispatching only the damaged queues' records.

Each rebuilt queue is one WARNING line naming the queue, why, and how many entries it got back.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from tidemq.errors import ProtocolError, StoreError
from tidemq.protocol.message_codec import RecordInfo, read_record_info
from tidemq.store.commit_log import CommitLog
from tidemq.store.config import CQ_STORE_UNIT_SIZE
from tidemq.store.config_file import atomic_write_json, load_json
from tidemq.store.consume_queue import PRE_BLANK_SIZE, ConsumeQueue, iter_units

__all__ = [
    "MANIFEST",
    "SAMPLE",
    "check_consume_queue",
    "load_manifest",
    "missing_from_manifest",
    "move_queue_aside",
    "pad_short_segments",
    "save_manifest",
]

log = logging.getLogger(__name__)

MANIFEST = "consumequeue.json"
"""``<root>/consumequeue.json``: ``{"queues": {"<topic>/<queueId>": max offset}}``."""
SAMPLE = 300_000
"""Entries (one default consume-queue file) checked at the end of each queue after a clean stop:
range and order only, no commit-log reads (about 50 ms per full file)."""

QueueKey = tuple[str, int]


# -- the manifest ------------------------------------------------------------------------------------


def load_manifest(root: Path) -> dict[QueueKey, int]:
    """The recorded ``{(topic, queue id): max offset}`` (empty when there is none or it is unreadable)."""
    try:
        data = load_json(root / MANIFEST)
    except StoreError as exc:
        log.warning("%s unreadable (%s): consume queues are checked without it", root / MANIFEST, exc)
        return {}
    out: dict[QueueKey, int] = {}
    if isinstance(data, dict) and isinstance(data.get("queues"), dict):
        for key, value in data["queues"].items():
            topic, _, qid = str(key).rpartition("/")
            if topic and qid.isdigit() and isinstance(value, int):
                out[(topic, int(qid))] = value
    return out


def save_manifest(root: Path, table: dict[QueueKey, int]) -> None:
    """Write the manifest atomically (tmp + fsync + rename, previous kept as ``.bak``)."""
    atomic_write_json(root / MANIFEST, {"queues": {f"{t}/{q}": n for (t, q), n in sorted(table.items())}})


def missing_from_manifest(
    manifest: dict[QueueKey, int], queues: dict[QueueKey, ConsumeQueue]
) -> dict[QueueKey, str]:
    """Queues the manifest knows that are gone or shorter than recorded: ``{key: why}``."""
    out: dict[QueueKey, str] = {}
    for key, recorded in manifest.items():
        cq = queues.get(key)
        if cq is None or cq.get_max_offset_in_queue() == 0 < recorded:
            out[key] = f"missing (it held {recorded} entries)"
        elif cq.get_max_offset_in_queue() < recorded:
            out[key] = f"shorter than recorded ({cq.get_max_offset_in_queue()} < {recorded} entries)"
    return out


# -- files that cannot be opened ------------------------------------------------------------------------


def move_queue_aside(queue_dir: Path, damaged_root: Path) -> Path:
    """Move every file of ``queue_dir`` to ``damaged_root/consumequeue/<topic>/<qid>/``; returns it."""
    target = damaged_root / "consumequeue" / queue_dir.parent.name / queue_dir.name
    target.mkdir(parents=True, exist_ok=True)
    for f in sorted(queue_dir.iterdir()):
        if f.is_file():
            shutil.move(str(f), str(target / f.name))
    return target


def pad_short_segments(directory: Path, size: int) -> int | None:
    """Zero-pad commit-log segments shorter than ``size`` (a truncated file) with one WARNING each.

    What was in the missing range is lost; what is left stays readable. Returns the lowest padded
    segment's start offset (recovery must re-scan from there), None when none was short.

    Raises:
        StoreError: a segment is larger than ``size`` (a different configuration: refuse to start).
    """
    lowest: int | None = None
    if not directory.is_dir():
        return None
    for path in sorted(directory.iterdir()):
        if not path.is_file() or path.name.endswith(".tmp") or not path.name.isdigit():
            continue
        actual = path.stat().st_size
        if actual > size:
            raise StoreError(f"{path}: size {actual} is larger than the configured segment size {size}")
        if actual < size:
            with open(path, "r+b") as f:
                f.truncate(size)
            log.warning(
                "commit-log segment %s is %d bytes short (truncated): zero-padded to %d bytes; "
                "records in the missing range are lost, the rest is recovered",
                path,
                size - actual,
                size,
            )
            offset = int(path.name)
            lowest = offset if lowest is None else min(lowest, offset)
    return lowest


# -- entry checks ---------------------------------------------------------------------------------------


def _units(cq: ConsumeQueue, first: int, count: int) -> list[tuple[int, int, int, int]]:
    """``(queue offset, commit-log offset, size, tags code)`` of up to ``count`` written units from
    queue offset ``first``, read from the files directly (also below the queue's min offset)."""
    out: list[tuple[int, int, int, int]] = []
    start, stop = first * CQ_STORE_UNIT_SIZE, (first + count) * CQ_STORE_UNIT_SIZE
    for mf in cq.queue.files:
        lo = max(start, mf.file_from_offset)
        hi = min(stop, mf.file_from_offset + mf.wrote_position)
        if lo >= hi:
            continue
        data = mf.read(lo - mf.file_from_offset, hi - lo)
        index = lo // CQ_STORE_UNIT_SIZE
        for i, u in enumerate(iter_units(data)):
            out.append((index + i, u.commit_log_offset, u.size, u.tags_code))
    return out


def _record_matches(commit_log: CommitLog, cq: ConsumeQueue, offset: int, phy: int, size: int) -> str | None:
    data = commit_log.get_message(phy, size)
    if data is None:
        return f"entry {offset}: no record at commit-log offset {phy}"
    try:
        info = read_record_info(data)
    except ProtocolError:
        return f"entry {offset}: commit-log offset {phy} holds no record"
    if (info.topic, info.queue_id, info.queue_offset, info.commit_log_offset) != (
        cq.topic,
        cq.queue_id,
        offset,
        phy,
    ):
        return f"entry {offset}: commit-log offset {phy} holds {info.topic}/{info.queue_id} offset {info.queue_offset}"
    return None


def check_consume_queue(cq: ConsumeQueue, commit_log: CommitLog, end: int, thorough: bool) -> str | None:
    """Why ``cq`` is damaged, or None. ``thorough`` checks every entry's range and order (after a
    crash); otherwise the first and last :data:`SAMPLE` entries. Sampled entries are also matched
    against their commit-log record (topic, queue id, queue offset)."""
    low = cq.queue.get_min_offset() // CQ_STORE_UNIT_SIZE  # the first entry on disk, not min offset
    high = cq.get_max_offset_in_queue()
    if high <= low:
        return None
    min_phy = commit_log.get_min_offset()
    groups: list[list[tuple[int, int, int, int]]]
    if thorough:
        groups = [_units(cq, low, high - low)]
    else:
        groups = [_units(cq, low, 1), _units(cq, max(low, high - SAMPLE), SAMPLE)]
    for group in groups:
        prev = -1
        for offset, phy, size, _tags in group:
            if size == PRE_BLANK_SIZE:
                continue
            if size <= 0 or phy < 0 or phy + size > end:
                return f"entry {offset} is garbage (commit-log offset {phy}, size {size}, log end {end})"
            if phy <= prev:
                return f"entry {offset} goes backwards (commit-log offset {phy} after {prev})"
            prev = phy
    edges = _units(cq, cq.get_min_offset_in_queue(), 1) + _units(cq, high - 1, 1)
    for offset, phy, size, _tags in edges:  # matched against the commit log
        if size > 0 and size != PRE_BLANK_SIZE and phy >= min_phy:
            problem = _record_matches(commit_log, cq, offset, phy, size)
            if problem is not None:
                return problem
    return None


def rebuild_consume_queues(
    commit_log: CommitLog,
    damaged: dict[QueueKey, str],
    reset: Callable[[QueueKey], ConsumeQueue],
    dispatch: Callable[[RecordInfo], None],
) -> dict[QueueKey, int]:
    """Empty each damaged queue (``reset``) and refill it with one commit-log scan; one WARNING per
    queue. Returns ``{key: entries after the rebuild}``."""
    queues = {key: reset(key) for key in damaged}

    def on_record(info: RecordInfo) -> None:
        if (info.topic, info.queue_id) in queues:
            dispatch(info)

    commit_log.scan_all(on_record)
    out: dict[QueueKey, int] = {}
    for key, cq in queues.items():
        out[key] = cq.get_max_offset_in_queue()
        log.warning(
            "consume queue %s/%d was %s: rebuilt from the commit log, %d entries (offsets %d..%d)",
            key[0],
            key[1],
            damaged[key],
            cq.get_max_offset_in_queue() - cq.get_min_offset_in_queue(),
            cq.get_min_offset_in_queue(),
            cq.get_max_offset_in_queue(),
        )
    return out
