"""Topic and consumer-group administration beyond :mod:`tidemq.admin.core`.

Part of :class:`~tidemq.admin.client.AsyncAdminClient`. Request codes: GET_ALL_TOPIC_LIST_FROM_NAMESERVER
(206), DELETE_TOPIC_IN_BROKER (215) + DELETE_TOPIC_IN_NAMESRV (216), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
(200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), DELETE_SUBSCRIPTIONGROUP (207), GET_PRODUCER_CONNECTION_LIST
(204), GET_CONSUMER_RUNNING_INFO (307, relayed by the broker), INVOKE_BROKER_TO_RESET_OFFSET (222),
CLONE_GROUP_OFFSET (314).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from tidemq.admin.ops_broker import BrokerOps
from tidemq.errors import BrokerError, ClientError, NoRouteError
from tidemq.protocol.body import (
    Connection,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    TopicList,
    fastjson_loads,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    ResetOffsetRequestHeader,
)
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.topic import MASTER_ID, PermName

__all__ = ["ALLOCATE_STRATEGIES", "GroupOps"]

ALLOCATE_STRATEGIES = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH")
"""Strategy names ``allocate_mq`` accepts (RocketMQ's ``getName()`` of each)."""


def _plain_keys(obj: Any) -> Any:
    """fastjson's object keys (``FrozenObject`` tuples) as ``"topic/broker/queueId"`` strings, recursively."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if isinstance(k, tuple):
                d = dict(k)
                k = f"{d.get('topic')}/{d.get('brokerName')}/{d.get('queueId')}"
            out[str(k)] = _plain_keys(v)
        return out
    if isinstance(obj, list | tuple):
        return [_plain_keys(v) for v in obj]
    return obj


class GroupOps(BrokerOps):
    """Topics and consumer groups (the ``DefaultMQAdminExt`` methods of the same names)."""

    # -- topics ------------------------------------------------------------------------------------

    async def fetch_all_topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): every topic the name server knows, sorted."""
        resp = await self._namesrv(
            lambda: RemotingCommand.create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), None
        )
        return sorted(TopicList.decode(resp.body).topic_list) if resp.body else []

    async def topic_cluster_list(self, topic: str) -> list[str]:
        """The clusters holding ``topic`` (``mqadmin topicClusterList``). Raises NoRouteError."""
        route = await self.examine_topic_route_info(topic)
        info = await self.examine_broker_cluster_info()
        names = {bd.broker_name for bd in route.broker_datas}
        return sorted(c for c, brokers in info.cluster_addr_table.items() if names & set(brokers))

    async def delete_topic(self, topic: str, cluster: str | None = None) -> list[str]:
        """DELETE_TOPIC_IN_BROKER on the topic's masters (of ``cluster``), then DELETE_TOPIC_IN_NAMESRV.

        Returns the broker addresses asked. Raises NoRouteError for an unknown topic.
        """
        route = await self.examine_topic_route_info(topic)
        masters = {bd.broker_name: bd.broker_addrs.get(MASTER_ID) for bd in route.broker_datas}
        if cluster:
            allowed = set((await self.examine_broker_cluster_info()).cluster_addr_table.get(cluster, set()))
            masters = {n: a for n, a in masters.items() if n in allowed}
        addrs = sorted(a for a in masters.values() if a)
        ext = DeleteTopicRequestHeader(topic=topic).to_ext_fields()
        for addr in addrs:
            await self.invoke_checked(
                addr, RemotingCommand.create_request(RequestCode.DELETE_TOPIC_IN_BROKER, dict(ext)), None
            )
        ns_ext = dict(ext)
        if cluster:
            ns_ext["clusterName"] = cluster
        for addr in self.namesrv_addrs:
            await self.invoke_checked(
                addr, RemotingCommand.create_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, dict(ns_ext)), None
            )
        return addrs

    async def update_topic_perm(self, topic: str, perm: int, broker_name: str | None = None) -> list[str]:
        """Set ``perm`` (2 = write, 4 = read, 6 = both) of ``topic`` keeping its queue counts.

        Mirrors ``mqadmin updateTopicPerm``: reads the route's queue data and re-issues
        UPDATE_AND_CREATE_TOPIC per broker. Returns the broker addresses changed.

        Raises:
            ClientError: ``perm`` not one of 2, 4, 6; ``broker_name`` not in the route.
            NoRouteError: unknown topic.
        """
        if perm not in (PermName.PERM_WRITE, PermName.PERM_READ, PermName.PERM_READ | PermName.PERM_WRITE):
            raise ClientError(f"perm must be 2 (write), 4 (read) or 6 (read+write), got {perm}")
        route = await self.examine_topic_route_info(topic)
        qds = [q for q in route.queue_datas if broker_name is None or q.broker_name == broker_name]
        if not qds:
            raise ClientError(f"topic {topic} has no queues on broker {broker_name!r}")
        from tidemq.protocol.headers import CreateTopicRequestHeader
        from tidemq.protocol.topic import AUTO_CREATE_TOPIC_KEY

        out = []
        for qd in qds:
            addr = await self.broker_addr(qd.broker_name, topic=topic)
            ext = CreateTopicRequestHeader(
                topic=topic,
                default_topic=AUTO_CREATE_TOPIC_KEY,
                read_queue_nums=qd.read_queue_nums,
                write_queue_nums=qd.write_queue_nums,
                perm=perm,
                topic_filter_type="SINGLE_TAG",
                topic_sys_flag=qd.topic_sys_flag,
                order=False,
            ).to_ext_fields()
            await self.invoke_checked(
                addr, RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), None
            )
            out.append(addr)
        return out

    # -- subscription groups ---------------------------------------------------------------------

    async def create_and_update_subscription_group_config(
        self, config: SubscriptionGroupConfig, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) on one broker or every master (of ``cluster``)."""
        body = orjson.dumps(config.to_json())
        addrs = await self._master_addrs(broker_addr, cluster)
        for addr in addrs:
            await self.invoke_checked(
                addr,
                RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body),
                None,
            )
        return addrs

    async def get_all_subscription_group(self, broker_addr: str) -> dict[str, SubscriptionGroupConfig]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): ``{group: config}`` of one broker."""
        resp = await self.invoke_checked(
            broker_addr, RemotingCommand.create_request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), None
        )
        table = (fastjson_loads(resp.body) or {}).get("subscriptionGroupTable") or {}
        return {str(k): SubscriptionGroupConfig.from_json(v) for k, v in table.items()}

    async def subscription_groups(self) -> dict[str, SubscriptionGroupConfig]:
        """Every subscription group of every master (system groups included), merged by name."""
        out: dict[str, SubscriptionGroupConfig] = {}
        for addr in (await self.all_broker_addrs()).values():
            out.update(await self.get_all_subscription_group(addr))
        return dict(sorted(out.items()))

    async def delete_subscription_group(
        self,
        group: str,
        cluster: str | None = None,
        *,
        broker_addr: str | None = None,
        remove_offset: bool = False,
    ) -> list[str]:
        """DELETE_SUBSCRIPTIONGROUP (207) on every master (of ``cluster``, or ``broker_addr``) holding
        ``group``; ``remove_offset`` deletes its committed offsets too (``removeOffset``).

        Raises:
            SubscriptionGroupNotExistError: no broker has the group.
        """
        addrs = await self._master_addrs(broker_addr, cluster)
        holders = [a for a in addrs if group in await self.get_all_subscription_group(a)]
        if not holders:
            raise BrokerError.for_code(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group {group} does not exist"
            )
        ext = DeleteSubscriptionGroupRequestHeader(
            group_name=group, remove_offset=remove_offset
        ).to_ext_fields()
        for addr in holders:
            await self.invoke_checked(
                addr, RemotingCommand.create_request(RequestCode.DELETE_SUBSCRIPTIONGROUP, dict(ext)), None
            )
        return holders

    # -- connections and running info ------------------------------------------------------------

    async def examine_producer_connection_info(self, group: str, topic: str) -> list[Connection]:
        """GET_PRODUCER_CONNECTION_LIST (204) on the brokers of ``topic``, merged.

        Raises:
            BrokerError: no broker knows the producer group (SYSTEM_ERROR "not exist").
        """
        route = await self.examine_topic_route_info(topic)
        merged: dict[str, Connection] = {}
        last: BrokerError | None = None
        for bd in route.broker_datas:
            addr = bd.broker_addrs.get(MASTER_ID)
            if not addr:
                continue
            req = RemotingCommand.create_request(
                RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group}
            )
            try:
                resp = await self.invoke_checked(addr, req, None)
            except BrokerError as exc:
                last = exc
                continue
            for c in orjson.loads(resp.body).get("connectionSet") or []:
                conn = Connection.from_json(c)
                merged[conn.client_id] = conn
        if not merged:
            if last is not None:
                raise last
            raise ClientError(f"the producer group {group} has no connection")
        return [merged[k] for k in sorted(merged)]

    async def get_consumer_running_info(
        self, group: str, client_id: str, jstack: bool = False
    ) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO (307) through a broker the client is connected to.

        Returns ``ConsumerRunningInfo`` as plain JSON (``properties``, ``subscriptionSet``,
        ``mqTable`` keyed ``"topic/broker/queueId"``, ``statusTable``).
        """
        ext = GetConsumerRunningInfoRequestHeader(
            consumer_group=group, client_id=client_id, jstack_enable=jstack
        ).to_ext_fields()
        last: Exception | None = None
        for addr in (await self.all_broker_addrs()).values():
            try:
                resp = await self.invoke_checked(
                    addr,
                    RemotingCommand.create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, dict(ext)),
                    12.0,
                )
            except BrokerError as exc:
                last = exc
                continue
            info: dict[str, Any] = _plain_keys(fastjson_loads(resp.body))
            return info
        if last is not None:
            raise last
        raise ClientError("no broker is registered with the name server")

    async def consumer_status(
        self, group: str, *, client_id: str | None = None, broker_addr: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """``mqadmin consumerStatus``: ``{clientId: running info}`` of every live member of ``group``
        (only ``client_id`` when given; members found through ``broker_addr`` when given).

        Raises:
            ConsumerNotOnlineError: the group has no live member. ClientError: ``client_id`` is not one.
        """
        cc = await self.examine_consumer_connection_info(group, broker_addr=broker_addr)
        ids = [c.client_id for c in cc.connection_set]
        if client_id is not None:
            if client_id not in ids:
                raise ClientError(f"{client_id} is not a live member of {group} (members: {', '.join(ids)})")
            ids = [client_id]
        infos = await asyncio.gather(*(self.get_consumer_running_info(group, cid) for cid in ids))
        return dict(zip(ids, infos, strict=True))

    # -- offsets ------------------------------------------------------------------------------------

    async def reset_offset_by_timestamp(
        self, topic: str, group: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group``'s offsets of ``topic`` to the first message stored at/after ``timestamp_ms``
        (-1 = the end), telling its live consumers. Mirrors ``mqadmin resetOffsetByTime``.

        With members online, INVOKE_BROKER_TO_RESET_OFFSET (222) makes each broker send
        RESET_CONSUMER_CLIENT_OFFSET to every member. With none online (CONSUMER_NOT_ONLINE) the
        offsets are written directly (UPDATE_CONSUMER_OFFSET), as mqadmin's fallback does.

        Returns:
            The new offset of each queue.

        Raises:
            NoRouteError: unknown topic. BrokerError: the group has no offsets for it.
        """
        route = await self.examine_topic_route_info(topic)
        table: dict[MessageQueue, int] = {}
        offline = False
        for bd in route.broker_datas:
            addr = bd.broker_addrs.get(MASTER_ID)
            if not addr:
                continue
            ext = ResetOffsetRequestHeader(
                topic=topic, group=group, timestamp=timestamp_ms, is_force=force
            ).to_ext_fields()
            req = RemotingCommand.create_request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
            req.language = self.api.language
            resp = await self.remoting.invoke(addr, req, self.timeout)
            if resp.code == ResponseCode.CONSUMER_NOT_ONLINE:
                offline = True
                break
            if resp.code != ResponseCode.SUCCESS:
                raise BrokerError.for_code(resp.code, resp.remark, addr)
            if resp.body:
                table.update(ResetOffsetBody.decode(resp.body).offset_table)
        if offline:
            mqs = await self.fetch_subscribe_message_queues(topic)
            if timestamp_ms == -1:
                table = await self.fetch_max_offsets(mqs)
            else:
                table = await self.search_offsets(mqs, timestamp_ms)
            await self.update_consumer_offsets(group, table)
        return dict(sorted(table.items()))

    async def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str, offline: bool = False
    ) -> list[str]:
        """CLONE_GROUP_OFFSET (314) on the topic's masters: ``dest_group`` gets ``src_group``'s offsets.

        Raises:
            NoRouteError: unknown topic. ClientError: ``src_group`` has no offsets for ``topic``.
        """
        offsets = await self.query_consumer_offsets(
            src_group, await self.fetch_subscribe_message_queues(topic)
        )
        if not any(o >= 0 for o in offsets.values()):
            raise ClientError(f"group {src_group} has no committed offsets for topic {topic}")
        route = await self.examine_topic_route_info(topic)
        addrs = sorted(a for a in (bd.broker_addrs.get(MASTER_ID) for bd in route.broker_datas) if a)
        ext = {
            "srcGroup": src_group,
            "destGroup": dest_group,
            "topic": topic,
            "offline": str(offline).lower(),
        }
        for addr in addrs:
            await self.invoke_checked(
                addr, RemotingCommand.create_request(RequestCode.CLONE_GROUP_OFFSET, dict(ext)), None
            )
        return addrs

    async def allocate_mq(
        self, topic: str, client_ids: list[str], strategy: str = "AVG"
    ) -> dict[str, list[MessageQueue]]:
        """Which queues of ``topic`` each of ``client_ids`` would get (``mqadmin allocateMQ``). Pure
        computation over the topic's route, with RocketMQ's strategies (:data:`ALLOCATE_STRATEGIES`).

        Raises:
            ClientError: no client id, or an unknown strategy. NoRouteError: unknown topic.
        """
        from tidemq.client.consumer import allocate

        strategies: dict[str, Any] = {
            "AVG": allocate.AllocateMessageQueueAveragely,
            "AVG_BY_CIRCLE": allocate.AllocateMessageQueueAveragelyByCircle,
            "CONSISTENT_HASH": allocate.AllocateMessageQueueConsistentHash,
        }
        if strategy not in strategies:
            raise ClientError(f"strategy must be one of {', '.join(ALLOCATE_STRATEGIES)}, got {strategy!r}")
        ids = sorted({c.strip() for c in client_ids if c.strip()})
        if not ids:
            raise ClientError("give at least one client id")
        mqs = await self.fetch_subscribe_message_queues(topic)
        if not mqs:
            raise NoRouteError(f"topic {topic} has no readable queue")
        impl = strategies[strategy]()
        return {cid: impl.allocate("allocateMQ", cid, mqs, ids) for cid in ids}
