"""ConsumerFilterManager against the frames ali-ons 3.12 really sent (tests/fixtures/ali_ons/
ali_ons-stub-sql92-consumer.jsonl): its heartbeat registers the SQL92 filter, its pulls (numeric
header values, sysFlag 6 / 7) are accepted and filter the fixture's three messages; the retry filter
evaluates a retry message with the group's filter for its original topic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tidemq.broker.config import BrokerConfig
from tidemq.broker.consumer_filter import ConsumerFilterManager
from tidemq.protocol.body import HeartbeatData, SubscriptionData
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.headers import PullMessageRequestHeader
from tidemq.protocol.message import properties_to_string
from tidemq.protocol.message_codec import encode_stored_message

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "ali_ons" / "ali_ons-stub-sql92-consumer.jsonl"
GROUP, TOPIC, SQL = "OnsSqlConsumerGroup", "SqlTopic", "a > 5 AND b = 'x'"


def _frames(code: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    return [r for r in records if r.get("direction") == "c2s" and r.get("code_name") == code]


def _record(props: dict[str, str]) -> bytes:
    return encode_stored_message(topic=TOPIC, body=b"b", properties=properties_to_string(props))


def test_ali_ons_heartbeat_and_pulls() -> None:
    manager = ConsumerFilterManager(BrokerConfig())
    heartbeat = HeartbeatData.decode(_frames("HEART_BEAT")[0]["body_utf8"].encode())
    (consumer,) = heartbeat.consumer_data_set
    manager.register(consumer.group_name, consumer.subscription_data_set)
    registered = manager.get(TOPIC, GROUP)
    assert registered is not None and registered.expression == SQL
    assert manager.get(f"%RETRY%{GROUP}", GROUP) is None  # its retry subscription is TAG "*"

    pulls = [
        PullMessageRequestHeader.from_ext_fields(f["header"]["extFields"]) for f in _frames("PULL_MESSAGE")
    ]
    sql_pulls = [h for h in pulls if h.topic == TOPIC]
    assert sql_pulls and {h.sys_flag for h in sql_pulls} == {6, 7}
    for header in sql_pulls:
        sub = SubscriptionData(
            TOPIC, header.subscription or "", sub_version=header.sub_version, expression_type="SQL92"
        )
        assert manager.check_pull(header, sub, from_request=True) is None
        matcher = manager.record_filter_for(header, sub)
        assert matcher is not None
        # the three messages the fixture's producer sent: (7, x), (3, x), (abc, x)
        got = [matcher(_record({"a": a, "b": "x"}), 0) for a in ("7", "3", "abc")]
        assert got == [True, False, False]
    retry = next(h for h in pulls if h.topic.startswith("%RETRY%"))
    retry_filter = manager.record_filter_for(retry, SubscriptionData(retry.topic, "*"))
    assert retry_filter is not None  # filter_support_retry (on by default): the group has a filter
    assert retry_filter(_record({"RETRY_TOPIC": TOPIC, "a": "9", "b": "x"}), 0)
    assert not retry_filter(_record({"RETRY_TOPIC": TOPIC, "a": "1", "b": "x"}), 0)
    assert retry_filter(_record({"RETRY_TOPIC": "OtherTopic", "a": "1"}), 0)  # no filter there


def test_pull_checks_in_rocketmq_order() -> None:
    manager = ConsumerFilterManager(BrokerConfig(enable_property_filter=False))
    header = PullMessageRequestHeader.from_ext_fields(_frames("PULL_MESSAGE")[0]["header"]["extFields"])
    sub = SubscriptionData(TOPIC, SQL, expression_type="SQL92")
    assert manager.check_pull(header, sub, from_request=True) == (
        ResponseCode.SYSTEM_ERROR,
        "The broker does not support consumer to filter message by SQL92",
    )
    header.subscription = "a >"
    code, remark = manager.check_pull(header, sub, from_request=True) or (0, "")
    assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "column 4" in remark  # before the switch
    assert manager.check_pull(header, sub, from_request=False) == (
        ResponseCode.FILTER_DATA_NOT_EXIST,
        "The broker's consumer filter data is not exist!Your expression may be wrong!",
    )
    manager.register(GROUP, [SubscriptionData(TOPIC, SQL, sub_version=5, expression_type="SQL92")])
    header.sub_version = 6
    assert (manager.check_pull(header, sub, from_request=False) or (0,))[
        0
    ] == ResponseCode.FILTER_DATA_NOT_LATEST


def test_a_group_back_on_tags_drops_its_filter() -> None:
    manager = ConsumerFilterManager(BrokerConfig())
    manager.register(GROUP, [SubscriptionData(TOPIC, SQL, sub_version=5, expression_type="SQL92")])
    manager.register(GROUP, [SubscriptionData(TOPIC, "*", sub_version=4)])  # older: ignored
    assert manager.get(TOPIC, GROUP) is not None
    manager.register(GROUP, [SubscriptionData(TOPIC, "*", sub_version=6)])
    assert manager.get(TOPIC, GROUP) is None
    retry = PullMessageRequestHeader.from_ext_fields(
        next(f for f in _frames("PULL_MESSAGE") if "%RETRY%" in f["header"]["extFields"]["topic"])["header"][
            "extFields"
        ]
    )
    assert manager.record_filter_for(retry, SubscriptionData(retry.topic, "*")) is None  # the tag path
