"""Broker role wiring: ASYNC_MASTER / SYNC_MASTER run an HAService, a SLAVE an HAClient + SlaveSynchronize.

Mirrors the role handling of RocketMQ 4.9's ``BrokerController`` and ``CommitLog.handleHA``:

* a master listens on ``haListenPort`` (default ``listenPort + 1``) and announces it as
  ``haServerAddr`` when registering;
* a SYNC_MASTER answers a send SEND_OK only once a slave acknowledged its bytes; no slave connected
  (or one more than ``haSlaveFallbehindMax`` behind) -> SLAVE_NOT_AVAILABLE, no acknowledgement
  within ``syncFlushTimeout`` -> FLUSH_SLAVE_TIMEOUT (the message is stored either way);
* a slave replicates from ``haMasterAddress`` or, when that is not set, from the ``haServerAddr``
  the name server returns on REGISTER_BROKER, copies metadata from ``masterAddr`` every 10 s, and
  refuses sends (NO_PERMISSION).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.store.ha import HAClient, HAService, SlaveCommitLogAppender
from tidemq.store.ha.service import HAConfig

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.broker.slave_sync import SlaveSynchronize

log = logging.getLogger(__name__)


class BrokerHA:
    """The HA side of one broker, created by :class:`~tidemq.broker.broker.Broker` after store load.

    Attributes:
        service: the master's :class:`HAService` (None on a slave).
        client: the slave's :class:`HAClient` (None on a master).
        slave_synchronize: the slave's :class:`SlaveSynchronize` (None on a master).
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.role = cfg.broker_role.upper()
        self.ha_config = HAConfig(
            heartbeat_interval_ms=cfg.ha_send_heartbeat_interval,
            housekeeping_interval_ms=cfg.ha_housekeeping_interval,
            transfer_batch_size=cfg.ha_transfer_batch_size,
            slave_fallbehind_max=cfg.ha_slave_fallbehind_max,
            sync_flush_timeout_ms=int(getattr(broker.store_config, "sync_flush_timeout", 5000)),
        )
        self.service: HAService | None = None
        self.client: HAClient | None = None
        self.slave_synchronize: SlaveSynchronize | None = None

    @property
    def is_slave(self) -> bool:
        return self.role == "SLAVE"

    @property
    def is_sync_master(self) -> bool:
        """``SYNC_MASTER``: a send is answered once a slave holds it (:meth:`handle_ha` waits)."""
        return self.role == "SYNC_MASTER"

    @property
    def ha_port(self) -> int:
        """The HA port to announce (the bound one on a master)."""
        if self.service is not None:
            return self.service.port
        return self.broker.config.resolved_ha_listen_port()

    async def start(self) -> None:
        """Master: bind the HA port. Slave: start replicating and syncing. Raises ``OSError`` on bind."""
        broker = self.broker
        if self.is_slave:
            broker.store.slave_mode = True
            from tidemq.broker.slave_sync import SYNC_INTERVAL, SlaveSynchronize, SlaveTopics

            broker.topic_config_manager.fallback = SlaveTopics(broker)
            self.client = HAClient(
                SlaveCommitLogAppender(broker.store), broker.config.ha_master_address, self.ha_config
            )
            self.client.start()
            self.slave_synchronize = SlaveSynchronize(broker)
            broker.every(SYNC_INTERVAL, self.slave_synchronize.sync_all, "slave-sync")
            return
        self.service = HAService(
            broker.store, broker.config.listen_host, broker.config.resolved_ha_listen_port(), self.ha_config
        )
        await self.service.start()

    async def shutdown(self) -> None:
        if self.client is not None:
            await self.client.shutdown()
        if self.service is not None:
            await self.service.shutdown()

    def on_register_result(self, response: RemotingCommand) -> None:
        """REGISTER_BROKER answer: a slave learns ``haServerAddr`` and ``masterAddr`` from it."""
        if not self.is_slave:
            return
        ext = response.ext_fields or {}
        ha_addr = ext.get("haServerAddr")
        master_addr = ext.get("masterAddr")
        if self.client is not None and not self.broker.config.ha_master_address and ha_addr:
            self.client.update_ha_master_address(str(ha_addr))
        sync = self.slave_synchronize
        if sync is not None and master_addr and master_addr != sync.master_addr:
            sync.master_addr = str(master_addr)
            self.broker.loop.create_task(sync.sync_all())

    def notify_new_data(self) -> None:
        """After a put on a master: wake the replication writers (any thread)."""
        if self.service is not None:
            self.service.notify_new_data()

    async def handle_ha(self, next_offset: int) -> ResponseCode:
        """SYNC_MASTER after a stored send: SUCCESS, SLAVE_NOT_AVAILABLE or FLUSH_SLAVE_TIMEOUT.

        ``next_offset`` is ``wroteOffset + wroteBytes``. Other roles: SUCCESS at once.
        """
        service = self.service
        if self.role != "SYNC_MASTER" or service is None:
            return ResponseCode.SUCCESS
        if not service.is_slave_ok(next_offset):
            return ResponseCode.SLAVE_NOT_AVAILABLE
        if not await service.wait_for_slave(next_offset):
            return ResponseCode.FLUSH_SLAVE_TIMEOUT
        return ResponseCode.SUCCESS
