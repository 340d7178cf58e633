"""The consume-queue scan with a filter on the stored record (SQL92), for :class:`MessageReader`.

Mirrors the loop of RocketMQ's ``DefaultMessageStore.getMessage`` with a ``MessageFilter`` whose
``isMatchedByCommitLog`` looks at each record: entries are taken in order, the per-pull limits
(``isTheBatchFull``) count only matched records, a record the filter rejects is skipped (status
NO_MATCHED_MESSAGE while nothing matched) and ``nextBeginOffset`` moves past everything scanned.

Records are read in windows of consecutive candidates (one read per run of records back to back
in one commit-log segment) and the filter runs over the whole window at each record's position in
the buffer read, so a rejected record costs no copy and no step of the scan loop. The batch limits
are checked at each matched record (a pull that is full stops at the next match, having skipped
the non-matching records before it).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from itertools import accumulate
from operator import add
from typing import TYPE_CHECKING

from tidemq.protocol.message_codec import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from tidemq.store.config import CQ_STORE_UNIT_SIZE
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


@functools.lru_cache(maxsize=64)
def _cq_offsets_sizes(entries: int) -> struct.Struct:
    """``(offset, size) * entries`` of consume-queue units, the tag codes skipped."""
    return struct.Struct(">" + "qi8x" * entries)


def _read_window(
    reader: MessageReader, offsets: list[int], sizes: list[int]
) -> tuple[list[bytes | None], list[int]]:
    """The buffer (None: gone) and position of each record, one read per run of records back to
    back within one commit-log segment."""
    datas: list[bytes | None] = []
    positions: list[int] = []
    seg = reader.config.mapped_file_size_commit_log
    get = reader.commit_log.get_message
    i, n = 0, len(offsets)
    while i < n:
        start = offsets[i]
        j, end = i + 1, start + sizes[i]
        while j < n and offsets[j] == end and end // seg == start // seg:
            end += sizes[j]
            j += 1
        data = get(start, end - start)
        datas += [data] * (j - i)
        positions += accumulate(sizes[i : j - 1], initial=0)
        i = j
    return datas, positions


def _window(
    reader: MessageReader,
    buf: bytes,
    first: int,
    count: int,
    offset: int,
    tag_codes: set[int] | None,
    cq_name: str,
    max_offset_py: int,
) -> tuple[list[int], list[int], list[int]]:
    """The candidate records among ``count`` entries from entry ``first``: ``(commit-log offsets,
    sizes, entry indexes)``. Padding, damaged entries (reported) and tags not wanted are left out;
    the usual span (none of those) is taken with one struct call."""
    flat = _cq_offsets_sizes(count).unpack_from(buf, first * CQ_STORE_UNIT_SIZE)
    offsets: list[int] = list(flat[0::2])
    sizes: list[int] = list(flat[1::2])
    if (
        tag_codes is None
        and min(sizes) > 0
        and max(sizes) <= reader._max_record_size  # PRE_BLANK_SIZE (padding) included
        and min(offsets) >= 0
        and max(map(add, offsets, sizes)) <= max_offset_py
    ):
        return offsets, sizes, list(range(first, first + count))
    keep_offsets: list[int] = []
    keep_sizes: list[int] = []
    indexes: list[int] = []
    for k, (offset_py, size_py, tags_code) in enumerate(
        _CQ_UNIT.iter_unpack(buf[first * CQ_STORE_UNIT_SIZE : (first + count) * CQ_STORE_UNIT_SIZE])
    ):
        if size_py == PRE_BLANK_SIZE:
            continue
        if (
            size_py <= 0
            or offset_py < 0
            or offset_py + size_py > max_offset_py
            or size_py > reader._max_record_size
        ):
            reader._report_damaged(cq_name, offset + first + k, offset_py, size_py)
            continue
        if tag_codes is not None and tags_code not in tag_codes:
            continue
        keep_offsets.append(offset_py)
        keep_sizes.append(size_py)
        indexes.append(first + k)
    return keep_offsets, keep_sizes, indexes


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
    mem_limits = (cfg.max_transfer_bytes_on_message_in_memory, cfg.max_transfer_count_on_message_in_memory)
    disk_limits = (cfg.max_transfer_bytes_on_message_in_disk, cfg.max_transfer_count_on_message_in_disk)
    total = count = 0
    max_phy_pulling = 0
    next_phy_file_start = -1
    stopped_at = -1  # the entry at which the batch was full; -1: every entry scanned
    window = min(_FIRST_WINDOW, max_msg_nums)
    examined = 0
    unpack_head = _SIZE_MAGIC.unpack_from
    i, n = 0, len(buf) // CQ_STORE_UNIT_SIZE
    while i < n and stopped_at < 0:
        w = min(window, n - i)
        offsets, sizes, indexes = _window(reader, buf, i, w, offset, tag_codes, cq_name, max_offset_py)
        i += w
        if not offsets:
            window = min(_MAX_WINDOW, window * 2)
            continue
        datas, positions = _read_window(reader, offsets, sizes)
        # the filter over the whole window in one pass (None: the record is gone)
        verdicts = [None if d is None else record_filter(d, p) for d, p in zip(datas, positions, strict=True)]
        max_phy_pulling = max(max_phy_pulling, offsets[-1])
        for k, verdict in enumerate(verdicts):
            if verdict is False:  # not matched (a damaged record does not match either)
                continue
            phy, size, index = offsets[k], sizes[k], indexes[k]
            if next_phy_file_start >= 0 and phy < next_phy_file_start:
                continue
            if count:  # isTheBatchFull, counting matched records only
                limit_bytes, limit_count = disk_limits if phy < in_disk_below else mem_limits
                if count >= max_msg_nums or total + size > limit_bytes or count > limit_count - 1:
                    stopped_at = index
                    break
            data, pos = datas[k], positions[k]
            if phy < min_offset_py or data is None:
                if not count:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = commit_log.roll_next_file(phy)
                continue
            if len(data) < pos + 8 or (head := unpack_head(data, pos))[0] != size or head[1] not in _MAGICS:
                reader._report_damaged(cq_name, offset + index, phy, size)
                continue
            result.chunks.append(data[pos : pos + size])
            result.record_sizes.append(size)
            result.message_queue_offsets.append(offset + index)
            total += size
            count += 1
            next_phy_file_start = -1
        # the next window: a little more than the match rate so far says the pull still needs
        examined += len(offsets)
        rate = max(count / examined, 1 / 32)
        window = min(_MAX_WINDOW, max(_FIRST_WINDOW // 2, int(1.25 * (max_msg_nums - count) / rate) + 4))
    result.buffer_total_size = total
    if count:
        result.status = GetMessageStatus.FOUND
    result.next_begin_offset = offset + (n if stopped_at < 0 else stopped_at)
    result.suggest_pulling_from_slave = (max_offset_py - max_phy_pulling) > reader.memory_limit
