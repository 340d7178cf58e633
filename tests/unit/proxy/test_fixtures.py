"""The gRPC endpoint's parsing against requests recorded from the real v5 clients (tests/fixtures/v5)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rocketmq.grpc_protocol", reason="needs rocketmq-python-client (the grpc extra)")

from tidemq.protocol.message import MessageExt
from tidemq.proxy import codes, convert, settings
from tidemq.proxy.auth import parse_authorization, sign
from tidemq.proxy.context import peer_addr
from tidemq.proxy.names import resource_name, unwrap, wrap
from tidemq.proxy.pb import d, s
from tidemq.proxy.route import BrokerQueues, accepted_types, assignments, endpoints, message_queues

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "v5"
NOW_MS = 1795760771000  # the recordings' time (2026-11-27T06:26Z): delivery timestamps are near it


def records(pattern: str = "*.jsonl") -> list[dict[str, Any]]:
    out = []
    for path in sorted(FIXTURES.glob(pattern)):
        out.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return out


def decode(record: dict[str, Any]) -> Any:
    cls = getattr(s, record["message_type"].rsplit(".", 1)[1])
    return cls.FromString(base64.b64decode(record["pb_b64"]))


def test_every_recorded_request_decodes() -> None:
    seen = {r["rpc"] for r in records()}
    assert {
        "QueryRoute",
        "Telemetry",
        "SendMessage",
        "ReceiveMessage",
        "AckMessage",
        "EndTransaction",
    } <= seen
    for record in records():
        assert decode(record).ByteSize() == record["pb_len"]


@pytest.mark.parametrize(
    "record",
    [r for r in records() if r["rpc"] == "SendMessage"],
    ids=lambda r: f"{r['client'][:6]}-{r['seq']}",
)
def test_send_requests_become_broker_messages(record: dict[str, Any]) -> None:
    request = decode(record)
    ns = record["metadata"].get("x-mq-namespace", "")
    (message,) = request.messages
    topic = resource_name(message.topic, ns)
    assert topic == ("MQ_INST_demo%V5Topic" if ns else "V5Topic")
    item = convert.to_send(message, topic, "10.0.0.1", 4 * 1024 * 1024, now_ms=NOW_MS)
    props = item.properties
    assert props["color"] == "red" and props["TAGS"] == "TagA" and props["KEYS"].startswith("v5-key-")
    assert props["UNIQ_KEY"] == message.system_properties.message_id == item.message_id
    assert props["PGROUP"] == topic
    assert props["__BORNHOST"] == message.system_properties.born_host
    assert int(props["BORN_TIMESTAMP"]) == item.born_timestamp > 0
    kind = d.MessageType.Name(message.system_properties.message_type)
    assert convert.message_type_of(props) == message.system_properties.message_type
    assert ("__SHARDINGKEY" in props) == (kind == "FIFO")
    assert ("TIMER_DELIVER_MS" in props) == (kind == "DELAY")
    assert (props.get("TRAN_MSG") == "true") == (kind == "TRANSACTION")
    assert bool(item.sys_flag & 4) == (kind == "TRANSACTION")


def test_a_stored_message_comes_back_with_exactly_its_user_properties() -> None:
    record = next(r for r in records("python-produce.jsonl") if r["rpc"] == "SendMessage")
    message = decode(record).messages[0]
    item = convert.to_send(message, "V5Topic", "10.0.0.1", 1 << 22, now_ms=NOW_MS)
    stored = MessageExt(
        "V5Topic",
        item.body,
        properties={**item.properties, "CLUSTER": "c", "POP_CK": "h"},
        queue_id=2,
        queue_offset=7,
        reconsume_times=1,
        store_host="10.0.0.9:10911",
        store_timestamp=NOW_MS,
    )
    out = convert.to_v5(stored, "")
    assert dict(out.user_properties) == dict(message.user_properties)
    sp = out.system_properties
    assert (sp.tag, list(sp.keys), sp.message_id) == (
        message.system_properties.tag,
        list(message.system_properties.keys),
        message.system_properties.message_id,
    )
    assert sp.receipt_handle == "h" and sp.delivery_attempt == 2 and (sp.queue_id, sp.queue_offset) == (2, 7)
    assert sp.body_digest.type == 2 and sp.body_digest.checksum == sp.body_digest.checksum.upper()
    assert sp.born_timestamp == message.system_properties.born_timestamp


def test_message_checks_answer_the_java_codes() -> None:
    message = decode(next(r for r in records("python-produce.jsonl") if r["rpc"] == "SendMessage")).messages[
        0
    ]

    def code_of(m: Any) -> int:
        with pytest.raises(codes.ProxyError) as info:
            convert.to_send(m, "T", "h", 16, now_ms=NOW_MS)
        return info.value.code

    empty = d.Message()
    empty.CopyFrom(message)
    empty.body = b""
    assert code_of(empty) == codes.MESSAGE_BODY_EMPTY
    big = d.Message()
    big.CopyFrom(message)
    big.body = b"x" * 17
    assert code_of(big) == codes.MESSAGE_BODY_TOO_LARGE
    system = d.Message()
    system.CopyFrom(message)
    system.user_properties["UNIQ_KEY"] = "x"
    assert code_of(system) == codes.ILLEGAL_MESSAGE_PROPERTY_KEY
    far = d.Message()
    far.CopyFrom(message)
    far.system_properties.delivery_timestamp.FromMilliseconds(NOW_MS + 2 * 86_400_000)
    assert code_of(far) == codes.ILLEGAL_DELIVERY_TIME
    no_id = d.Message()
    no_id.CopyFrom(message)
    no_id.system_properties.message_id = " "
    assert code_of(no_id) == codes.ILLEGAL_MESSAGE_ID


def test_topic_types_refuse_what_the_topic_does_not_accept() -> None:
    assert accepted_types(None) == (1, 2, 3, 4)
    assert accepted_types({"message.type": "FIFO"}) == (2,)
    convert.check_type((2,), {"__SHARDINGKEY": "g"}, "T")
    with pytest.raises(codes.ProxyError) as info:
        convert.check_type((2,), {}, "T")
    assert info.value.code == codes.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "expected type is FIFO, but actual type is NORMAL" in info.value.message


@pytest.mark.parametrize(
    "record", [r for r in records() if r["rpc"] == "Telemetry"], ids=lambda r: f"{r['client'][:6]}-{r['seq']}"
)
def test_every_recorded_settings_gets_a_full_answer(record: dict[str, Any]) -> None:
    client = decode(record).settings
    merged = settings.merge(client, max_body_size=4 << 20, fifo=False)
    assert merged.metric.on is False and merged.HasField("metric")
    if client.WhichOneof("pub_sub") == "publishing":
        assert merged.publishing.max_body_size == 4 << 20  # never 0, never the client's 128 MiB
        assert merged.backoff_policy.WhichOneof("strategy") == "exponential_backoff"  # Node asserts it
        assert [t.name for t in merged.publishing.topics] == ["V5Topic"]
    else:
        sub = merged.subscription
        assert (sub.receive_batch_size, sub.long_polling_timeout.seconds, sub.fifo) == (32, 20, False)
        assert merged.backoff_policy.max_attempts == 17
        assert len(merged.backoff_policy.customized_backoff.next) == 18


def test_blank_publishing_topics_are_skipped_and_empty_settings_refused() -> None:
    client = d.Settings(
        client_type=1, publishing=d.Publishing(topics=[d.Resource(name=" "), d.Resource(name="T")])
    )
    assert [t.name for t in settings.merge(client, max_body_size=1).publishing.topics] == ["T"]
    with pytest.raises(codes.ProxyError):
        settings.merge(d.Settings(client_type=1), max_body_size=1)


@pytest.mark.parametrize(
    "record", [r for r in records("*-produce-ns.jsonl")], ids=lambda r: f"{r['client'][:6]}-{r['seq']}"
)
def test_recorded_signatures_verify_with_the_demo_secret(record: dict[str, Any]) -> None:
    md = record["metadata"]
    auth = parse_authorization(md["authorization"])
    assert auth.access_key == "DemoAccessKey" and auth.signed_headers == "x-mq-date-time"
    assert sign("DemoSecretKey", md["x-mq-date-time"]) == auth.signature.lower()
    assert sign("OtherSecret", md["x-mq-date-time"]) != auth.signature.lower()


def test_node_namespace_comes_from_the_header_when_the_resource_has_none() -> None:
    route = next(r for r in records("nodejs-produce-ns.jsonl") if r["rpc"] == "QueryRoute")
    request = decode(route)
    assert request.topic.resource_namespace == ""
    assert resource_name(request.topic, route["metadata"]["x-mq-namespace"]) == "MQ_INST_demo%V5Topic"
    assert wrap("ns", "%RETRY%G") == "%RETRY%ns%G" and unwrap("ns", "%DLQ%ns%G") == "%DLQ%G"
    assert unwrap("ns", "ns%T") == "T" and unwrap("", "a%b") == "a%b"


def test_routes_put_every_queue_on_this_endpoint() -> None:
    topic = d.Resource(name="T")
    eps = endpoints("127.0.0.1", 8081)
    queues = message_queues(topic, [BrokerQueues("b", 4, 4, 6)], eps, (1, 2, 3, 4))
    assert [(q.id, q.permission, q.broker.id) for q in queues] == [(i, 4, 0) for i in range(4)]
    assert all(q.broker.endpoints == eps and list(q.accept_message_types) == [1, 2, 3, 4] for q in queues)
    mixed = message_queues(topic, [BrokerQueues("b", 2, 3, 6)], eps, (1,))
    assert [(q.id, q.permission) for q in mixed] == [(0, 3), (1, 4), (2, 4)]
    two = [BrokerQueues("b2", 2, 2, 6), BrokerQueues("b1", 2, 2, 6)]
    assert [
        (a.message_queue.broker.name, a.message_queue.id) for a in assignments(topic, two, eps, False)
    ] == [("b1", -1), ("b2", -1)]
    assert len(assignments(topic, two, eps, True)) == 4
    assert endpoints("localhost", 1).scheme == 3 and peer_addr("ipv4:10.0.0.1:55") == (
        "10.0.0.1:55",
        "10.0.0.1",
    )


def test_fifo_groups_round_trip_and_stay_out_of_4x_json() -> None:
    from tidemq.protocol.body.heartbeat import SubscriptionGroupConfig

    assert "consumeMessageOrderly" not in SubscriptionGroupConfig("g").to_json()
    fifo = SubscriptionGroupConfig("g", consume_message_orderly=True)
    assert fifo.to_json()["consumeMessageOrderly"] is True
    assert SubscriptionGroupConfig.from_json(fifo.to_json()).consume_message_orderly
