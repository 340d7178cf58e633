"""The message key index: ``topic#key`` -> commit-log offsets. Mirrors RocketMQ's ``IndexService``.

Every stored record is indexed under ``topic#UNIQ_KEY`` and ``topic#<token>`` for each
space-separated token of its ``KEYS`` property (rolled-back transactional records are skipped, as
in RocketMQ; so are the transaction service's own records on ``RMQ_SYS_TRANS_HALF_TOPIC`` and
``RMQ_SYS_TRANS_OP_HALF_TOPIC``, which it finds by offset: one index entry per transaction, not
one per half and check copy besides the committed message's). QUERY_MESSAGE (12) reads it
through :meth:`IndexService.query_offset`.

Layout (RocketMQ's hash-slot scheme, protocol.md §6, with two tidemq changes): files
``<store>/index/<yyyyMMddHHmmssSSS>``, each memory-mapped and sparse on disk::

    header (48 bytes): magic "TMQI" | version u32 | beginTimestamp i64 | endTimestamp i64
                       | beginPhyOffset i64 | endPhyOffset i64 | hashSlotNum u32 | indexCount u32
    hashSlotNum slots x 4 bytes: newest entry number of the slot (0 = empty)
    maxIndexNum entries x 24 bytes: keyHash u32 | phyOffset i64 | storeTimestamp i64 | prevIndex u32

Differences from RocketMQ's ``IndexFile``: the key hash is ``zlib.crc32`` of the UTF-8 key (Java's
``String.hashCode`` is slow in Python), and entries keep the full store timestamp (ms) instead of a
4-byte seconds delta. ``endPhyOffset`` is *exclusive*: every record below it has been indexed
(records without keys advance it too), so recovery re-indexes from there. Hash collisions are
harmless: the store checks each hit's topic and keys before answering (:func:`record_has_key`).

Durability (as RocketMQ): headers are written and files ``msync``-ed by :meth:`IndexService.flush`,
which the store calls with its consume-queue flush and which returns the timestamp stored in the
checkpoint's ``indexMsgTimestamp``. After a crash, files touched after that timestamp are deleted
and re-built from the commit log (:meth:`IndexService.load`). Memory use is bounded by the mapped
files (page cache), not by the number of keys. Retention drops files wholly below the commit
log's min offset (:meth:`IndexService.delete_expired_file`).
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tidemq.errors import ProtocolError, StoreError
from tidemq.protocol.message import MessageConst, properties_to_string, property_value, string_to_properties
from tidemq.protocol.message_codec import MessageSysFlag, RecordInfo, read_record_info
from tidemq.protocol.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

log = logging.getLogger(__name__)

MAGIC = b"TMQI"
VERSION = 1
HEADER = struct.Struct("<4sIqqqqII")
SLOT = struct.Struct("<I")
ENTRY = struct.Struct("<Iqqi")
_pack_entry = ENTRY.pack_into
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_KEYS = MessageConst.PROPERTY_KEYS
_UNIQ_PAIR = f"{_UNIQ_KEY}\x01"
_KEYS_PAIR = f"{_KEYS}\x01"
_UNIQ_NEXT_PAIR = f"\x02{_UNIQ_PAIR}"
_UNIQ_LEN, _UNIQ_NEXT_LEN = len(_UNIQ_PAIR), len(_UNIQ_NEXT_PAIR)
_TRANSACTION_MASK = 0x0C  # MessageSysFlag.TRANSACTION_ROLLBACK_TYPE | TRANSACTION_COMMIT_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_UNINDEXED_TOPICS = frozenset({TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC})
KEY_SEPARATOR = " "
DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000
DEFAULT_MAX_INDEX_NUM = 20_000_000
DEFAULT_MAX_MSGS_NUM_BATCH = 64


def build_key(topic: str, key: str) -> str:
    """The index key ``topic#key`` (``IndexService.buildKey``)."""
    return f"{topic}#{key}"


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate from a JSON header
        return text.encode("utf-8", "surrogatepass")


