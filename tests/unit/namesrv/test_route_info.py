"""RouteInfoManager: the name server's routing state, driven with an explicit clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.namesrv.route_info import RouteInfoManager
from tidemq.protocol.body import DataVersion, TopicConfig, TopicConfigSerializeWrapper

T0 = 1_700_000_000_000
CLUSTER = "DefaultCluster"


def wrapper(*topics: str, queues: int = 4, perm: int = 6, counter: int = 1) -> TopicConfigSerializeWrapper:
    table = {t: TopicConfig(t, queues, queues, perm) for t in topics}
    return TopicConfigSerializeWrapper(table, DataVersion(T0, counter))


def register(
    rim: RouteInfoManager,
    name: str,
    addr: str,
    *topics: str,
    broker_id: int = 0,
    now: int = T0,
    channel: object | None = None,
    cluster: str = CLUSTER,
    **kw: int,
) -> None:
    rim.register_broker(cluster, addr, name, broker_id, addr + "2", wrapper(*topics, **kw), [], channel, now)


def test_registered_topic_is_routable() -> None:
    """After a master registers TopicA, its route names the broker and its queue counts."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA", "TBW102")
    route = rim.pick_topic_route_data("TopicA")
    assert route is not None
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
        ("broker-a", 4, 4, 6)
    ]
    assert [(b.cluster, b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
        (CLUSTER, "broker-a", {0: "10.0.0.5:10911"})
    ]
    assert rim.pick_topic_route_data("Unknown") is None
    assert rim.get_all_topic_list().topic_list == {"TopicA", "TBW102"}


def test_route_json_has_rocketmq_shape() -> None:
    """The encoded route has quoted broker ids, topicSysFlag and an empty filterServerTable."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA")
    route = rim.pick_topic_route_data("TopicA")
    assert route is not None
    assert route.to_json() == {
        "brokerDatas": [
            {"brokerAddrs": {"0": "10.0.0.5:10911"}, "brokerName": "broker-a", "cluster": CLUSTER}
        ],
        "filterServerTable": {},
        "queueDatas": [
            {"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0, "writeQueueNums": 4}
        ],
    }


def test_two_brokers_serve_one_topic_sorted_by_name() -> None:
    """A topic on two brokers lists both, sorted by broker name."""
    rim = RouteInfoManager()
    register(rim, "broker-b", "10.0.0.6:10911", "TopicA")
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA")
    route = rim.pick_topic_route_data("TopicA")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["broker-a", "broker-b"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]


def test_slave_does_not_register_topics_but_learns_master() -> None:
    """A slave (id 1) adds its address, not its topics, and is told the master's addresses."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA")
    result = rim.register_broker(
        CLUSTER, "10.0.0.6:10911", "broker-a", 1, "10.0.0.6:10912", wrapper("SlaveOnly"), [], None, T0
    )
    assert (result.master_addr, result.ha_server_addr) == ("10.0.0.5:10911", "10.0.0.5:109112")
    assert rim.pick_topic_route_data("SlaveOnly") is None
    route = rim.pick_topic_route_data("TopicA")
    assert route is not None and route.broker_datas[0].broker_addrs == {
        0: "10.0.0.5:10911",
        1: "10.0.0.6:10911",
    }


def test_topic_table_reread_only_when_data_version_changes() -> None:
    """Re-registering with the same DataVersion keeps routes; a new version applies changes."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA", queues=4, counter=1)
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA", queues=8, counter=1)
    route = rim.pick_topic_route_data("TopicA")
    assert route is not None and route.queue_datas[0].write_queue_nums == 4
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA", queues=8, counter=2)
    route = rim.pick_topic_route_data("TopicA")
    assert route is not None and route.queue_datas[0].write_queue_nums == 8


def test_unregister_removes_broker_cluster_and_orphan_topics() -> None:
    """UNREGISTER_BROKER of the last address drops the broker, its cluster entry and its topics."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.5:10911", "OnlyA", "Shared")
    register(rim, "broker-b", "10.0.0.6:10911", "Shared")
    rim.unregister_broker(CLUSTER, "10.0.0.5:10911", "broker-a", 0)
    assert rim.pick_topic_route_data("OnlyA") is None
    shared = rim.pick_topic_route_data("Shared")
    assert shared is not None and [q.broker_name for q in shared.queue_datas] == ["broker-b"]
    info = rim.get_all_cluster_info()
    assert set(info.broker_addr_table) == {"broker-b"}
    assert info.cluster_addr_table == {CLUSTER: {"broker-b"}}
    rim.unregister_broker(CLUSTER, "10.0.0.6:10911", "broker-b", 0)
    assert rim.get_all_cluster_info().cluster_addr_table == {}
    assert rim.get_all_topic_list().topic_list == set()


