"""The stored-message record layout (protocol.md §5.1), defined once.

RocketMQ's ``CommitLog.DefaultAppendMessageCallback`` / ``MessageDecoder`` layout. Every reader and
writer of records imports its positions and struct formats from here: the codec
(:mod:`tidemq.protocol.message_codec`), the commit log (:mod:`tidemq.store.commit_log`) and the
Spark connector's column-wise decoder (:mod:`tidemq.spark.arrow`). All integers are big-endian;
timestamps are milliseconds::

    TOTALSIZE 4 | MAGICCODE 4 | BODYCRC 4 | QUEUEID 4 | FLAG 4 | QUEUEOFFSET 8 | PHYSICALOFFSET 8 |
    SYSFLAG 4 | BORNTIMESTAMP 8 | BORNHOST 8 or 20 | STORETIMESTAMP 8 | STOREHOST 8 or 20 |
    RECONSUMETIMES 4 | PREPARED TRANSACTION OFFSET 8 | BODY 4+n | TOPIC 1+n (2+n for MAGIC V2) |
    PROPERTIES 2+n

A host is its IP (4 or 16 bytes) and a 4-byte port; SYSFLAG bits 0x10 / 0x20 mark an IPv6 born /
store host. Positions up to BORNHOST are fixed; the rest shift by 12 bytes per IPv6 host.
"""

from __future__ import annotations

import struct
from typing import Final

MESSAGE_MAGIC_CODE: Final = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2: Final = -626843480  # 0xDAA320A8 (RocketMQ 5: 2-byte topic length)
BLANK_MAGIC_CODE: Final = -875286124  # 0xCBD43194, end-of-file filler inside commit-log segments

MAX_TOPIC_BYTES: Final = 127
MAX_PROPERTIES_BYTES: Final = 32767
IPV4_FIXED_SIZE: Final = 91
"""Record size without body, topic and properties bytes when both hosts are IPv4."""

# SYSFLAG bits that change the layout (RocketMQ's MessageSysFlag).
COMPRESSED_FLAG: Final = 0x1
BORNHOST_V6_FLAG: Final = 0x10
STOREHOSTADDRESS_V6_FLAG: Final = 0x20

HOST_V4_SIZE: Final = 8
"""IPv4 address + port."""
HOST_V6_SIZE: Final = 20
"""IPv6 address + port."""

# Byte positions inside a record, valid for every record.
POS_TOTAL_SIZE: Final = 0
POS_MAGIC: Final = 4
POS_BODY_CRC: Final = 8
POS_QUEUE_ID: Final = 12
POS_FLAG: Final = 16
POS_QUEUE_OFFSET: Final = 20
POS_PHYSICAL_OFFSET: Final = 28
POS_SYS_FLAG: Final = 36
POS_BORN_TIMESTAMP: Final = 40
POS_BORN_HOST: Final = 48

# Offsets relative to the end of the born host (POS_BORN_HOST + born host size).
AFTER_BORN_STORE_TIMESTAMP: Final = 0
AFTER_BORN_STORE_HOST: Final = 8
# Offsets relative to the end of the store host.
AFTER_STORE_RECONSUME_TIMES: Final = 0
AFTER_STORE_PREPARED_TX_OFFSET: Final = 4
AFTER_STORE_BODY_LENGTH: Final = 12
AFTER_STORE_BODY: Final = 16

HEAD: Final = struct.Struct(">iiiiiqqiq")
"""TOTALSIZE .. BORNTIMESTAMP (48 bytes)."""
HOST4: Final = struct.Struct(">4si")
HOST6: Final = struct.Struct(">16si")
TAIL: Final = struct.Struct(">iq")
"""RECONSUMETIMES, PREPARED TRANSACTION OFFSET."""
SIZE_MAGIC: Final = struct.Struct(">ii")
"""TOTALSIZE, MAGICCODE: the start of a record or of a blank filler."""
FIXED_V4: Final = struct.Struct(">iiiiiqqiq8sq8siqi")
"""TOTALSIZE .. BODY length of a record whose hosts are both IPv4 (88 bytes)."""


def born_host_size(sys_flag: int) -> int:
    """Bytes of BORNHOST for a record with ``sys_flag`` (8, or 20 for IPv6)."""
    return HOST_V6_SIZE if sys_flag & BORNHOST_V6_FLAG else HOST_V4_SIZE


def store_host_size(sys_flag: int) -> int:
    """Bytes of STOREHOST for a record with ``sys_flag`` (8, or 20 for IPv6)."""
    return HOST_V6_SIZE if sys_flag & STOREHOSTADDRESS_V6_FLAG else HOST_V4_SIZE


def store_timestamp_position(sys_flag: int) -> int:
    """Byte position of STORETIMESTAMP in a record with ``sys_flag`` (56 for an IPv4 born host)."""
    return POS_BORN_HOST + born_host_size(sys_flag) + AFTER_BORN_STORE_TIMESTAMP


def topic_length_size(magic: int) -> int:
    """Bytes of the TOPIC length field: 1, or 2 for :data:`MESSAGE_MAGIC_CODE_V2`."""
    return 2 if magic == MESSAGE_MAGIC_CODE_V2 else 1
