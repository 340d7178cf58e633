"""The consume-queue scan with a filter on the stored record (SQL92), for :class:`MessageReader`.

Mirrors the loop of RocketMQ's ``DefaultMessageStore.getMessage`` with a ``MessageFilter`` whose
``isMatchedByCommitLog`` looks at each record: entries are taken in order, the per-pull limits
(``isTheBatchFull``) count only matched records, a record the filter rejects is skipped (status
NO_MATCHED_MESSAGE while nothing matched) and ``nextBeginOffset`` moves past everything scanned.

Records are read in windows of consecutive candidates (one read per run of records back to back
in one commit-log segment) and the filter runs on the window's buffer at each record's position,
so a rejected record costs no copy.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemq.protocol.message_codec import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from tidemq.store.consume_queue import PRE_BLANK_SIZE
from tidemq.store.results import GetMessageResult, GetMessageStatus

if TYPE_CHECKING:
    from tidemq.store.message_reader import MessageReader

RecordFilter = Callable[[bytes, int], bool]
"""``(buffer, position of a record in it) -> matched``."""

_CQ_UNIT = struct.Struct(">qiq")
_SIZE_MAGIC = struct.Struct(">ii")
_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
_FIRST_WINDOW = 32
_MAX_WINDOW = 512


def _read_window(
    reader: MessageReader, picked: list[tuple[int, int, int, int]]
) -> list[tuple[bytes | None, int]]:
    """``(buffer, position)`` of each picked ``(phy, size, queue offset, index)`` record (None:
    gone), one read per run of records back to back within one commit-log segment."""
    out: list[tuple[bytes | None, int]] = []
    seg = reader.config.mapped_file_size_commit_log
    get = reader.commit_log.get_message
    i, n = 0, len(picked)
    while i < n:
        start, size = picked[i][0], picked[i][1]
        j, end = i + 1, start + size
        while j < n and picked[j][0] == end and end // seg == start // seg:
            end += picked[j][1]
            j += 1
        data = get(start, end - start)
        pos = 0
        for k in range(i, j):
            out.append((data, pos))
            pos += picked[k][1]
        i = j
    return out


def scan_filtered(
    reader: MessageReader,
    result: GetMessageResult,
    buf: bytes,
    offset: int,
    max_msg_nums: int,
    tag_codes: set[int] | None,
    cq_name: str,
    record_filter: RecordFilter,
) -> None:
    """Fill ``result`` from the consume-queue bytes ``buf`` (entries from queue ``offset`` on),
    keeping the records ``record_filter`` accepts (and whose tag code is in ``tag_codes``)."""
    result.status = GetMessageStatus.NO_MATCHED_MESSAGE
    commit_log, cfg = reader.commit_log, reader.config
    max_offset_py, min_offset_py = commit_log.get_max_offset(), commit_log.get_min_offset()
    in_disk_below = max_offset_py - reader.memory_limit
    max_record_size = reader._max_record_size
    mem_limits = (cfg.max_transfer_bytes_on_message_in_memory, cfg.max_transfer_count_on_message_in_memory)
    disk_limits = (cfg.max_transfer_bytes_on_message_in_disk, cfg.max_transfer_count_on_message_in_disk)
    entries = list(_CQ_UNIT.iter_unpack(buf))
    total = count = 0
    max_phy_pulling = 0
    next_phy_file_start = -1
    stopped_at = -1  # the entry at which the batch was full; -1: every entry scanned
    window = _FIRST_WINDOW
    unpack_head = _SIZE_MAGIC.unpack_from
    i, n = 0, len(entries)
    while i < n and stopped_at < 0:
        picked: list[tuple[int, int, int, int]] = []  # (phy, size, queue offset, entry index)
        while i < n and len(picked) < window:
            offset_py, size_py, tags_code = entries[i]
            i += 1
            if size_py == PRE_BLANK_SIZE:
                continue
            if (
                size_py <= 0
                or offset_py < 0
                or offset_py + size_py > max_offset_py
                or size_py > max_record_size
            ):
                reader._report_damaged(cq_name, offset + i - 1, offset_py, size_py)
                continue
            if tag_codes is not None and tags_code not in tag_codes:
                continue
            picked.append((offset_py, size_py, offset + i - 1, i - 1))
        window = min(window * 2, _MAX_WINDOW)
        for (phy, size, queue_offset, index), (data, pos) in zip(
            picked, _read_window(reader, picked), strict=True
        ):
            max_phy_pulling = phy
            if next_phy_file_start >= 0 and phy < next_phy_file_start:
                continue
            if count:  # isTheBatchFull, counting matched records only
                if phy < in_disk_below:
                    limit_bytes, limit_count = disk_limits
                else:
                    limit_bytes, limit_count = mem_limits
                if count >= max_msg_nums or total + size > limit_bytes or count > limit_count - 1:
                    stopped_at = index
                    break
            if phy < min_offset_py or data is None:
                if not count:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = commit_log.roll_next_file(phy)
                continue
            if len(data) < pos + 8 or (head := unpack_head(data, pos))[0] != size or head[1] not in _MAGICS:
                reader._report_damaged(cq_name, queue_offset, phy, size)
                continue
            if not record_filter(data, pos):
                continue
            result.chunks.append(data[pos : pos + size])
            result.record_sizes.append(size)
            result.message_queue_offsets.append(queue_offset)
            total += size
            count += 1
            next_phy_file_start = -1
    result.buffer_total_size = total
    if count:
        result.status = GetMessageStatus.FOUND
    result.next_begin_offset = offset + (n if stopped_at < 0 else stopped_at)
    result.suggest_pulling_from_slave = (max_offset_py - max_phy_pulling) > reader.memory_limit