def test_expiry_uses_injected_now() -> None:
    """A broker silent for more than 120 s is dropped by the scan; a fresh one stays."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA", now=T0)
    register(rim, "broker-b", "10.0.0.6:10911", "TopicB", now=T0 + 60_000)
    assert rim.scan_not_active_broker(T0 + 120_000) == []
    dropped = rim.scan_not_active_broker(T0 + 120_001)
    assert [addr for addr, _ in dropped] == ["10.0.0.5:10911"]
    assert rim.pick_topic_route_data("TopicA") is None
    assert rim.pick_topic_route_data("TopicB") is not None
    assert [addr for addr, _ in rim.scan_not_active_broker(T0 + 180_001)] == ["10.0.0.6:10911"]


def test_reregistration_keeps_broker_alive() -> None:
    """Each REGISTER_BROKER refreshes the broker's liveness."""
    rim = RouteInfoManager(broker_channel_expired_time_ms=1000)
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA", now=T0)
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA", now=T0 + 900)
    assert rim.scan_not_active_broker(T0 + 1500) == []
    assert rim.broker_live_table["10.0.0.5:10911"].last_update_timestamp == T0 + 900


def test_channel_close_removes_broker_found_by_channel() -> None:
    """Closing the connection a broker registered over removes it, whatever the peer port."""
    rim = RouteInfoManager()
    conn = object()
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA", channel=conn)
    register(rim, "broker-b", "10.0.0.6:10911", "TopicA", channel=object())
    assert rim.on_channel_destroy("10.0.0.5:53211", conn) == "10.0.0.5:10911"
    route = rim.pick_topic_route_data("TopicA")
    assert route is not None and [b.broker_name for b in route.broker_datas] == ["broker-b"]


def test_channel_close_of_a_client_changes_nothing() -> None:
    """A closing client (not a broker) connection leaves every route in place."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA", channel=object())
    assert rim.on_channel_destroy("10.0.0.9:40000", object()) is None
    assert rim.pick_topic_route_data("TopicA") is not None


def test_master_gone_slave_remains() -> None:
    """When only the master's connection closes, the group keeps its slave and stays routable."""
    rim = RouteInfoManager()
    master = object()
    register(rim, "broker-a", "10.0.0.5:10911", "TopicA", channel=master)
    register(rim, "broker-a", "10.0.0.6:10911", broker_id=1, channel=object())
    rim.on_channel_destroy("x", master)
    route = rim.pick_topic_route_data("TopicA")
    assert route is not None and route.broker_datas[0].broker_addrs == {1: "10.0.0.6:10911"}


def test_slave_promoted_keeps_one_id_per_address() -> None:
    """An address re-registering under another id replaces its old id (slave -> master switch)."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.6:10911", broker_id=1)
    register(rim, "broker-a", "10.0.0.6:10911", "TopicA", broker_id=0)
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.6:10911"}


def test_delete_topic_everywhere_or_per_cluster() -> None:
    """DELETE_TOPIC_IN_NAMESRV removes a topic from all brokers, or only one cluster's."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.5:10911", "T1", "T2", cluster="c1")
    register(rim, "broker-b", "10.0.0.6:10911", "T1", "T2", cluster="c2")
    rim.delete_topic("T1", "c1")
    route = rim.pick_topic_route_data("T1")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    rim.delete_topic("T2")
    assert rim.pick_topic_route_data("T2") is None
    assert rim.get_topics_by_cluster("c2").topic_list == {"T1"}
    assert rim.get_topics_by_cluster("nope").topic_list == set()


def test_wipe_and_add_write_perm() -> None:
    """Wiping a broker's write perm leaves it readable; adding it back restores RW."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.5:10911", "T1", "T2")
    assert rim.wipe_write_perm_of_broker_by_lock("broker-a") == 2
    route = rim.pick_topic_route_data("T1")
    assert route is not None and route.queue_datas[0].perm == 4
    assert rim.add_write_perm_of_broker_by_lock("broker-a") == 2
    route = rim.pick_topic_route_data("T1")
    assert route is not None and route.queue_datas[0].perm == 6


def test_system_topic_list_names_clusters_and_brokers() -> None:
    """GET_SYSTEM_TOPIC_LIST_FROM_NS lists cluster and broker names plus a broker address."""
    rim = RouteInfoManager()
    register(rim, "broker-a", "10.0.0.5:10911", "T1")
    tl = rim.get_system_topic_list()
    assert tl.topic_list == {CLUSTER, "broker-a"} and tl.broker_addr == "10.0.0.5:10911"


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["T1", "T2", "T3"]), st.booleans()),
        max_size=30,
    )
)
def test_routes_only_name_live_brokers(ops: list[tuple[str, str, bool]]) -> None:
    """After any register/unregister sequence, every route points only at registered brokers."""
    rim = RouteInfoManager()
    for name, topic, up in ops:
        addr = f"10.0.0.{ord(name)}:10911"
        if up:
            register(rim, name, addr, topic)
        else:
            rim.unregister_broker(CLUSTER, addr, name, 0)
    for topic in rim.get_all_topic_list().topic_list:
        route = rim.pick_topic_route_data(topic)
        assert route is not None
        names = {q.broker_name for q in route.queue_datas}
        assert names == {b.broker_name for b in route.broker_datas}
        assert names <= set(rim.broker_addr_table)
    assert set(rim.broker_addr_table) == set().union(*rim.cluster_addr_table.values())
