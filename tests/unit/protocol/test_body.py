"""JSON bodies: round trips, Java/fastjson shapes, C++ variants, compressed registration, errors."""

from __future__ import annotations

import zlib
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.protocol import body as b
from tidemq.protocol.message import MessageQueue

names = st.text(st.sampled_from("abcXYZ019_-%"), min_size=1, max_size=12)
mqs = st.builds(MessageQueue, names, names, st.integers(0, 64))
longs = st.integers(-(2**63), 2**63 - 1)


def test_topic_route_data_shape() -> None:
    """Routes always carry both arrays, filterServerTable {}, and string broker ids."""
    route = b.TopicRouteData(
        [b.QueueData("broker-a", 4, 4, 6)],
        [b.BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.5:10911", 1: "10.0.0.6:10911"})],
    )
    obj = orjson.loads(route.encode())
    assert obj == {
        "brokerDatas": [
            {
                "brokerAddrs": {"0": "10.0.0.5:10911", "1": "10.0.0.6:10911"},
                "brokerName": "broker-a",
                "cluster": "DefaultCluster",
            }
        ],
        "filterServerTable": {},
        "queueDatas": [
            {"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0, "writeQueueNums": 4}
        ],
    }
    assert b.TopicRouteData.decode(route.encode()) == route
    assert b.TopicRouteData().to_json()["queueDatas"] == []


def test_route_in_fastjson_form_with_unquoted_ids() -> None:
    """A pre-4.9.4 route with {0:"addr"} keys and topicSynFlag still decodes."""
    raw = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"1.2.3.4:10911"},"brokerName":"b","cluster":"c"}],'
        b'"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":2,"topicSynFlag":3,"writeQueueNums":2}]}'
    )
    route = b.TopicRouteData.decode(raw)
    assert route.broker_datas[0].broker_addrs == {0: "1.2.3.4:10911"}
    assert route.broker_datas[0].select_broker_addr() == "1.2.3.4:10911"
    assert route.queue_datas[0].topic_sys_flag == 3


def test_java_heartbeat_example() -> None:
    """protocol.md's Java HeartbeatData decodes with names and round-trips."""
    raw = (
        b'{"clientID":"10.0.0.9@12345#8812331234","consumerDataSet":[{"consumeFromWhere":'
        b'"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"G1",'
        b'"messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":'
        b'[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,"tagsSet":'
        b'["TagA"],"topic":"TopicA"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}'
    )
    hb = b.HeartbeatData.decode(raw)
    (consumer,) = hb.consumer_data_set
    assert consumer.consume_type is b.ConsumeType.CONSUME_PASSIVELY
    assert consumer.subscription_data_set[0].code_set == {2598919}
    assert hb.producer_data_set == [b.ProducerData("CLIENT_INNER_PRODUCER")]
    assert orjson.loads(hb.encode()) == orjson.loads(raw)


def test_cpp_heartbeat_form() -> None:
    """C++: ordinals, string subVersion, absent sets and keys, trailing newline."""
    raw = (
        b'{"clientID":"22067-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":4,"consumeType":1,'
        b'"groupName":"G","messageModel":0,"subscriptionDataSet":[{"subString":"*","subVersion":"1795221803772",'
        b'"topic":"T"}]}]}\n'
    )
    hb = b.HeartbeatData.decode(raw)
    (consumer,) = hb.consumer_data_set
    assert consumer.message_model is b.MessageModel.BROADCASTING
    assert consumer.consume_from_where is b.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    sub = consumer.subscription_data_set[0]
    assert (sub.sub_version, sub.tags_set, sub.code_set, sub.expression_type) == (
        1795221803772,
        set(),
        set(),
        "TAG",
    )
    assert hb.producer_data_set == []


@pytest.mark.parametrize(
    ("enum", "value", "expected"),
    [
        (b.MessageModel, 1, b.MessageModel.CLUSTERING),
        (b.MessageModel, "BROADCASTING", b.MessageModel.BROADCASTING),
        (b.ConsumeType, "0", b.ConsumeType.CONSUME_ACTIVELY),
        (b.ConsumeFromWhere, 5, b.ConsumeFromWhere.CONSUME_FROM_TIMESTAMP),
    ],
)
def test_enum_from_wire(enum: Any, value: Any, expected: Any) -> None:
    """Enums accept Java names and C++ ordinals."""
    assert enum.from_wire(value) is expected
    assert expected.ordinal == list(enum).index(expected)


def test_enum_from_wire_rejects_unknown() -> None:
    """An unknown name or ordinal says which enum and what is allowed."""
    with pytest.raises(b.BodyError, match="MessageModel: unknown value 7"):
        b.MessageModel.from_wire(7)
    with pytest.raises(b.BodyError, match="CLUSTERING"):
        b.MessageModel.from_wire("CLUSTER")


