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


def _last_pulled(buf: bytes, last: int) -> int:
    """The commit-log offset of the last real entry (not padding, not damaged) at or before entry
    ``last`` of ``buf`` (0: none): ``maxPhyOffsetPulling`` of RocketMQ's ``getMessage``."""
    for j in range(last, -1, -1):
        offset_py, size_py, _ = _CQ_UNIT.unpack_from(buf, j * CQ_STORE_UNIT_SIZE)
        if size_py > 0 and size_py != PRE_BLANK_SIZE and offset_py >= 0:
            return int(offset_py)
    return 0


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
        and max(sizes) <= reader.max_record_size  # PRE_BLANK_SIZE (padding) included
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
            or size_py > reader.max_record_size
        ):
            reader.report_damaged(cq_name, offset + first + k, offset_py, size_py)
            continue
        if tag_codes is not None and tags_code not in tag_codes:
            continue
        keep_offsets.append(offset_py)
        keep_sizes.append(size_py)
        indexes.append(first + k)
    return keep_offsets, keep_sizes, indexes


class _Batch:
    """The records a pull takes, in order, within RocketMQ's per-pull limits (``isTheBatchFull``
    counts matched records only)."""

    def __init__(
        self, reader: MessageReader, result: GetMessageResult, offset: int, max_msg_nums: int
    ) -> None:
        cfg = reader.config
        self.reader, self.result, self.offset, self.max_msg_nums = reader, result, offset, max_msg_nums
        self.min_offset_py = reader.commit_log.get_min_offset()
        self.in_disk_below = reader.commit_log.get_max_offset() - reader.memory_limit
        self.mem_limits = (
            cfg.max_transfer_bytes_on_message_in_memory,
            cfg.max_transfer_count_on_message_in_memory,
        )
        self.disk_limits = (
            cfg.max_transfer_bytes_on_message_in_disk,
            cfg.max_transfer_count_on_message_in_disk,
        )
        self.count = self.total = 0
        self.next_phy_file_start = -1

    def take(
        self,
        cq_name: str,
        window: tuple[list[int], list[int], list[int]],
        datas: list[bytes | None],
        positions: list[int],
        verdicts: list[bool | None],
    ) -> int:
        """Take the window's matched records (``verdicts``: True matched, False not, None gone);
        the entry index at which the batch is full, or -1 when the window fitted."""
        offsets, sizes, indexes = window
        result, unpack_head = self.result, _SIZE_MAGIC.unpack_from
        for k, verdict in enumerate(verdicts):
            if verdict is False:  # not matched (a damaged record does not match either)
                continue
            phy, size, index = offsets[k], sizes[k], indexes[k]
            if self.next_phy_file_start >= 0 and phy < self.next_phy_file_start:
                continue
            if self.count:
                limit_bytes, limit_count = self.disk_limits if phy < self.in_disk_below else self.mem_limits
                if (
                    self.count >= self.max_msg_nums
                    or self.total + size > limit_bytes
                    or self.count > limit_count - 1
                ):
                    return index
            data, pos = datas[k], positions[k]
            if phy < self.min_offset_py or data is None:
                if not self.count:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                self.next_phy_file_start = self.reader.commit_log.roll_next_file(phy)
                continue
            if len(data) < pos + 8 or (head := unpack_head(data, pos))[0] != size or head[1] not in _MAGICS:
                self.reader.report_damaged(cq_name, self.offset + index, phy, size)
                continue
            result.chunks.append(data[pos : pos + size])
            result.record_sizes.append(size)
            result.message_queue_offsets.append(self.offset + index)
            self.total += size
            self.count += 1
            self.next_phy_file_start = -1
        return -1


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
    max_offset_py = reader.commit_log.get_max_offset()
    batch = _Batch(reader, result, offset, max_msg_nums)
    stopped_at = -1  # the entry at which the batch was full; -1: every entry scanned
    window = min(_FIRST_WINDOW, max_msg_nums)
    examined = 0
    i, n = 0, len(buf) // CQ_STORE_UNIT_SIZE
    while i < n and stopped_at < 0:
        w = min(window, n - i)
        candidates = _window(reader, buf, i, w, offset, tag_codes, cq_name, max_offset_py)
        i += w
        offsets, sizes = candidates[0], candidates[1]
        if not offsets:
            window = min(_MAX_WINDOW, window * 2)
            continue
        datas, positions = _read_window(reader, offsets, sizes)
        # the filter over the whole window in one pass (None: the record is gone)
        verdicts = [None if d is None else record_filter(d, p) for d, p in zip(datas, positions, strict=True)]
        stopped_at = batch.take(cq_name, candidates, datas, positions, verdicts)
        # the next window: a little more than the match rate so far says the pull still needs
        examined += len(offsets)
        rate = max(batch.count / examined, 1 / 32)
        window = min(
            _MAX_WINDOW, max(_FIRST_WINDOW // 2, int(1.25 * (max_msg_nums - batch.count) / rate) + 4)
        )
    result.buffer_total_size = batch.total
    if batch.count:
        result.status = GetMessageStatus.FOUND
    result.next_begin_offset = offset + (n if stopped_at < 0 else stopped_at)
    # maxPhyOffsetPulling as the entry-by-entry scan leaves it: the entry it stopped at, else the
    # last one (windows read ahead of where a full batch stops, so their ends say less)
    max_phy_pulling = _last_pulled(buf, stopped_at if stopped_at >= 0 else n - 1)
    result.suggest_pulling_from_slave = (max_offset_py - max_phy_pulling) > reader.memory_limit
