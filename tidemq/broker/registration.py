"""The broker's registrations with the name servers, kept cheap with many topics.

Mirrors RocketMQ's ``BrokerController.registerBrokerAll`` / ``registerIncrementBrokerData`` and
``BrokerOuterAPI.needRegister``, with three kinds of REGISTER_BROKER (103):

- **full**: the whole topic table, at start, for a slave on every period (its master's HA address
  comes back in the answer), and to a name server that does not hold the broker's current data
  version. A table of ``COMPRESS_MIN_TOPICS`` topics or more is sent in RocketMQ's compressed form
  (header ``compressed=true``; about 20x smaller) when no topic has a ``topicSysFlag``, which that
  form cannot carry.
- **incremental**: after topics change, only the changed topics with the new data version (a name
  server keeps the topics it already has). A name server that missed one gets a full registration
  at once.
- **periodic check** (masters, every ``registerNameServerPeriod``): QUERY_DATA_VERSION (322) first,
  which also keeps the broker alive on that name server; a full registration follows only where
  the version differs (a name server that restarted, or missed an increment). RocketMQ does this
  only with ``forceRegister=false``; by default it sends the whole table every 30 s.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidemq.protocol.body import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import RegisterBrokerRequestHeader

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

__all__ = ["COMPRESS_MIN_TOPICS", "BrokerRegistrar", "RegistrationStats"]

log = logging.getLogger(__name__)

COMPRESS_MIN_TOPICS = 500
"""A full registration of this many topics or more is compressed (when no topic has a sysFlag)."""


@dataclass(slots=True)
class RegistrationStats:
    """Figures of the registrations so far (GET_BROKER_RUNTIME_INFO shows them)."""

    full: int = 0
    incremental: int = 0
    skipped: int = 0
    """Periodic checks that found the name server up to date (no body sent)."""
    last_full_body_bytes: int = 0
    last_full_ms: float = 0.0
    """Encode + round trips of the last full registration, in ms."""


class BrokerRegistrar:
    """Sends the broker's registrations (see the module docstring). One per broker; loop-bound.

    Args:
        broker: the broker (its config, topic manager, remoting client and HA hook are used).
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.stats = RegistrationStats()
        self._lock = asyncio.Lock()

    # -- requests ---------------------------------------------------------------------------------

    def _request(self, configs: dict[str, TopicConfig], version: DataVersion) -> tuple[dict[str, str], bytes]:
        cfg = self.broker.config
        wrapper = TopicConfigSerializeWrapper(topic_config_table=configs, data_version=version)
        body_obj = RegisterBrokerBody(topic_config_serialize_wrapper=wrapper, filter_server_list=[])
        compress = len(configs) >= COMPRESS_MIN_TOPICS and not any(
            tc.topic_sys_flag for tc in configs.values()
        )
        body = body_obj.encode(compress=compress)
        host = self.broker.addr.rsplit(":", 1)[0]
        ip2 = cfg.broker_ip2 or host
        ha = self.broker.ha
        header = RegisterBrokerRequestHeader(
            broker_name=cfg.broker_name,
            broker_addr=self.broker.addr,
            cluster_name=cfg.broker_cluster_name,
            ha_server_addr=f"{ip2}:{ha.ha_port if ha else cfg.resolved_ha_listen_port()}",
            broker_id=cfg.broker_id,
            compressed=compress,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        return header.to_ext_fields(), body

    async def _send(self, addr: str, ext: dict[str, str], body: bytes) -> bool:
        timeout = self.broker.config.register_broker_timeout_mills / 1000.0
        request = RemotingCommand.create_request(RequestCode.REGISTER_BROKER, dict(ext), body)
        try:
            response = await self.broker.remoting_client.invoke(addr, request, timeout)
        except Exception as exc:
            log.warning("register broker to name server %s failed: %s", addr, exc)
            return False
        if response.code != ResponseCode.SUCCESS:
            log.warning("register broker to %s refused: %d %s", addr, response.code, response.remark)
            return False
        if self.broker.ha is not None:
            self.broker.ha.on_register_result(response)
        return True

    def _addrs(self) -> list[str]:
        return self.broker.config.namesrv_addr_list() if self.broker.addr else []

    # -- the three kinds ----------------------------------------------------------------------------

    async def register_full(self, addrs: list[str] | None = None) -> None:
        """The whole table to ``addrs`` (default: every name server), concurrently. Never raises."""
        addrs = self._addrs() if addrs is None else addrs
        if not addrs:
            return
        async with self._lock:
            tcm = self.broker.topic_config_manager
            tcm.take_unregistered()  # the full table below holds them
            wrapper = tcm.build_topic_config_serialize_wrapper()
            t0 = time.perf_counter()
            # encoding (and compressing) 50,000 topics takes a few hundred ms: off the loop; the
            # wrapper is a copy of the table
            ext, body = await asyncio.get_running_loop().run_in_executor(
                None, self._request, wrapper.topic_config_table, wrapper.data_version
            )
            await asyncio.gather(*(self._send(a, ext, body) for a in addrs))
            self.stats.full += 1
            self.stats.last_full_body_bytes = len(body)
            self.stats.last_full_ms = round((time.perf_counter() - t0) * 1000, 2)

    async def register_increment(self) -> None:
        """The topics changed since the last registration, to every name server; a name server that
        did not take them gets a full registration. Never raises."""
        addrs = self._addrs()
        if not addrs:
            return
        failed: list[str] = []
        async with self._lock:
            tcm = self.broker.topic_config_manager
            changed = tcm.take_unregistered()
            configs = {name: tc for name, tc in changed.items() if tc is not None}
            if not configs:
                return  # deletions reach the name servers through DELETE_TOPIC_IN_NAMESRV
            ext, body = self._request(configs, tcm.data_version)
            oks = await asyncio.gather(*(self._send(a, ext, body) for a in addrs))
            self.stats.incremental += 1
            failed = [a for a, ok in zip(addrs, oks, strict=True) if not ok]
        if failed:
            await self.register_full(failed)

    async def register_periodic(self) -> None:
        """Every period: a slave registers in full; a master asks each name server for the version
        it holds (QUERY_DATA_VERSION) and registers in full only where it differs. Never raises."""
        addrs = self._addrs()
        if not addrs:
            return
        if self.broker.config.is_slave:
            await self.register_full(addrs)
            return
        version = self.broker.topic_config_manager.data_version
        checks = await asyncio.gather(*(self._changed_on(a, version) for a in addrs))
        stale = [a for a, changed in zip(addrs, checks, strict=True) if changed]
        self.stats.skipped += len(addrs) - len(stale)
        if stale:
            await self.register_full(stale)

    async def _changed_on(self, addr: str, version: DataVersion) -> bool:
        cfg = self.broker.config
        request = RemotingCommand.create_request(
            RequestCode.QUERY_DATA_VERSION,
            {
                "brokerName": cfg.broker_name,
                "brokerAddr": self.broker.addr,
                "clusterName": cfg.broker_cluster_name,
                "brokerId": str(cfg.broker_id),
            },
            version.encode(),
        )
        try:
            response = await self.broker.remoting_client.invoke(
                addr, request, cfg.register_broker_timeout_mills / 1000.0
            )
        except Exception as exc:
            log.warning("query data version on name server %s failed: %s", addr, exc)
            return True
        if response.code != ResponseCode.SUCCESS:
            return True
        return str(response.ext_fields.get("changed", "true")).lower() != "false"