@given(st.sets(mqs, max_size=5), names, names)
def test_lock_bodies_round_trip(mq_set: set[MessageQueue], group: str, client: str) -> None:
    """Lock / unlock request and response bodies round-trip."""
    for body in (
        b.LockBatchRequestBody(group, client, mq_set),
        b.UnlockBatchRequestBody(group, client, mq_set),
    ):
        assert type(body).decode(body.encode()) == body
    resp = b.LockBatchResponseBody(mq_set)
    assert b.LockBatchResponseBody.decode(resp.encode()) == resp
    assert set(orjson.loads(resp.encode())) == {"lockOKMQSet"}


@given(st.dictionaries(mqs, st.tuples(longs, longs, longs), max_size=5))
def test_mq_keyed_bodies_in_both_forms(table: dict[MessageQueue, tuple[int, int, int]]) -> None:
    """ConsumeStats / TopicStatsTable / ResetOffsetBody decode from fastjson and standard forms."""
    stats = b.ConsumeStats({mq: b.OffsetWrapper(*v) for mq, v in table.items()}, 2.5)
    topic_stats = b.TopicStatsTable({mq: b.TopicOffset(*v) for mq, v in table.items()})
    reset = b.ResetOffsetBody({mq: v[0] for mq, v in table.items()})
    for body in (stats, topic_stats, reset):
        assert type(body).decode(body.encode()) == body
        assert type(body).decode(body.encode_standard()) == body
        orjson.loads(body.encode_standard())  # standard JSON really is standard


def test_fastjson_form_of_consume_stats() -> None:
    """encode() writes fastjson's object-as-key syntax, as Java admin tools expect."""
    stats = b.ConsumeStats({MessageQueue("T", "b", 0): b.OffsetWrapper(10, 5, 123)})
    assert stats.encode() == (
        b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:'
        b'{"brokerOffset":10,"consumerOffset":5,"lastTimestamp":123}}}'
    )
    assert stats.compute_total_diff() == 5


def test_reset_offset_body_for_c_is_a_list() -> None:
    """The C++ form is a plain list of {brokerName, offset, queueId, topic}."""
    body = b.ResetOffsetBodyForC({MessageQueue("T", "b", 1): 42})
    assert orjson.loads(body.encode()) == {
        "offsetTable": [{"brokerName": "b", "offset": 42, "queueId": 1, "topic": "T"}]
    }
    assert b.ResetOffsetBody.decode(body.encode()).offset_table == body.offset_table


def test_mq_keys_as_java_to_string() -> None:
    """Map keys written as MessageQueue.toString() are understood too."""
    raw = b'{"offsetTable":{"MessageQueue [topic=T, brokerName=b, queueId=3]":7}}'
    assert b.ResetOffsetBody.decode(raw).offset_table == {MessageQueue("T", "b", 3): 7}


def test_consumer_running_info_from_cpp_parses() -> None:
    """fastjson_loads reads C++'s pretty-printed object-keyed maps."""
    raw = b'{"mqTable":{{\n   "brokerName" : "b",\n   "queueId" : 0,\n   "topic" : "T"\n}:{\n   "x" : "0"\n}\n}}'
    value = b.fastjson_loads(raw)
    (key,) = value["mqTable"]
    assert dict(key) == {"brokerName": "b", "queueId": 0, "topic": "T"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5) | st.integers(-100, 100), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(json_values)
def test_fastjson_dumps_loads_round_trip(value: Any) -> None:
    """fastjson_loads(fastjson_dumps(x)) == x, including unquoted integer keys."""
    assert b.fastjson_loads(b.fastjson_dumps(value)) == value


@pytest.mark.parametrize("raw", [b"{", b'{"a":}', b"[1,]x", b'{"a" 1}', b"{{{", b"nul"])
def test_fastjson_loads_errors(raw: bytes) -> None:
    """Malformed input raises BodyError with a position."""
    with pytest.raises(b.BodyError, match="character"):
        b.fastjson_loads(raw)


def test_deep_nesting_is_refused() -> None:
    """Pathological nesting is a BodyError, not a RecursionError."""
    with pytest.raises(b.BodyError, match="too deep"):
        b.fastjson_loads(b"{1:" * 1000)


def make_register_body() -> b.RegisterBrokerBody:
    wrapper = b.TopicConfigSerializeWrapper(
        {
            "TopicA": b.TopicConfig("TopicA", 4, 4, 6),
            "TBW102": b.TopicConfig("TBW102", 8, 8, 7),
            "M": b.TopicConfig("M", 1, 2, 4, b.MULTI_TAG),
        },
        b.DataVersion(1700000000000, 12),
    )
    return b.RegisterBrokerBody(wrapper, ["1.2.3.4:9999"])


def test_register_broker_body_plain() -> None:
    """The plain form is JSON with Java's field names."""
    body = make_register_body()
    obj = orjson.loads(body.encode())
    assert obj["topicConfigSerializeWrapper"]["dataVersion"] == {"counter": 12, "timestamp": 1700000000000}
    assert obj["topicConfigSerializeWrapper"]["topicConfigTable"]["TBW102"]["perm"] == 7
    assert b.RegisterBrokerBody.decode(body.encode()) == body


