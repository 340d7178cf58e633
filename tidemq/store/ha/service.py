"""Master side of replication: ``HAService`` (accepts slaves) and ``GroupTransferService``.

Mirrors RocketMQ 4.9's ``HAService``: it listens on ``haListenPort``, runs one
:class:`~tidemq.store.ha.connection.HAConnection` per slave, tracks ``push2SlaveMaxOffset`` (the
highest offset any slave acknowledged) and, for SYNC_MASTER, lets a send wait until a slave holds
its bytes (``GroupTransferService``; ``CommitLog.handleHA`` decides between SEND_OK,
FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE from :meth:`HAService.is_slave_ok` and
:meth:`HAService.wait_for_slave`).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from dataclasses import dataclass

from tidemq.store.ha.connection import HAConnection
from tidemq.store.message_store import MessageStore

log = logging.getLogger(__name__)


@dataclass(slots=True)
class HAConfig:
    """HA settings (RocketMQ ``MessageStoreConfig`` names; ms unless said).

    Attributes:
        heartbeat_interval_ms: ``haSendHeartbeatInterval``, 5000.
        housekeeping_interval_ms: ``haHousekeepingInterval``: silence after which a link is dropped, 20000.
        transfer_batch_size: ``haTransferBatchSize``, bytes per frame, 32 KiB.
        slave_fallbehind_max: ``haSlaveFallbehindMax``, bytes; further behind = not available, 256 MiB.
        sync_flush_timeout_ms: ``syncFlushTimeout``: how long a SYNC_MASTER send waits for a slave, 5000.
    """

    heartbeat_interval_ms: int = 5000
    housekeeping_interval_ms: int = 20_000
    transfer_batch_size: int = 32 * 1024
    slave_fallbehind_max: int = 256 * 1024 * 1024
    sync_flush_timeout_ms: int = 5000


class GroupTransferService:
    """SYNC_MASTER waiters: futures released once ``push2SlaveMaxOffset`` reaches their offset.

    Mirrors ``HAService.GroupTransferService`` (event-driven instead of a polling thread). All
    methods run on the event loop that created the futures.
    """

    def __init__(self) -> None:
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self.acked = 0

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged ``offset``: release every waiter at or below it."""
        self.acked = max(self.acked, offset)
        while self._waiters and self._waiters[0][0] <= self.acked:
            fut = heapq.heappop(self._waiters)[2]
            if not fut.done():
                fut.set_result(True)

    async def wait(self, next_offset: int, timeout: float) -> bool:
        """True once a slave holds every byte below ``next_offset``; False after ``timeout`` seconds."""
        if self.acked >= next_offset:
            return True
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (next_offset, next(self._seq), fut))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            return self.acked >= next_offset
        finally:
            if not fut.done():
                fut.cancel()
            self._waiters = [w for w in self._waiters if not w[2].done()]
            heapq.heapify(self._waiters)


class HAService:
    """Replication server of a master (``HAService`` + ``AcceptSocketService``).

    Args:
        store: the master's loaded store (read with ``commit_log.get_message``).
        host: interface to bind; port: ``haListenPort`` (0 = a free one, see :attr:`port`).
        config: :class:`HAConfig`.

    Use: ``await start()``; call :meth:`notify_new_data` after appends (thread-safe);
    ``await shutdown()``.
    """

    def __init__(self, store: MessageStore, host: str, port: int, config: HAConfig | None = None) -> None:
        self.store = store
        self.host = host
        self._port = port
        self.config = config or HAConfig()
        self.group_transfer = GroupTransferService()
        self.connections: set[HAConnection] = set()
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def port(self) -> int:
        """The bound HA port (after :meth:`start`)."""
        return self._port

    @property
    def push2slave_max_offset(self) -> int:
        """Highest commit-log offset a slave acknowledged (``push2SlaveMaxOffset``)."""
        return self.group_transfer.acked

    @property
    def connection_count(self) -> int:
        return len(self.connections)

    async def start(self) -> None:
        """Bind and accept slaves. Raises ``OSError`` if the port cannot be bound."""
        self._loop = asyncio.get_running_loop()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = HAConnection(self, reader, writer)
            self.connections.add(conn)
            try:
                await conn.run()
            finally:
                self.connections.discard(conn)

        self._server = await asyncio.start_server(accept, self.host, self._port)
        self._port = self._server.sockets[0].getsockname()[1]
        log.info("HA service listening on %s:%d", self.host, self._port)

    async def shutdown(self) -> None:
        """Stop accepting and close every slave connection."""
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 3.0)
            self._server = None

    # ---- data and acknowledgements
    def notify_new_data(self) -> None:
        """New bytes in the commit log: wake the connections' writers (from any thread)."""
        loop = self._loop
        if loop is None or not self.connections:  # no slave: nothing to wake (a put's hot path)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._wake_all()
        else:
            loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for conn in self.connections:
            conn.data_event.set()

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged ``offset`` (``HAService.notifyTransferSome``)."""
        self.group_transfer.notify_transfer_some(offset)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """A slave is connected and less than ``slave_fallbehind_max`` bytes behind (``isSlaveOK``)."""
        return (
            self.connection_count > 0
            and master_put_where - self.push2slave_max_offset < self.config.slave_fallbehind_max
        )

    async def wait_for_slave(self, next_offset: int) -> bool:
        """SYNC_MASTER: wait (``sync_flush_timeout_ms``) until a slave holds bytes below ``next_offset``."""
        self.notify_new_data()
        return await self.group_transfer.wait(next_offset, self.config.sync_flush_timeout_ms / 1000.0)
