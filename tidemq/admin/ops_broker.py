"""Broker and name-server administration: runtime info, statistics, configs, KV config, cluster list.

Part of :class:`~tidemq.admin.client.AsyncAdminClient` (see :mod:`tidemq.admin.core`). Request codes:
GET_BROKER_RUNTIME_INFO (28), GET_BROKER_CONFIG (26), UPDATE_BROKER_CONFIG (25),
VIEW_BROKER_STATS_DATA (315), GET_NAMESRV_CONFIG (319), PUT_KV_CONFIG (100), GET_KV_CONFIG (101),
DELETE_KV_CONFIG (102), QUERY_TOPIC_CONSUME_BY_WHO (300). All work against RocketMQ 4.x too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson

from tidemq.admin.ops_offsets import OffsetOps
from tidemq.errors import BrokerError, ClientError, RemotingError
from tidemq.protocol.body import KVTable
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    DeleteKVConfigRequestHeader,
    GetKVConfigRequestHeader,
    PutKVConfigRequestHeader,
)
from tidemq.protocol.topic import MASTER_ID

__all__ = ["BrokerOps", "BrokerRow", "StatsRow", "parse_properties_text"]


def parse_properties_text(text: str) -> dict[str, str]:
    """``key=value`` lines (``#`` / ``!`` comments, blank lines skipped) as a dict, in order."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True, slots=True)
class BrokerRow:
    """One line of ``clusterList``: a broker address and its runtime figures.

    Attributes:
        cluster / broker_name / broker_id / addr: where it is.
        runtime: its GET_BROKER_RUNTIME_INFO table (empty when it did not answer).
        error: why it did not answer ("" when it did).
    """

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    runtime: dict[str, str] = field(default_factory=dict)
    error: str = ""

    def tps(self, key: str) -> float:
        """The last-minute figure (the middle one) of a ``"tps10s tps60s tps600s"`` runtime value,
        0.0 when absent: TPS_WINDOW, the one window every tidemq TPS uses."""
        try:
            return float(self.runtime.get(key, "0").split()[1])
        except (ValueError, IndexError):
            return 0.0


TPS_WINDOW = "last minute"
"""The window of every TPS tidemq shows: ``clusterList``, the dashboard's Cluster and Topics pages,
``rocketmq_broker_tps`` / ``rocketmq_producer_tps`` (the stats' minute window)."""


@dataclass(frozen=True, slots=True)
class StatsRow:
    """One line of ``statsAll``: a topic (and one consuming group) with its figures.

    Attributes:
        topic / group: the group is "" for a topic without consumers.
        accumulation: messages the group has not consumed yet.
        in_tps / out_tps: messages stored / pulled by the group per second (last minute).
        in_msg_24h / out_msg_24h: messages stored / pulled by the group within the last day.
    """

    topic: str
    group: str
    accumulation: int
    in_tps: float
    out_tps: float
    in_msg_24h: int
    out_msg_24h: int


class BrokerOps(OffsetOps):
    """Broker / name-server administration (the ``DefaultMQAdminExt`` methods of the same names)."""

    async def _master_addrs(self, broker_addr: str | None, cluster: str | None = None) -> list[str]:
        if broker_addr:
            return [broker_addr]
        addrs = list((await self.all_broker_addrs(cluster)).values())
        if not addrs:
            raise ClientError("no broker is registered with the name server")
        return addrs

    async def fetch_broker_runtime_stats(
        self, broker_addr: str, timeout: float | None = None
    ) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO (28): the broker's ``KVTable`` (``putTps``, ``msgPutTotalTodayNow``...)."""
        req = RemotingCommand.create_request(RequestCode.GET_BROKER_RUNTIME_INFO)
        resp = await self.invoke_checked(broker_addr, req, timeout)
        return dict(KVTable.decode(resp.body).table) if resp.body else {}

    async def cluster_list(self) -> list[BrokerRow]:
        """Every broker of every cluster with its runtime figures (``mqadmin clusterList``)."""
        info = await self.examine_broker_cluster_info()
        rows: list[tuple[str, str, int, str]] = []
        for cluster, names in sorted(info.cluster_addr_table.items()):
            for name in sorted(names):
                bd = info.broker_addr_table.get(name)
                for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                    rows.append((cluster, name, int(bid), addr))

        async def one(row: tuple[str, str, int, str]) -> BrokerRow:
            try:
                runtime = await self.fetch_broker_runtime_stats(row[3])
            except (BrokerError, RemotingError) as exc:
                return BrokerRow(*row, error=str(exc))
            return BrokerRow(*row, runtime=runtime)

        return list(await asyncio.gather(*(one(r) for r in rows)))

    async def get_broker_config(self, broker_addr: str, timeout: float | None = None) -> dict[str, str]:
        """GET_BROKER_CONFIG (26): the broker's options (camelCase keys, text values)."""
        resp = await self.invoke_checked(
            broker_addr, RemotingCommand.create_request(RequestCode.GET_BROKER_CONFIG), timeout
        )
        return parse_properties_text(resp.body.decode("utf-8", "replace"))

    async def update_broker_config(
        self, props: dict[str, str], broker_addr: str | None = None, cluster: str | None = None
    ) -> list[str]:
        """UPDATE_BROKER_CONFIG (25) on one broker, or every master (of ``cluster``). Returns the addresses.

        Raises:
            ClientError: empty ``props``.
            BrokerError: a broker refused (unknown key, bad value, a read-only option).
        """
        if not props:
            raise ClientError("give at least one key=value to update")
        body = "".join(f"{k}={v}\n" for k, v in props.items()).encode()
        addrs = await self._master_addrs(broker_addr, cluster)
        await asyncio.gather(
            *(
                self.invoke_checked(
                    a, RemotingCommand.create_request(RequestCode.UPDATE_BROKER_CONFIG, None, body), None
                )
                for a in addrs
            )
        )
        return addrs

    async def view_broker_stats_data(
        self, broker_addr: str, stats_name: str, stats_key: str, timeout: float | None = None
    ) -> dict[str, dict[str, float]]:
        """VIEW_BROKER_STATS_DATA (315): ``{"statsMinute"|"statsHour"|"statsDay": {"sum","tps","avgpt"}}``.

        Raises:
            BrokerError: no such stats item (SYSTEM_ERROR), e.g. a topic that never received a message.
        """
        req = RemotingCommand.create_request(
            RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": stats_name, "statsKey": stats_key}
        )
        resp = await self.invoke_checked(broker_addr, req, timeout)
        data: dict[str, dict[str, float]] = orjson.loads(resp.body)
        return data

    async def stats_data_or_zero(self, addr: str, name: str, key: str) -> dict[str, dict[str, float]]:
        """:meth:`view_broker_stats_data`, with zeros when the broker has no such item."""
        try:
            return await self.view_broker_stats_data(addr, name, key)
        except BrokerError:
            zero = {"sum": 0, "tps": 0.0, "avgpt": 0.0}
            return {"statsMinute": zero, "statsHour": zero, "statsDay": zero}

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO (300) on every broker of ``topic``: the groups consuming it."""
        route = await self.examine_topic_route_info(topic)
        groups: set[str] = set()
        for bd in route.broker_datas:
            addr = bd.broker_addrs.get(MASTER_ID) or bd.select_broker_addr()
            if not addr:
                continue
            req = RemotingCommand.create_request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            resp = await self.invoke_checked(addr, req, None)
            if resp.body:
                groups.update(orjson.loads(resp.body).get("groupList") or [])
        return sorted(groups)

    async def stats_all(self, topics: list[str]) -> list[StatsRow]:
        """``mqadmin statsAll`` for ``topics``: per topic and consuming group, lag and in/out figures."""
        rows: list[StatsRow] = []
        for topic in topics:
            route = await self.examine_topic_route_info(topic)
            addrs = [a for a in (bd.broker_addrs.get(MASTER_ID) for bd in route.broker_datas) if a]
            in_tps = 0.0
            in_24h = 0
            for addr in addrs:
                put = await self.stats_data_or_zero(addr, "TOPIC_PUT_NUMS", topic)
                in_tps += float(put["statsMinute"]["tps"])
                in_24h += int(put["statsDay"]["sum"])
            groups = await self.query_topic_consume_by_who(topic)
            if not groups:
                rows.append(StatsRow(topic, "", 0, in_tps, 0.0, in_24h, 0))
            for group in groups:
                stats = await self.examine_consume_stats(group, topic)
                out_tps = 0.0
                out_24h = 0
                for addr in addrs:
                    got = await self.stats_data_or_zero(addr, "GROUP_GET_NUMS", f"{topic}@{group}")
                    out_tps += float(got["statsMinute"]["tps"])
                    out_24h += int(got["statsDay"]["sum"])
                rows.append(
                    StatsRow(topic, group, stats.compute_total_diff(), in_tps, out_tps, in_24h, out_24h)
                )
        return rows

    # -- name server -------------------------------------------------------------------------------

    async def get_name_server_config(self) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG (319) of every name server: ``{addr: {key: value}}``."""
        out: dict[str, dict[str, str]] = {}
        for addr in self.namesrv_addrs:
            resp = await self.invoke_checked(
                addr, RemotingCommand.create_request(RequestCode.GET_NAMESRV_CONFIG), None
            )
            out[addr] = parse_properties_text(resp.body.decode("utf-8", "replace"))
        return out

    async def create_and_update_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG (100) on every name server (``mqadmin updateKvConfig``)."""
        if not namespace or not key:
            raise ClientError("namespace and key are required")
        ext = PutKVConfigRequestHeader(namespace=namespace, key=key, value=value).to_ext_fields()
        for addr in self.namesrv_addrs:
            await self.invoke_checked(
                addr, RemotingCommand.create_request(RequestCode.PUT_KV_CONFIG, dict(ext)), None
            )

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG (101) from the first name server that has it; None when none has."""
        ext = GetKVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields()
        for addr in self.namesrv_addrs:
            req = RemotingCommand.create_request(RequestCode.GET_KV_CONFIG, dict(ext))
            req.language = self.api.language
            resp = await self.remoting.invoke(addr, req, self.timeout)
            if resp.code == ResponseCode.SUCCESS:
                value: Any = resp.ext_fields.get("value")
                return None if value is None else str(value)
        return None

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG (102) on every name server (``mqadmin deleteKvConfig``)."""
        ext = DeleteKVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields()
        for addr in self.namesrv_addrs:
            await self.invoke_checked(
                addr, RemotingCommand.create_request(RequestCode.DELETE_KV_CONFIG, dict(ext)), None
            )
