"""Message store configuration. Mirrors RocketMQ's ``MessageStoreConfig``.

Field names are RocketMQ's in snake_case (so a ``broker.conf`` key maps mechanically:
``mappedFileSizeCommitLog`` -> ``mapped_file_size_commit_log``); units are given per field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

ASYNC_FLUSH: Final = "ASYNC_FLUSH"
SYNC_FLUSH: Final = "SYNC_FLUSH"
CQ_STORE_UNIT_SIZE: Final = 20
DEFAULT_MESSAGE_DELAY_LEVEL: Final = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

_DELAY_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(slots=True, kw_only=True)
class MessageStoreConfig:
    """Options of the message store (``MessageStoreConfig``); defaults are RocketMQ's unless noted.

    Attributes:
        store_path_root_dir: root directory (``commitlog/``, ``consumequeue/``, ``checkpoint``,
            ``abort``, ``config/`` live under it). Default ``~/store``.
        store_path_commit_log: commit-log directory; empty = ``<root>/commitlog``.
        mapped_file_size_commit_log: commit-log segment size in bytes (64 MiB here; RocketMQ 1 GiB).
        mapped_file_size_consume_queue: consume-queue file size in bytes (300 000 units x 20 bytes).
        flush_disk_type: ``"ASYNC_FLUSH"`` or ``"SYNC_FLUSH"`` (the broker awaits ``flush()`` before
            answering a SYNC_FLUSH send).
        flush_interval_commit_log: ms between periodic commit-log flushes (the broker's timer).
        sync_flush_timeout: ms a SYNC_FLUSH send waits for its flush before FLUSH_DISK_TIMEOUT.
        flush_interval_consume_queue: ms; ``flush()`` also fsyncs consume queues and writes the
            checkpoint when at least this long has passed since it last did.
        file_reserved_time: hours a commit-log segment is kept after its last modification.
        delete_when: hour(s) of day RocketMQ deletes expired files (``"04"``; informational here,
            the broker decides when to call ``delete_expired_files``).
        disk_max_used_space_ratio: percent of disk usage (df's definition, ``tidemq/store/disk.py``)
            above which retention runs at once instead of at ``delete_when``. It deletes expired
            segments whose messages every consumer group has consumed; never an unexpired or
            unconsumed one unless ``clean_file_forcibly_enable`` (``tidemq/store/retention.py``).
        disk_space_clean_forcibly_ratio: percent (RocketMQ 85) above which, with
            ``clean_file_forcibly_enable``, the oldest segments go whatever their age or consumers.
        disk_space_warning_level_ratio: percent (RocketMQ 90) above which the store refuses puts
            (PutMessageStatus.DISK_FULL, sent as SERVICE_NOT_AVAILABLE "disk full") until it is at
            or below it again; reads and offset commits go on.
        clean_file_forcibly_enable: allow retention to delete segments holding messages not yet
            consumed or not yet expired (one ERROR line and a counter per deletion). RocketMQ's
            default is true; tidemq's is false: disk space never costs an acknowledged message
            unless the operator opts in (here, or once with ``tidemq admin deleteExpiredCommitLog
            --force``).
        max_message_size: bytes; a larger record (or batch) is refused with MESSAGE_ILLEGAL.
        max_transfer_bytes_on_message_in_memory / max_transfer_count_on_message_in_memory: per-pull
            limits (256 KiB / 32) when the data is recent ("in memory").
        max_transfer_bytes_on_message_in_disk / max_transfer_count_on_message_in_disk: per-pull limits
            (64 KiB / 8) when the consumer lags by more than ``access_message_in_memory_max_ratio``
            percent of RAM.
        message_delay_level: the delay levels, e.g. ``"1s 5s ... 2h"`` (levels 1..18).
        check_crc_on_recover: verify BODYCRC while recovering the commit log.
        message_index_enable: keep the key index (``<root>/index``) for QUERY_MESSAGE.
        max_hash_slot_num / max_index_num: hash slots and entries per index file (files are sparse:
            ~500 MB apparent size at the defaults, disk use grows with the entries written).
        max_msgs_num_batch: most offsets one index query returns.
        default_query_max_num: ``maxNum`` forced on a QUERY_MESSAGE by unique key.
        warm_maped_file_enable: write each new commit-log segment full of zeros and sync it before
            it is used (``warmMapedFileEnable``, RocketMQ's spelling), so a SYNC_FLUSH ``fdatasync``
            writes data only (no block allocation). None (the default): on with SYNC_FLUSH, off
            with ASYNC_FLUSH (RocketMQ: off). Costs one extra segment of disk, written ahead.
        timer_wheel_enable: schedule timer messages (``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` /
            ``TIMER_DELAY_MS`` / ``__STARTDELIVERTIME``) on the time wheel; off: such a send is refused
            with SYSTEM_ERROR, as RocketMQ 5 does.
        timer_precision_ms: ms one wheel slot covers: a timer message is delivered after its time,
            at most this much later (plus scheduling lag). tidemq's default is 100 (RocketMQ: 1000,
            and it rounds down, delivering up to a second early).
        timer_max_delay_sec: the furthest ahead a timer message may be due, seconds (3 days); further
            is refused with MESSAGE_ILLEGAL.
        mapped_file_size_timer_log: bytes per timer-log segment (48 MiB = 1,048,576 records;
            RocketMQ: 100 MB).
    """

    store_path_root_dir: str = os.path.join(os.path.expanduser("~"), "store")
    store_path_commit_log: str = ""
    mapped_file_size_commit_log: int = 64 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * CQ_STORE_UNIT_SIZE
    flush_disk_type: str = ASYNC_FLUSH
    flush_interval_commit_log: int = 500
    flush_interval_consume_queue: int = 1000
    sync_flush_timeout: int = 5000
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: int = 85
    disk_space_warning_level_ratio: int = 90
    clean_file_forcibly_enable: bool = False
    max_message_size: int = 4 * 1024 * 1024
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL
    check_crc_on_recover: bool = True
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32
    warm_maped_file_enable: bool | None = None
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 100
    timer_max_delay_sec: int = 259_200
    mapped_file_size_timer_log: int = 48 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.flush_disk_type not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ValueError(
                f"flush_disk_type must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}"
            )
        if self.mapped_file_size_consume_queue % CQ_STORE_UNIT_SIZE:
            raise ValueError("mapped_file_size_consume_queue must be a multiple of 20")
        if self.mapped_file_size_commit_log < 4096:
            raise ValueError("mapped_file_size_commit_log must be at least 4096 bytes")
        self.delay_level_table()  # validate early
        if self.timer_precision_ms < 1 or self.timer_max_delay_sec < 1:
            raise ValueError("timer_precision_ms and timer_max_delay_sec must be at least 1")

    @property
    def warm_commit_log(self) -> bool:
        """Whether new commit-log segments are warmed (``warm_maped_file_enable``, None: SYNC_FLUSH)."""
        if self.warm_maped_file_enable is None:
            return self.flush_disk_type == SYNC_FLUSH
        return self.warm_maped_file_enable

    @property
    def commit_log_dir(self) -> str:
        """Directory of the commit-log segments."""
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        """Directory holding ``<topic>/<queueId>/`` consume-queue files."""
        return os.path.join(self.store_path_root_dir, "consumequeue")

    def delay_level_table(self) -> dict[int, int]:
        """``{level: delay in ms}`` parsed from ``message_delay_level`` (``ScheduleMessageService``).

        Raises:
            ValueError: an entry that is not ``<number><s|m|h|d>``.
        """
        table: dict[int, int] = {}
        for level, item in enumerate(self.message_delay_level.split(), start=1):
            unit = _DELAY_UNITS.get(item[-1:])
            if unit is None or not item[:-1].isdigit():
                raise ValueError(f"message_delay_level entry {item!r} is not <number><s|m|h|d>")
            table[level] = int(item[:-1]) * unit
        return table