def test_register_broker_body_compressed() -> None:
    """The compressed form is zlib of length-prefixed parts; topics use Java's compact text."""
    body = make_register_body()
    data = body.encode(compress=True)
    plain = zlib.decompress(data)
    assert b"TopicA 4 4 6 SINGLE_TAG" in plain and b"M 1 2 4 MULTI_TAG" in plain
    assert b.RegisterBrokerBody.decode(data, compressed=True) == body


def test_register_broker_body_compressed_errors() -> None:
    """Garbage or truncated compressed bodies raise BodyError."""
    with pytest.raises(b.BodyError, match="does not inflate"):
        b.RegisterBrokerBody.decode(b"not zlib", compressed=True)
    truncated = zlib.compress(zlib.decompress(make_register_body().encode(compress=True))[:30])
    with pytest.raises(b.BodyError, match="truncated"):
        b.RegisterBrokerBody.decode(truncated, compressed=True)


def test_topic_config_compact_form_errors() -> None:
    """A compact topic config with the wrong number of parts says what it expected."""
    with pytest.raises(b.BodyError, match="name read write perm filterType"):
        b.TopicConfig.decode_compact("T 1 2")


def test_topic_config_json_defaults() -> None:
    """Missing fields take Java's defaults (16/16, perm 6, SINGLE_TAG)."""
    config = b.TopicConfig.decode(b'{"topicName":"T"}')
    assert config == b.TopicConfig("T", 16, 16, 6, b.SINGLE_TAG, 0, False)


def test_small_bodies_round_trip() -> None:
    """Cluster info, topic list, KV table, consumer list, group config, connections round-trip."""
    bodies: list[b.JsonBody] = [
        b.ClusterInfo({"a": b.BrokerData("c", "a", {0: "x:1"})}, {"c": {"a"}}),
        b.TopicList({"A", "B"}, None),
        b.KVTable({"k": "v"}),
        b.GetConsumerListByGroupResponseBody(["c1", "c2"]),
        b.SubscriptionGroupConfig("G", retry_max_times=3),
        b.ConsumerConnection(
            [b.Connection("cid", "1.2.3.4:5", "CPP", 63)],
            {"T": b.SubscriptionData("T", "*", sub_version=5)},
            b.ConsumeType.CONSUME_PASSIVELY,
            b.MessageModel.CLUSTERING,
            b.ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        ),
    ]
    for body in bodies:
        assert type(body).decode(body.encode()) == body
    assert orjson.loads(b.TopicList({"B", "A"}).encode()) == {"topicList": ["A", "B"]}
    assert orjson.loads(bodies[3].encode()) == {"consumerIdList": ["c1", "c2"]}


def test_connection_language_ordinal() -> None:
    """A connection's language may arrive as an ordinal."""
    assert (
        b.Connection.decode(b'{"clientId":"c","clientAddr":"a","language":1,"version":3}').language == "CPP"
    )
    unknown = b.Connection.decode(b'{"clientId":"c","clientAddr":"a","language":99,"version":3}')
    assert unknown.language == "OTHER"  # an ordinal this version does not name


@pytest.mark.parametrize(
    ("cls", "raw", "text"),
    [
        (b.HeartbeatData, b"", "HeartbeatData: empty body"),
        (b.HeartbeatData, b"[1]", "HeartbeatData must be a JSON object"),
        (b.HeartbeatData, b"{}", "missing required field 'clientID'"),
        (b.HeartbeatData, b"{oops", "HeartbeatData: body is not valid JSON"),
        (b.QueueData, b'{"brokerName":"b","perm":"x"}', "field 'perm' must be an integer"),
        (
            b.LockBatchRequestBody,
            b'{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"t"}]}',
            "brokerName",
        ),
        (b.ConsumeStats, b'{"offsetTable":{"nope":{}}}', "does not name a message queue"),
        (b.SubscriptionData, b'{"topic":"t","codeSet":["x"]}', "codeSet must hold integers"),
    ],
)
def test_bad_bodies_raise_body_error(cls: type[b.JsonBody], raw: bytes, text: str) -> None:
    """Bad input raises BodyError naming the body and what was wrong."""
    with pytest.raises(b.BodyError, match=text):
        cls.decode(raw)


def test_data_version_next() -> None:
    """next_version bumps the counter and sets the timestamp."""
    version = b.DataVersion(1, 0)
    version.next_version(now_ms=99)
    assert version == b.DataVersion(99, 1)


def test_body_that_is_not_utf8_is_a_body_error() -> None:
    from tidemq.protocol.body.base import BodyError, loads_body

    with pytest.raises(BodyError, match="not UTF-8"):
        loads_body(b"\xf9\x01{}", "TopicConfigSerializeWrapper")