def key_hash(key: str) -> int:
    """Hash of an index key: CRC32 of its UTF-8 bytes (unsigned 32 bit)."""
    return zlib.crc32(_utf8(key))


def index_keys(properties: Mapping[str, str]) -> list[str]:
    """The keys a message is indexed under (without the topic): UNIQ_KEY, then each KEYS token."""
    out: list[str] = []
    uniq = properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq:
        out.append(uniq)
    keys = properties.get(MessageConst.PROPERTY_KEYS)
    if keys:
        out.extend(k for k in keys.split(KEY_SEPARATOR) if k)
    return out


def record_has_key(record: bytes | bytearray | memoryview, topic: str, key: str) -> bool:
    """Whether a stored record belongs to ``topic`` and carries ``key`` (as UNIQ_KEY or in KEYS)."""
    try:
        info = read_record_info(record)
    except ProtocolError:
        return False
    return info.topic == topic and key in index_keys(string_to_properties(info.properties))


@dataclass(slots=True)
class QueryOffsetResult:
    """Index hits (``QueryOffsetResult``): commit-log offsets, newest first, plus the index's state.

    ``index_last_update_timestamp`` is the store time (ms) of the last record indexed and
    ``index_last_update_phyoffset`` the commit-log offset the index covers up to (exclusive).
    """

    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


