"""The ``checkpoint`` file. Mirrors RocketMQ's ``StoreCheckpoint``.

A 4 KiB file: ``physicMsgTimestamp`` @0, ``logicsMsgTimestamp`` @8, ``indexMsgTimestamp`` @16 (ms, as
RocketMQ), then tidemq's additions: ``physicOffset`` @24 (commit log fsynced up to here),
``logicsOffset`` @32 (consume-queue entries of every record below this commit-log offset are
fsynced) and a CRC32 of bytes 0..40 @40, so a torn or foreign file reads as "no checkpoint".
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path

log = logging.getLogger(__name__)

_LAYOUT = struct.Struct(">qqqqq")
_CRC = struct.Struct(">I")
FILE_SIZE = 4096


class StoreCheckpoint:
    """Recovery hints written at every consume-queue flush and at shutdown."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.physic_offset = 0
        self.logics_offset = 0
        self.valid = False

    def load(self) -> bool:
        """Read the file; returns (and sets ``valid``) whether it held a consistent checkpoint."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.warning("cannot read checkpoint %s: %s", self.path, exc)
            return False
        end = _LAYOUT.size
        if len(data) < end + 4 or zlib.crc32(data[:end]) != _CRC.unpack_from(data, end)[0]:
            log.warning("checkpoint %s is torn or not ours; recovering from the first segment", self.path)
            return False
        (
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.physic_offset,
            self.logics_offset,
        ) = _LAYOUT.unpack_from(data)
        self.valid = True
        return True

    def flush(self) -> None:
        """Write and fsync the checkpoint (in place: 44 bytes within one sector)."""
        body = _LAYOUT.pack(
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.physic_offset,
            self.logics_offset,
        )
        data = body + _CRC.pack(zlib.crc32(body))
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < FILE_SIZE:
                os.ftruncate(fd, FILE_SIZE)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
