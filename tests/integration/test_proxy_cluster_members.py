"""``tidemq proxy`` (cluster mode): each v5 consumer is a member of its group on the brokers, over a
connection of its own (proxy/cluster_members.py), so ``consumerConnection`` lists it and the group's
members see it; it leaves the group when it leaves the proxy. Producers stay on the shared connection."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import wait_for
from tidemq.admin import AsyncAdminClient
from tidemq.client.producer.producer import AsyncProducer
from tidemq.protocol.message import Message
from tidemq.proxy import members
from tidemq.proxy.channels import ClientState
from tidemq.proxy.cluster import ClusterBackend
from tidemq.proxy.context import RequestContext
from tidemq.testing import run_cluster

TOPIC = "V5Members"


def consumer(client_id: str, kind: int) -> ClientState:
    return ClientState(
        client_id, client_type=kind, group="GV5", topics={TOPIC}, subscriptions={TOPIC: ("TAG", "TagA")}
    )


async def test_v5_consumers_behind_a_cluster_proxy_are_group_members(tmp_path: Path) -> None:
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="pg-members")
        await producer.start()
        await producer.send(Message(TOPIC, b"x"))  # the topic
        await producer.shutdown()
        backend = ClusterBackend(cluster.namesrv_addr)
        ctx = RequestContext({}, "", "", "10.0.0.9:5000", "10.0.0.9")
        states = [consumer("v5-simple", members.SIMPLE_CONSUMER), consumer("v5-push", members.PUSH_CONSUMER)]
        admin = AsyncAdminClient(cluster.namesrv_addr)
        manager = cluster.broker.consumer_manager
        try:
            for state in [*states, ClientState("v5-producer", client_type=members.PRODUCER, topics={TOPIC})]:
                await members.register(backend, state, ctx)
                await members.register(backend, state, ctx)  # a Heartbeat later: the same member
            group = manager.get_consumer_group_info("GV5")
            assert group is not None and group.get_all_client_ids() == ["v5-push", "v5-simple"]
            conn = await admin.examine_consumer_connection_info("GV5")
            assert sorted(c.client_id for c in conn.connection_set) == ["v5-push", "v5-simple"]
            assert len({c.client_addr for c in conn.connection_set}) == 2  # one connection each
            assert conn.subscription_table[TOPIC].sub_string == "TagA"
            assert manager.query_topic_consume_by_who(TOPIC) == {"GV5"}
            assert cluster.broker.producer_manager.find_channel("v5-producer") is not None
            backend.close_client("v5-push")  # NotifyClientTermination / its Telemetry stream closed
            await wait_for(lambda: group.get_all_client_ids() == ["v5-simple"], 5, "v5-push to leave")
        finally:
            await admin.close()
            await backend.close()
        await wait_for(lambda: manager.get_consumer_group_info("GV5") is None, 5, "the proxy's members to go")