class IndexFile:
    """One hash-slot index file. Mirrors RocketMQ's ``IndexFile`` (layout in the module docstring).

    Not thread-safe on its own: :class:`IndexService` serialises access.

    Raises:
        StoreError: an existing file is not a tidemq index file or has another geometry.
    """

    def __init__(self, path: Path, hash_slot_num: int, max_index_num: int) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.max_index_num = max_index_num
        self._entries_pos = HEADER.size + hash_slot_num * SLOT.size
        size = self._entries_pos + max_index_num * ENTRY.size
        exists = path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not exists or os.fstat(fd).st_size == 0:
                os.ftruncate(fd, size)
            elif os.fstat(fd).st_size < HEADER.size:
                raise StoreError(f"index file {path} is truncated")
            self._mm = mmap.mmap(fd, 0)
        finally:
            os.close(fd)
        self._slots: memoryview | None = None
        self.begin_timestamp = self.end_timestamp = 0
        self.begin_phy_offset = self.end_phy_offset = 0
        self.index_count = 0
        self.dirty = False
        if exists:
            magic, version, bt, et, bp, ep, slots, count = HEADER.unpack_from(self._mm, 0)
            if magic != MAGIC or version != VERSION:
                self._mm.close()
                raise StoreError(f"{path} is not a tidemq index file (magic {magic!r}, version {version})")
            if slots != hash_slot_num or len(self._mm) != size or count > max_index_num:
                # another geometry: use the file's own (read only; it is never the one written).
                self.hash_slot_num, self.max_index_num = slots, count
                self._entries_pos = HEADER.size + slots * SLOT.size
                if len(self._mm) < self._entries_pos + count * ENTRY.size:
                    self._mm.close()
                    raise StoreError(f"index file {path} is shorter than its header says")
            self.begin_timestamp, self.end_timestamp = bt, et
            self.begin_phy_offset, self.end_phy_offset, self.index_count = bp, ep, count
        else:
            self.write_header()
        # the slot table as native unsigned ints: the hot path reads/writes slots without struct
        # (index files are little-endian, which the IndexService checks the host is).
        self._slots = memoryview(self._mm)[HEADER.size : self._entries_pos].cast("I")

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.max_index_num

    def put_keys(self, hashes: list[int], commit_log_offset: int, store_timestamp: int) -> bool:
        """Add one entry per hash for one record (all or none); False when they do not fit."""
        count = self.index_count
        if count + len(hashes) > self.max_index_num:
            return False
        slots = self._slots
        assert slots is not None
        mm, pos, nslots = self._mm, self._entries_pos + count * 24, self.hash_slot_num
        for h in hashes:
            slot = h % nslots
            prev = slots[slot]
            if prev > count:
                prev = self._valid(prev)
            count += 1
            _pack_entry(mm, pos, h, commit_log_offset, store_timestamp, prev)
            pos += 24
            slots[slot] = count
        self.index_count = count
        self.dirty = True
        return True

    def put_key(self, key_hash: int, commit_log_offset: int, store_timestamp: int) -> bool:
        """:meth:`put_keys` of one hash (a record with a UNIQ_KEY and no KEYS: nearly every one)."""
        count = self.index_count
        if count >= self.max_index_num:
            return False
        slots = self._slots
        assert slots is not None
        slot = key_hash % self.hash_slot_num
        prev = slots[slot]
        if prev > count:
            prev = self._valid(prev)
        _pack_entry(
            self._mm, self._entries_pos + count * 24, key_hash, commit_log_offset, store_timestamp, prev
        )
        self.index_count = count = count + 1
        slots[slot] = count
        self.dirty = True
        return True

    def _valid(self, n: int) -> int:
        """Follow a chain from entry ``n`` back to the newest entry counted in the header.

        After a crash the slots may name entries written after the last header flush; their
        ``prevIndex`` still leads back to counted ones (each link must point backwards)."""
        while n > self.index_count:
            prev = ENTRY.unpack_from(self._mm, self._entries_pos + (n - 1) * ENTRY.size)[3]
            if not 0 <= prev < n or n > self.max_index_num:
                return 0
            n = prev
        return n

    def select_phy_offsets(self, out: list[int], h: int, max_num: int, begin: int, end: int) -> None:
        """Append to ``out`` the offsets of entries with hash ``h`` stored within ``[begin, end]`` ms,
        newest first, until ``out`` holds ``max_num``. Mirrors ``IndexFile.selectPhyOffset``."""
        mm = self._mm
        assert self._slots is not None
        n = self._valid(self._slots[h % self.hash_slot_num])
        count = self.index_count
        while 0 < n <= count and len(out) < max_num:
            eh, phy, ts, prev = ENTRY.unpack_from(mm, self._entries_pos + (n - 1) * ENTRY.size)
            if ts < begin:
                break
            if eh == h and ts <= end:
                out.append(phy)
            if prev >= n:  # chains only point backwards; anything else is damage
                break
            n = prev

    def write_header(self) -> None:
        HEADER.pack_into(
            self._mm,
            0,
            MAGIC,
            VERSION,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_num,
            self.index_count,
        )

    def msync(self) -> None:
        """Write the mapped pages back (``fsync`` of the file, which releases the GIL unlike
        ``mmap.flush``); a file deleted meanwhile is ignored."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.release_written_entries()

    def release_written_entries(self) -> None:
        """Drop the written pages (hash slots and entries) from this process's resident set
        (``MADV_DONTNEED``; the mapping is shared, so the data stays in the page cache and the file,
        and the next put or query faults a page back in). Keeps broker RSS flat as entries pile up
        (issue #9: 10 M messages) and lets it return to its baseline when traffic stops: random keys
        touch every page of the 20 MB slot table (issue #10: +18.6 MB RSS after a fuzz run). Under
        load the slot pages fault back in once per write-back interval (~5,000 minor faults / 10 s)."""
        if self._mm.closed or not hasattr(mmap, "MADV_DONTNEED"):
            return
        page = mmap.PAGESIZE
        slots_start = -(-HEADER.size // page) * page  # the header's page stays
        start = -(-self._entries_pos // page) * page
        end = (self._entries_pos + self.index_count * ENTRY.size) // page * page
        ranges = [(slots_start, self._entries_pos // page * page), (start, end)]
        for lo, hi in ranges:
            if hi > lo:
                try:
                    self._mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
                except (OSError, ValueError):
                    pass  # advisory only

    def _unmap(self) -> None:
        if self._slots is not None:
            self._slots.release()
            self._slots = None
        self._mm.close()

    def close(self) -> None:
        """Write the header, flush and unmap."""
        if not self._mm.closed:
            self.write_header()
            self._mm.flush()
            self._unmap()

    def destroy(self) -> None:
        """Unmap and delete the file."""
        if not self._mm.closed:
            self._unmap()
        self.path.unlink(missing_ok=True)


class IndexService:
    """Builds and reads the key index. Mirrors RocketMQ's ``IndexService``. Thread-safe.

    Args:
        index_dir: directory of the index files (``<store>/index``).
        max_hash_slot_num: hash slots per file (RocketMQ ``maxHashSlotNum``, 5 000 000).
        max_index_num: entries per file before rolling to a new one (``maxIndexNum``, 20 000 000).
        max_msgs_num_batch: cap on offsets returned by one query (``maxMsgsNumBatch``, 64).
        msync_interval: seconds between write-backs of the index by :meth:`flush` (10). The index
            is rebuilt from the commit log after a crash past its last write-back, so it need not
            be written back as often as the queues; each write-back stalls puts that touch pages
            under writeback (stable pages), measured at several ms on this machine's disk.
    """

    def __init__(
        self,
        index_dir: str | Path,
        *,
        max_hash_slot_num: int = DEFAULT_MAX_HASH_SLOT_NUM,
        max_index_num: int = DEFAULT_MAX_INDEX_NUM,
        max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH,
        msync_interval: float = 10.0,
    ) -> None:
        if max_hash_slot_num <= 0 or max_index_num <= 0:
            raise ValueError("max_hash_slot_num and max_index_num must be positive")
        self.index_dir = Path(index_dir)
        self.max_hash_slot_num = max_hash_slot_num
        self.max_index_num = max_index_num
        self.max_msgs_num_batch = max_msgs_num_batch
        if sys.byteorder != "little":
            raise StoreError("the message index needs a little-endian host; set message_index_enable=False")
        self.files: list[IndexFile] = []
        self._topic_crc: dict[str, int] = {}
        self._lock = threading.Lock()
        self._failed = False
        self.msync_interval = msync_interval
        self._last_msync = time.monotonic()
        self._durable_timestamp = 0

    # ------------------------------------------------------------------------------- lifecycle
    def load(self, last_exit_ok: bool, checkpoint_timestamp: int) -> None:
        """Open the index files. After a crash (``last_exit_ok`` False), delete the first file touched
        after ``checkpoint_timestamp`` (the checkpoint's ``indexMsgTimestamp``, ms) or never flushed,
        and every later one: the store then re-indexes the commit log from :attr:`end_phy_offset`.
        An unreadable file is handled the same way. Mirrors ``IndexService.load``."""
        try:
            self.index_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create index directory {self.index_dir}: {exc}") from exc
        with self._lock:
            rebuild_from: str | None = None
            for path in sorted(p for p in self.index_dir.iterdir() if p.is_file() and p.name.isdigit()):
                if rebuild_from is not None:
                    path.unlink(missing_ok=True)
                    continue
                try:
                    f = IndexFile(path, self.max_hash_slot_num, self.max_index_num)
                except (StoreError, OSError, ValueError) as exc:
                    log.warning("index file %s unusable (%s); rebuilding the index from it", path, exc)
                    path.unlink(missing_ok=True)
                    rebuild_from = path.name
                    continue
                if not last_exit_ok and (f.end_timestamp > checkpoint_timestamp or f.end_timestamp == 0):
                    f.destroy()
                    rebuild_from = path.name
                    continue
                self.files.append(f)
            if rebuild_from is not None:
                log.warning("index files from %s on are rebuilt from the commit log", rebuild_from)

    @property
    def end_phy_offset(self) -> int:
        """Commit-log offset the index covers (exclusive); 0 when there is no index file."""
        with self._lock:
            return self.files[-1].end_phy_offset if self.files else 0

    def truncate(self, commit_log_end: int) -> None:
        """After recovery cut the commit log to ``commit_log_end``: drop index files that start at or
        beyond it and pull the last file's covered end back (stale entries are filtered at query time)."""
        with self._lock:
            while self.files and self.files[-1].begin_phy_offset >= commit_log_end:
                self.files.pop().destroy()
            if self.files and self.files[-1].end_phy_offset > commit_log_end:
                self.files[-1].end_phy_offset = commit_log_end
                self.files[-1].dirty = True

    def flush(self, force: bool = True) -> int:
        """Write headers and ``msync`` changed files; returns the store time (ms) the index is durable
        up to (for the checkpoint's ``indexMsgTimestamp``). ``force=False`` (the periodic flush) does
        nothing and returns the last durable time until ``msync_interval`` s have passed since the
        last write-back, unless a file that is no longer written to (full) is still dirty."""
        if not force and time.monotonic() - self._last_msync < self.msync_interval:
            with self._lock:
                if not any(f.dirty for f in self.files[:-1]):
                    return self._durable_timestamp
        self._last_msync = time.monotonic()
        with self._lock:
            todo = [f for f in self.files if f.dirty]
            for f in todo:
                f.dirty = False
                f.write_header()
            timestamp = self.files[-1].end_timestamp if self.files else 0
        for f in todo:  # outside the lock: puts go on while the kernel writes pages back
            f.msync()
        self._durable_timestamp = timestamp
        return timestamp

    def shutdown(self) -> None:
        """Flush and unmap every file."""
        with self._lock:
            for f in self.files:
                f.close()
            self.files.clear()

    # ------------------------------------------------------------------------------------ build
    def _writable_file(self, commit_log_offset: int, *, force: bool = False) -> IndexFile:
        if self.files and not self.files[-1].is_full and not force:
            return self.files[-1]
        if self.files:
            self.files[-1].write_header()
        name = time.strftime("%Y%m%d%H%M%S") + f"{int(time.time() * 1000) % 1000:03d}"
        path = self.index_dir / name
        while path.exists() or (self.files and path.name <= self.files[-1].path.name):
            name = str(int(name) + 1).zfill(17)
            path = self.index_dir / name
        f = IndexFile(path, self.max_hash_slot_num, self.max_index_num)
        f.begin_phy_offset = f.end_phy_offset = commit_log_offset
        f.write_header()
        self.files.append(f)
        return f

    def build_index(
        self,
        commit_log_offset: int,
        size: int,
        topic: str,
        properties: Mapping[str, str] | str,
        sys_flag: int,
        store_timestamp: int,
    ) -> None:
        """Index one stored record (``IndexService.buildIndex``); records below :attr:`end_phy_offset`
        are skipped, so re-dispatching after a restart is idempotent. ``properties`` as a dict or as
        the stored text. Never raises: an I/O error is logged and the record stays unindexed."""
        text = properties if isinstance(properties, str) else properties_to_string(dict(properties))
        self.build_index_batch(commit_log_offset, [(topic, sys_flag, [size], [text])], store_timestamp)

    def build_index_one(
        self, commit_log_offset: int, size: int, topic: str, sys_flag: int, text: str, store_timestamp: int
    ) -> None:
        """:meth:`build_index_batch` of one record (every single send): a record with no KEYS, past
        the indexed end of a file with room, of a topic indexed before, indexed here without the
        batch's loops; any other by :meth:`build_index_batch`. Same entries, same file fields."""
        with self._lock:
            files = self.files
            f = files[-1] if files else None
            prefix = self._topic_crc.get(topic)
            if (
                f is not None
                and prefix is not None
                and f.begin_timestamp
                and commit_log_offset >= f.end_phy_offset
                and f.index_count < f.max_index_num
                and sys_flag & _TRANSACTION_MASK != _ROLLBACK
                and _KEYS_PAIR not in text
            ):
                try:
                    # property_value(text, UNIQ_KEY) for this one key: the last pair wins
                    at = text.rfind(_UNIQ_NEXT_PAIR)
                    start = (
                        at + _UNIQ_NEXT_LEN if at >= 0 else _UNIQ_LEN if text.startswith(_UNIQ_PAIR) else -1
                    )
                    if start >= 0:
                        end = text.find("\x02", start)
                        uniq = text[start:] if end < 0 else text[start:end]
                        if uniq:
                            try:  # _utf8, inline
                                raw = uniq.encode()
                            except UnicodeEncodeError:
                                raw = uniq.encode("utf-8", "surrogatepass")
                            f.put_key(zlib.crc32(raw, prefix), commit_log_offset, store_timestamp)
                    f.end_timestamp, f.end_phy_offset = store_timestamp, commit_log_offset + size
                    f.dirty = True
                except (OSError, ValueError, StoreError) as exc:
                    if not self._failed:
                        log.error(
                            "building the message index failed at offset %d: %s", commit_log_offset, exc
                        )
                    self._failed = True
                return
        self.build_index_batch(commit_log_offset, [(topic, sys_flag, [size], [text])], store_timestamp)

    def build_index_batch(
        self,
        commit_log_offset: int,
        runs: Sequence[tuple[str, int, Sequence[int], Sequence[str]]],
        store_timestamp: int,
    ) -> None:
        """Index contiguous records starting at ``commit_log_offset`` (one put), given as runs
        ``(topic, sys_flag, sizes, properties texts)``: record ``i`` of a run has ``sizes[i]`` bytes
        and the stored properties text ``texts[i]`` (UNIQ_KEY and KEYS are read from it). As
        :meth:`build_index`, under one lock acquisition."""
        with self._lock:
            phy = commit_log_offset
            f = self.files[-1] if self.files else None
            try:
                for topic, sys_flag, sizes, texts in runs:
                    indexed = sys_flag & _TRANSACTION_MASK != _ROLLBACK and topic not in _UNINDEXED_TOPICS
                    prefix = self._topic_crc.get(topic)
                    if prefix is None:
                        if len(self._topic_crc) > 4096:
                            self._topic_crc.clear()
                        prefix = self._topic_crc[topic] = zlib.crc32(_utf8(f"{topic}#"))
                    for size, text in zip(sizes, texts, strict=True):
                        if f is not None and phy < f.end_phy_offset:
                            phy += size
                            continue
                        if f is None or f.index_count >= f.max_index_num:
                            f = self._writable_file(phy)
                        # a pair's name in the text: looked up only then (a client's message has
                        # UNIQ_KEY, few have KEYS)
                        uniq = property_value(text, _UNIQ_KEY) if indexed and _UNIQ_PAIR in text else None
                        keys = property_value(text, _KEYS) if indexed and _KEYS_PAIR in text else None
                        if uniq and not keys:
                            key_hash = zlib.crc32(_utf8(uniq), prefix)
                            if not f.put_key(key_hash, phy, store_timestamp):
                                f = self._writable_file(phy, force=True)
                                f.put_key(key_hash, phy, store_timestamp)
                        elif uniq or keys:
                            hashes = [zlib.crc32(_utf8(uniq), prefix)] if uniq else []
                            if keys:
                                for k in keys.split(KEY_SEPARATOR):
                                    if k:
                                        hashes.append(zlib.crc32(_utf8(k), prefix))
                            if not f.put_keys(hashes, phy, store_timestamp):
                                f = self._writable_file(phy, force=True)
                                f.put_keys(hashes[: f.max_index_num], phy, store_timestamp)
                        if not f.begin_timestamp:
                            f.begin_timestamp, f.begin_phy_offset = store_timestamp, phy
                        phy += size
                        f.end_timestamp, f.end_phy_offset = store_timestamp, phy
                        f.dirty = True
            except (OSError, ValueError, StoreError) as exc:
                if not self._failed:
                    log.error("building the message index failed at offset %d: %s", phy, exc)
                self._failed = True

    def dispatch_record(self, info: RecordInfo) -> None:
        """Index a record met while recovering the commit log (skipped when already covered)."""
        with self._lock:
            if self.files and info.commit_log_offset < self.files[-1].end_phy_offset:
                return
        self.build_index(
            info.commit_log_offset,
            info.total_size,
            info.topic,
            info.properties,
            info.sys_flag,
            info.store_timestamp,
        )

    # ------------------------------------------------------------------------------------ query
    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """Offsets of records indexed under ``topic#key`` stored within ``[begin, end]`` ms, newest
        first, at most ``min(max_num, max_msgs_num_batch)``. Mirrors ``IndexService.queryOffset``.

        Hits are candidates: a hash collision can name another key's record (see :func:`record_has_key`).
        """
        result = QueryOffsetResult()
        max_num = min(max_num, self.max_msgs_num_batch)
        h = key_hash(build_key(topic, key))
        with self._lock:
            if self.files:
                last = self.files[-1]
                result.index_last_update_timestamp = last.end_timestamp
                result.index_last_update_phyoffset = last.end_phy_offset
            for f in reversed(self.files):
                if len(result.phy_offsets) >= max_num:
                    break
                if f.index_count and f.begin_timestamp <= end and f.end_timestamp >= begin:
                    f.select_phy_offsets(result.phy_offsets, h, max_num, begin, end)
                if f.begin_timestamp and f.begin_timestamp < begin:
                    break
        return result

    # -------------------------------------------------------------------------------- retention
    def delete_expired_file(self, min_commit_log_offset: int) -> int:
        """Delete files whose records all lie below ``min_commit_log_offset`` (never the last one);
        returns how many. Mirrors ``IndexService.deleteExpiredFile``."""
        with self._lock:
            doomed = [f for f in self.files[:-1] if f.end_phy_offset <= min_commit_log_offset]
            for f in doomed:
                self.files.remove(f)
                f.destroy()
        if doomed:
            log.info("deleted %d expired index file(s)", len(doomed))
        return len(doomed)


@dataclass(slots=True)
class QueryMessageResult:
    """Answer of :func:`query_message` (``QueryMessageResult``).

    ``message_buffers`` are whole stored records (protocol.md §5.1) in commit-log order; the two
    ``index_last_update_*`` fields go to the QUERY_MESSAGE response header.
    """

    message_buffers: list[bytes] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    @property
    def buffer_total_size(self) -> int:
        return sum(len(b) for b in self.message_buffers)


def query_message(
    index: IndexService | None,
    read_record: Callable[[int], bytes | None],
    topic: str,
    key: str,
    max_num: int,
    begin: int,
    end: int,
) -> QueryMessageResult:
    """Records of ``topic`` carrying ``key`` stored within ``[begin, end]`` ms, at most ``max_num``.

    Mirrors ``DefaultMessageStore.queryMessage``: up to three index rounds, each continuing below
    the oldest candidate when every candidate of the previous round was gone or (hash collision,
    stale entry after a crash) did not carry the key. ``read_record(offset)`` returns the stored
    record at a commit-log offset or None.
    """
    result = QueryMessageResult()
    if index is None or max_num <= 0 or end < begin:
        return result
    seen: set[int] = set()
    found: list[tuple[int, bytes]] = []
    for _ in range(3):
        hits = index.query_offset(topic, key, max_num, begin, end)
        result.index_last_update_timestamp = hits.index_last_update_timestamp
        result.index_last_update_phyoffset = hits.index_last_update_phyoffset
        fresh = sorted(set(hits.phy_offsets) - seen)
        if not fresh:
            break
        seen.update(fresh)
        oldest = end
        for phy in fresh:
            record = read_record(phy)
            if record is None:
                continue
            try:
                info = read_record_info(record)
            except ProtocolError:
                continue
            oldest = min(oldest, info.store_timestamp)
            if info.topic == topic and key in index_keys(string_to_properties(info.properties)):
                found.append((phy, bytes(record)))
        if found or oldest <= begin:
            break
        end = oldest
    found.sort()
    result.message_buffers = [record for _, record in found[:max_num]]
    return result
