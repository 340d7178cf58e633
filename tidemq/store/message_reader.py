"""The read path of the message store: consume-queue scan, tag filter, per-pull limits.

Mirrors the body of RocketMQ's ``DefaultMessageStore.getMessage`` (status table of protocol.md §3.4).
"""

from __future__ import annotations

import functools
import logging
import struct
from bisect import bisect_right
from itertools import accumulate, compress, count, repeat
from operator import add, itemgetter, ne

from tidemq.protocol.message_codec import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from tidemq.store.commit_log import CommitLog
from tidemq.store.config import CQ_STORE_UNIT_SIZE, MessageStoreConfig
from tidemq.store.consume_queue import PRE_BLANK_SIZE, ConsumeQueue
from tidemq.store.dispatcher import PutRecords, PutRun
from tidemq.store.filtered_scan import RecordFilter, scan_filtered
from tidemq.store.results import GetMessageResult, GetMessageStatus

log = logging.getLogger(__name__)

_SIZE_MAGIC = struct.Struct(">ii")
_CQ_UNIT = struct.Struct(">qiq")
_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
_MAGIC_SET = frozenset(_MAGICS)
_MAGIC_LAST_BYTES = bytes(_SIZE_MAGIC.pack(0, m)[7] for m in _MAGICS)  # the codes differ in byte 3 only
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


@functools.lru_cache(maxsize=16)
def _cq_offsets_sizes(entries: int) -> struct.Struct:
    """Unpacks ``entries`` consume-queue units at once into ``(offset, size) * entries`` (the tag
    codes skipped): one C call instead of a Python step per entry."""
    return struct.Struct(">" + "qi8x" * entries)


@functools.lru_cache(maxsize=16)
def _cq_offsets(entries: int) -> struct.Struct:
    """Unpacks the commit-log offsets of ``entries`` consume-queue units at once."""
    return struct.Struct(">" + "q12x" * entries)


