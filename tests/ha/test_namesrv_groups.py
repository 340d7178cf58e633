"""The name server's view of broker groups (pure RouteInfoManager): masters and slaves of several
groups, what a slave is told on registration, what survives a master's loss."""

from __future__ import annotations

from tests.unit.namesrv.test_route_info import CLUSTER, T0, wrapper
from tidemq.namesrv.route_info import RouteInfoManager


def register(
    rim: RouteInfoManager, name: str, bid: int, addr: str, *topics: str
) -> tuple[str | None, str | None]:
    ha = addr.replace(":10911", ":10912")
    result = rim.register_broker(CLUSTER, addr, name, bid, ha, wrapper(*topics), [], object(), T0)
    return result.ha_server_addr, result.master_addr


def test_groups_with_slaves() -> None:
    rim = RouteInfoManager()
    assert register(rim, "broker-a", 0, "10.0.0.1:10911", "T") == (None, None)
    # a slave learns its master's HA address and remoting address (haServerAddr, masterAddr)
    assert register(rim, "broker-a", 1, "10.0.0.2:10911", "T") == ("10.0.0.1:10912", "10.0.0.1:10911")
    register(rim, "broker-b", 0, "10.0.0.3:10911", "T")
    register(rim, "broker-b", 1, "10.0.0.4:10911", "T")

    info = rim.get_all_cluster_info()  # GET_BROKER_CLUSTER_INFO: what clusterList shows
    assert info.cluster_addr_table == {CLUSTER: {"broker-a", "broker-b"}}
    assert {n: d.broker_addrs for n, d in info.broker_addr_table.items()} == {
        "broker-a": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"},
        "broker-b": {0: "10.0.0.3:10911", 1: "10.0.0.4:10911"},
    }
    route = rim.pick_topic_route_data("T")
    assert route is not None
    assert sorted(q.broker_name for q in route.queue_datas) == ["broker-a", "broker-b"]  # masters only

    # broker-a's master dies: its slave stays routable (consumers read from it), queues stay listed
    rim.on_channel_destroy("10.0.0.1:10911")
    route = rim.pick_topic_route_data("T")
    assert route is not None
    assert {b.broker_name: b.broker_addrs for b in route.broker_datas}["broker-a"] == {1: "10.0.0.2:10911"}
    assert sorted(q.broker_name for q in route.queue_datas) == ["broker-a", "broker-b"]
