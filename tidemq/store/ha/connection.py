"""One slave's link on the master (RocketMQ 4.9 ``HAConnection``: read and write services)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from tidemq.store.ha.wire import HEADER, REPORT, REPORT_SIZE

if TYPE_CHECKING:
    from tidemq.store.ha.service import HAService

log = logging.getLogger(__name__)


class HAConnection:
    """Streams the commit log to one slave and reads its offset reports.

    * read side: every 8-byte report sets ``slave_ack_offset`` (the first one also
      ``slave_request_offset``) and releases SYNC_MASTER waiters; a report past the master's max
      offset, or silence longer than ``housekeeping_interval_ms``, drops the link;
    * write side: from ``slave_request_offset`` (0 = the start of the master's last segment, as
      RocketMQ) it sends ``[offset][size]`` + up to ``transfer_batch_size`` bytes, never across a
      segment; when idle a header with size 0 every ``heartbeat_interval_ms``.

    Args:
        service: the owning :class:`~tidemq.store.ha.service.HAService`.
        reader / writer: the accepted stream.
    """

    def __init__(
        self, service: HAService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.client_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.data_event = asyncio.Event()
        self._first_report = asyncio.Event()
        self._closed = False

    def close(self) -> None:
        """Drop the link (idempotent)."""
        if not self._closed:
            self._closed = True
            self.writer.close()
            self.data_event.set()
            self._first_report.set()

    async def run(self) -> None:
        """Serve until either side fails or :meth:`close`; always closes the socket."""
        log.info("HA: slave %s connected", self.client_addr)
        read = asyncio.create_task(self._read_loop())
        write = asyncio.create_task(self._write_loop())
        try:
            await asyncio.wait({read, write}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.close()
            for task in (read, write):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            log.info("HA: slave %s disconnected (acked %d)", self.client_addr, self.slave_ack_offset)

    async def _read_loop(self) -> None:
        cfg = self.service.config
        store = self.service.store
        while not self._closed:
            try:
                raw = await asyncio.wait_for(
                    self.reader.readexactly(REPORT_SIZE), cfg.housekeeping_interval_ms / 1000.0
                )
            except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError):
                return
            (offset,) = REPORT.unpack(raw)
            self.slave_ack_offset = offset
            if self.slave_request_offset < 0:
                self.slave_request_offset = offset
                self._first_report.set()
            elif offset > store.get_max_phy_offset():
                log.warning(
                    "HA: slave %s reports offset %d beyond the master's %d; dropping it",
                    self.client_addr,
                    offset,
                    store.get_max_phy_offset(),
                )
                return
            self.service.notify_transfer_some(offset)

    async def _write_loop(self) -> None:
        await self._first_report.wait()
        if self._closed:
            return
        svc = self.service
        cfg = svc.config
        commit_log = svc.store.commit_log
        seg = commit_log.mapped_file_size
        if self.slave_request_offset == 0:
            master_max = commit_log.get_max_offset()
            next_offset = master_max - master_max % seg
        else:
            next_offset = self.slave_request_offset
        log.info("HA: transfer to %s starts at offset %d", self.client_addr, next_offset)
        last_write = time.monotonic()
        heartbeat = cfg.heartbeat_interval_ms / 1000.0
        while not self._closed:
            size = min(
                cfg.transfer_batch_size,
                commit_log.get_max_offset() - next_offset,
                seg - next_offset % seg,
            )
            data = commit_log.get_message(next_offset, size) if size > 0 else None
            if data:
                self.writer.write(HEADER.pack(next_offset, len(data)) + data)
                next_offset += len(data)
            elif time.monotonic() - last_write >= heartbeat:
                self.writer.write(HEADER.pack(next_offset, 0))
            else:
                self.data_event.clear()
                if commit_log.get_max_offset() <= next_offset or size > 0:  # caught up, or data gone
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.data_event.wait(), min(heartbeat, 1.0))
                continue
            try:
                await self.writer.drain()
            except (ConnectionError, OSError):
                return
            last_write = time.monotonic()