class MessageReader:
    """Reads records of a consume queue from the commit log within RocketMQ's per-pull limits.

    Args:
        commit_log: where the records are.
        config: transfer limits (``max_transfer_*``).
        memory_limit: bytes behind the commit-log end beyond which data counts as "in disk".
    """

    def __init__(self, commit_log: CommitLog, config: MessageStoreConfig, memory_limit: int) -> None:
        self.commit_log = commit_log
        self.config = config
        self.memory_limit = memory_limit
        self.max_record_size = config.max_message_size + 64 * 1024  # record overhead is far below
        """Bytes: a consume-queue entry naming a larger record is damaged (it is skipped)."""
        self._damaged_seen: set[tuple[str, int]] = set()
        self.damaged_entries = 0
        """Damaged consume-queue entries met while reading (each reported once with a WARNING)."""

    def get_message(
        self,
        cq: ConsumeQueue | None,
        offset: int,
        max_msg_nums: int,
        tag_codes: set[int] | None,
        record_filter: RecordFilter | None = None,
    ) -> GetMessageResult:
        """``DefaultMessageStore.getMessage`` for consume queue ``cq`` (None: the queue does not exist);
        ``record_filter``: a filter on each stored record (SQL92), see :mod:`tidemq.store.filtered_scan`."""
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, next_begin_offset=0)
        min_offset = cq.get_min_offset_in_queue()
        max_offset = cq.get_max_offset_in_queue()
        result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, offset, min_offset, max_offset)
        if max_offset == 0:
            result.next_begin_offset = 0
        elif offset < min_offset:
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, min_offset
        elif offset == max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
        elif offset > max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
            result.next_begin_offset = min_offset if min_offset == 0 else max_offset
        else:
            max_filter_bytes = max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE)
            buf = cq.get_index_buffer(offset, max_filter_bytes)
            if buf is None:
                result.status = GetMessageStatus.OFFSET_FOUND_NULL
                result.next_begin_offset = cq.roll_next_file(offset)
            else:
                name = f"{cq.topic}/{cq.queue_id}"
                if record_filter is None:
                    self._scan_consume_queue(result, buf, offset, max_msg_nums, tag_codes, name)
                else:
                    scan_filtered(self, result, buf, offset, max_msg_nums, tag_codes, name, record_filter)
        return result

    def get_message_from_put(
        self,
        put: PutRecords,
        run: PutRun,
        min_offset: int,
        max_msg_nums: int,
    ) -> GetMessageResult:
        """What :meth:`get_message` without a tag filter gives at the first queue offset of ``run``
        (a queue's records of ``put``, the newest of that queue), taken from the put's own bytes: no
        consume-queue or commit-log read. ``min_offset``: the queue's.

        The same per-pull limits apply (count, then bytes; the records are in memory).
        """
        _topic, _queue_id, first, starts, sizes, _props = run
        cfg = self.config
        limit = min(len(sizes), max_msg_nums, cfg.max_transfer_count_on_message_in_memory)
        running = list(accumulate(sizes[:limit]))
        n = max(1, bisect_right(running, cfg.max_transfer_bytes_on_message_in_memory))
        taken = list(sizes[:n])
        return GetMessageResult(
            GetMessageStatus.FOUND,
            next_begin_offset=first + n,
            min_offset=min_offset,
            max_offset=put.max_offsets[(run[0], run[1])],
            chunks=[put.records(starts[0], starts[n - 1] + taken[-1])],
            record_sizes=taken,
            message_queue_offsets=list(range(first, first + n)),
            buffer_total_size=running[n - 1],
        )

    def is_in_disk(self, offset_py: int, max_offset_py: int) -> bool:
        return (max_offset_py - offset_py) > self.memory_limit

    def _scan_consume_queue(
        self,
        result: GetMessageResult,
        buf: bytes,
        offset: int,
        max_msg_nums: int,
        tag_codes: set[int] | None,
        cq_name: str,
    ) -> None:
        if tag_codes is None and self._scan_unfiltered(result, buf, offset, max_msg_nums):
            return
        result.status = GetMessageStatus.NO_MATCHED_MESSAGE
        commit_log = self.commit_log
        max_offset_py = commit_log.get_max_offset()
        min_offset_py = commit_log.get_min_offset()
        max_record_size = self.max_record_size
        # _is_the_batch_full's limits, resolved once: an entry below in_disk_below is "in disk".
        cfg = self.config
        in_disk_below = max_offset_py - self.memory_limit
        mem_bytes, mem_count = (
            cfg.max_transfer_bytes_on_message_in_memory,
            cfg.max_transfer_count_on_message_in_memory,
        )
        disk_bytes, disk_count = (
            cfg.max_transfer_bytes_on_message_in_disk,
            cfg.max_transfer_count_on_message_in_disk,
        )
        next_phy_file_start = -1
        max_phy_pulling = 0
        scanned = 0
        total = 0
        count = 0
        picked: list[tuple[int, int, int]] = []  # (phy, size, queue offset)
        for i, (offset_py, size_py, tags_code) in enumerate(_CQ_UNIT.iter_unpack(buf)):
            scanned = i + 1
            if size_py == PRE_BLANK_SIZE:  # padding, nothing stored there
                continue
            if size_py <= 0 or offset_py < 0:  # inside the written entries: damage, not padding
                self.report_damaged(cq_name, offset + i, offset_py, size_py)
                continue
            max_phy_pulling = offset_py
            if next_phy_file_start >= 0 and offset_py < next_phy_file_start:
                continue
            if count:  # _is_the_batch_full
                if count >= max_msg_nums:
                    scanned = i
                    break
                if offset_py < in_disk_below:
                    full = total + size_py > disk_bytes or count > disk_count - 1
                else:
                    full = total + size_py > mem_bytes or count > mem_count - 1
                if full:
                    scanned = i
                    break
            if tag_codes is not None and tags_code not in tag_codes:
                continue
            if offset_py + size_py > max_offset_py or size_py > max_record_size:
                # Beyond the commit log's end: no intact entry looks like this (entries are written
                # after their record). A damaged entry hides one message, never the ones after it.
                self.report_damaged(cq_name, offset + i, offset_py, size_py)
                continue
            if offset_py < min_offset_py:
                if not picked:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = commit_log.roll_next_file(offset_py)
                continue
            picked.append((offset_py, size_py, offset + i))
            total += size_py
            count += 1
            next_phy_file_start = -1
        buffers = result.chunks
        sizes = result.record_sizes
        queue_offsets = result.message_queue_offsets
        unpack_head = _SIZE_MAGIC.unpack_from
        for (phy, size, queue_offset), data in zip(picked, self._read_records(picked), strict=True):
            if data is None:
                if not buffers:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                continue
            # the entry must point at a record of its size (not into the middle of something else)
            if len(data) < 8 or (head := unpack_head(data))[0] != size or head[1] not in _MAGICS:
                self.report_damaged(cq_name, queue_offset, phy, size)
                continue
            buffers.append(data)
            sizes.append(size)
            queue_offsets.append(queue_offset)
            result.buffer_total_size += size
        if buffers:
            result.status = GetMessageStatus.FOUND
        result.next_begin_offset = offset + scanned
        result.suggest_pulling_from_slave = (max_offset_py - max_phy_pulling) > self.memory_limit

    def _scan_unfiltered(self, result: GetMessageResult, buf: bytes, offset: int, max_msg_nums: int) -> bool:
        """The scan without a tag filter for the usual case, with no Python step per message: the
        entries are unpacked by one struct call, the per-pull limits found by a bisection of their
        running byte total, each run of records contiguous in one commit-log segment read (and kept)
        as one chunk, and every record's TOTALSIZE and MAGICCODE checked against its entry.

        Gives exactly what the entry-by-entry scan gives. Returns False, with ``result`` untouched,
        when the span is not the usual case (padding or damaged entries, deleted data, entries on
        both sides of the in-memory boundary, a record that does not match its entry): the
        entry-by-entry scan then handles it.
        """
        cfg = self.config
        commit_log = self.commit_log
        max_offset_py = commit_log.get_max_offset()
        in_disk_below = max_offset_py - self.memory_limit
        cap = max(
            1,
            min(
                max_msg_nums,
                max(cfg.max_transfer_count_on_message_in_memory, cfg.max_transfer_count_on_message_in_disk),
            ),
        )
        # one entry past the cap: the entry-by-entry scan looks at it before it stops
        k = min(len(buf) // CQ_STORE_UNIT_SIZE, cap + 1)
        if k == 0:
            return False
        size_field = buf[8:12]  # the first entry's size; the same in every entry is the usual case
        span = k * CQ_STORE_UNIT_SIZE
        if all(buf[8 + j : span : CQ_STORE_UNIT_SIZE] == size_field[j : j + 1] * k for j in range(4)):
            return self._scan_one_size(
                result, buf, offset, max_msg_nums, k, int.from_bytes(size_field, "big", signed=True)
            )
        flat = _cq_offsets_sizes(k).unpack_from(buf)
        offsets: list[int] = list(flat[0::2])
        sizes: list[int] = list(flat[1::2])
        low, high = min(offsets), max(offsets)
        ends = list(map(add, offsets, sizes))
        if (
            min(sizes) <= 0
            or max(sizes) > self.max_record_size  # PRE_BLANK_SIZE (padding) included
            or low < commit_log.get_min_offset()
            or max(ends) > max_offset_py
        ):
            return False
        limits = self._span_limits(low, high, in_disk_below)
        if limits is None:
            return False
        limit_bytes, limit_count = limits
        running = list(accumulate(sizes))
        # the first record is always taken; then stop at the count or before the byte limit
        n = max(1, min(max_msg_nums, limit_count, k, bisect_right(running, limit_bytes)))
        max_phy_pulling = offsets[n] if n < k else offsets[-1]  # the entry the scan stopped at
        offsets, sizes, ends = offsets[:n], sizes[:n], ends[:n]
        seg = self.config.mapped_file_size_commit_log
        # runs of records back to back in the commit log: a new run where one does not start at the
        # end of the previous one, or starts a new segment
        breaks = list(compress(range(1, n), map(ne, ends, offsets[1:])))
        chunks: list[bytes] = []
        start = 0
        for stop in [*breaks, n]:
            while start < stop:
                phy = offsets[start]
                cut = stop
                last_in_segment = (phy // seg + 1) * seg
                if ends[stop - 1] > last_in_segment:
                    cut = bisect_right(ends, last_in_segment, start, stop)
                    if cut == start:
                        return False
                data = commit_log.get_message(phy, ends[cut - 1] - phy)
                if data is None or not _records_match(data, sizes[start:cut]):
                    return False
                chunks.append(data)
                start = cut
        result.status = GetMessageStatus.FOUND
        result.chunks = chunks
        result.record_sizes = sizes
        result.message_queue_offsets = list(range(offset, offset + n))
        result.buffer_total_size = running[n - 1]
        result.next_begin_offset = offset + n
        result.suggest_pulling_from_slave = (max_offset_py - max_phy_pulling) > self.memory_limit
        return True

    def _scan_one_size(
        self, result: GetMessageResult, buf: bytes, offset: int, max_msg_nums: int, k: int, size: int
    ) -> bool:
        """:meth:`_scan_unfiltered` when the ``k`` entries scanned all have one record ``size``: the
        running byte total, the per-pull limits and the runs of records back to back follow from the
        offsets alone (one C pass finds where each run ends), with no list per entry."""
        cfg = self.config
        commit_log = self.commit_log
        max_offset_py = commit_log.get_max_offset()
        in_disk_below = max_offset_py - self.memory_limit
        offsets: tuple[int, ...] = _cq_offsets(k).unpack_from(buf)
        low, high = min(offsets), max(offsets)
        if (
            size <= 0
            or size > self.max_record_size  # PRE_BLANK_SIZE (padding) included
            or low < commit_log.get_min_offset()
            or high + size > max_offset_py
        ):
            return False
        limits = self._span_limits(low, high, in_disk_below)
        if limits is None:
            return False
        limit_bytes, limit_count = limits
        # the first record is always taken; then stop at the count or before the byte limit
        n = max(1, min(max_msg_nums, limit_count, k, limit_bytes // size))
        max_phy_pulling = offsets[n] if n < k else offsets[-1]  # the entry the scan stopped at
        seg = cfg.mapped_file_size_commit_log
        chunks: list[bytes] = []
        start = 0
        while start < n:
            phy = offsets[start]
            stop = _run_end(offsets, start, n, size)
            last_in_segment = (phy // seg + 1) * seg
            if phy + size * (stop - start) > last_in_segment:  # a run does not cross segments
                stop = start + (last_in_segment - phy) // size
                if stop == start:
                    return False
            data = commit_log.get_message(phy, size * (stop - start))
            if data is None or not _records_of_one_size(data, size, stop - start):
                return False
            chunks.append(data)
            start = stop
        result.status = GetMessageStatus.FOUND
        result.chunks = chunks
        result.record_sizes = [size] * n
        result.message_queue_offsets = list(range(offset, offset + n))
        result.buffer_total_size = size * n
        result.next_begin_offset = offset + n
        result.suggest_pulling_from_slave = (max_offset_py - max_phy_pulling) > self.memory_limit
        return True

    def _span_limits(self, low: int, high: int, in_disk_below: int) -> tuple[int, int] | None:
        """``(max bytes, max messages)`` for one pull of records from commit-log offset ``low`` to
        ``high``: the in-memory limits when all are at or above ``in_disk_below``, the in-disk ones when
        all are below it (``isTheBatchFull``'s two cases); None when the span straddles it (the
        entry-by-entry scan then applies each entry's own)."""
        cfg = self.config
        if low >= in_disk_below:
            return cfg.max_transfer_bytes_on_message_in_memory, cfg.max_transfer_count_on_message_in_memory
        if high < in_disk_below:
            return cfg.max_transfer_bytes_on_message_in_disk, cfg.max_transfer_count_on_message_in_disk
        return None

    def report_damaged(self, cq_name: str, queue_offset: int, phy: int, size: int) -> None:
        """Count the damaged entry at ``queue_offset`` of ``cq_name`` (``topic/queue_id``) that names
        ``size`` bytes at commit-log offset ``phy``, with one WARNING per entry (first sighting only;
        a consumer re-pulls the same range)."""
        key = (cq_name, queue_offset)
        if key in self._damaged_seen:
            return
        if len(self._damaged_seen) > 100_000:
            self._damaged_seen.clear()
        self._damaged_seen.add(key)
        self.damaged_entries += 1
        log.warning(
            "consume queue %s: entry at queue offset %d is damaged (commit-log offset %d, size %d, "
            "commit log ends at %d); that message is skipped, the rest of the queue is served "
            "(the queue is rebuilt from the commit log at the next start)",
            cq_name,
            queue_offset,
            phy,
            size,
            self.commit_log.get_max_offset(),
        )

    def _read_records(self, picked: list[tuple[int, int, int]]) -> list[bytes | None]:
        """Read picked ``(phy, size, queue offset)`` records -> record bytes or None per entry,
        coalescing contiguous records of one segment into one pread."""
        out: list[bytes | None] = []
        seg = self.config.mapped_file_size_commit_log
        i = 0
        while i < len(picked):
            start, size, _ = picked[i]
            j = i + 1
            end = start + size
            while j < len(picked) and picked[j][0] == end and picked[j][0] // seg == start // seg:
                end += picked[j][1]
                j += 1
            data = self.commit_log.get_message(start, end - start)
            pos = 0
            for _phy, sz, _q in picked[i:j]:
                out.append(data[pos : pos + sz] if data is not None else None)
                pos += sz
            i = j
        return out


def _run_end(offsets: tuple[int, ...], start: int, n: int, size: int) -> int:
    """The end of the run of records of ``size`` bytes back to back from ``offsets[start]``: the
    first ``i`` in ``(start, n]`` whose record does not start where the one before it ended.

    Intact entries point at records in increasing commit-log order, so a record is in the run exactly
    when it is where the run's arithmetic puts it: a galloping search finds the end in a few probes,
    and one comparison of the run with that arithmetic confirms it (damaged entries that break the
    order fail it and are walked one by one instead).
    """
    phy = offsets[start]
    lo, step = start, 1  # offsets[lo] is in the run
    hi = n
    while lo + step < n:
        if offsets[lo + step] != phy + size * (lo + step - start):
            hi = lo + step
            break
        lo += step
        step *= 2
    while hi - lo > 1:  # offsets[lo] is in the run, offsets[hi] is not (or hi == n)
        mid = (lo + hi) // 2
        if offsets[mid] == phy + size * (mid - start):
            lo = mid
        else:
            hi = mid
    if offsets[start:hi] == tuple(range(phy, phy + size * (hi - start), size)):
        return hi
    return next(compress(count(start + 1), map(ne, offsets[start + 1 : n], count(phy + size, size))), n)


def _records_match(data: bytes, sizes: list[int]) -> bool:
    """Whether ``data`` holds records of exactly ``sizes`` back to back: every TOTALSIZE equals its
    entry's size and every MAGICCODE is a message's (not the middle of something else)."""
    size = sizes[0]
    if len(data) != size * len(sizes) or sizes.count(size) != len(sizes):
        starts = list(accumulate(sizes[:-1], initial=0))
        heads = list(map(_SIZE_MAGIC.unpack_from, repeat(data), starts))
        return list(map(_FIRST, heads)) == sizes and _MAGIC_SET.issuperset(map(_SECOND, heads))
    return _records_of_one_size(data, size, len(sizes))


def _records_of_one_size(data: bytes, size: int, n: int) -> bool:
    """Whether ``data`` holds ``n`` records of ``size`` bytes back to back: the first 8 bytes of every
    record (TOTALSIZE and MAGICCODE) checked as 8 strided byte columns."""
    if len(data) != size * n:
        return False
    head = _SIZE_MAGIC.pack(size, MESSAGE_MAGIC_CODE)
    return all(data[j::size] == head[j : j + 1] * n for j in range(7)) and not data[7::size].translate(
        None, _MAGIC_LAST_BYTES
    )
