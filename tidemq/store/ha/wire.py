"""The HA link's two frame layouts (RocketMQ ``HAConnection`` / ``HAClient``)."""

from __future__ import annotations

import struct

REPORT = struct.Struct(">q")
"""Slave -> master: the slave's max commit-log offset (8 bytes)."""

HEADER = struct.Struct(">qi")
"""Master -> slave: ``[phyOffset int64][bodySize int32]`` (12 bytes), then the body."""

REPORT_SIZE = REPORT.size
HEADER_SIZE = HEADER.size
