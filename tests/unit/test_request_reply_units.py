"""Request-reply's pure parts: MessageUtil.createReplyMessage and the 326 decoding."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidemq.client.producer.request import ReplyMessageProcessor, create_reply_message
from tidemq.errors import ClientError
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import Message
from tidemq.protocol.message_codec import compress_body


def test_create_reply_message_copies_the_correlation_properties() -> None:
    req = Message("Rpc", b"x")
    req.properties.update(
        {"CLUSTER": "C1", "CORRELATION_ID": "id-1", "REPLY_TO_CLIENT": "1.2.3.4@9", "TTL": "3000", "a": "b"}
    )
    reply = create_reply_message(req, b"answer")
    assert reply.topic == "C1_REPLY_TOPIC"
    assert reply.body == b"answer"
    assert reply.properties == {
        "MSG_TYPE": "reply",
        "CORRELATION_ID": "id-1",
        "REPLY_TO_CLIENT": "1.2.3.4@9",
        "TTL": "3000",
    }


def test_create_reply_message_needs_the_cluster() -> None:
    with pytest.raises(ClientError, match=r"property\[CLUSTER\] is null"):
        create_reply_message(Message("Rpc", b"x"), b"y")


def test_push_reply_decoding_decompresses_and_stamps_arrival() -> None:
    fields = {
        "topic": "C1_REPLY_TOPIC",
        "queueId": "0",
        "sysFlag": "1",
        "flag": "0",
        "bornTimestamp": "5",
        "storeTimestamp": "7",
        "bornHost": "10.0.0.1:5000",
        "storeHost": "10.0.0.2:10911",
        "properties": "CORRELATION_ID\x01id-1\x02MSG_TYPE\x01reply",
        "reconsumeTimes": "0",
    }
    cmd = RemotingCommand.create_request(326, fields, compress_body(b"z" * 5000))
    msg = ReplyMessageProcessor.decode_reply(cmd, 1234)
    assert msg.body == b"z" * 5000
    assert msg.get_property("ARRIVE_TIME") == "1234"
    assert (msg.born_host, msg.store_host, msg.store_timestamp) == ("10.0.0.1:5000", "10.0.0.2:10911", 7)


def test_broker_creates_the_reply_topic_and_on_request_the_trace_topic(tmp_path: Path) -> None:
    from tidemq.broker.config import BrokerConfig
    from tidemq.broker.topic_config import TopicConfigManager

    plain = TopicConfigManager(BrokerConfig(broker_cluster_name="C9"), tmp_path / "a.json")
    reply = plain.select_topic_config("C9_REPLY_TOPIC")
    assert reply is not None and (reply.read_queue_nums, reply.write_queue_nums, reply.perm) == (1, 1, 6)
    assert plain.select_topic_config("RMQ_SYS_TRACE_TOPIC") is None
    traced = TopicConfigManager(BrokerConfig(trace_topic_enable=True), tmp_path / "b.json")
    trace = traced.select_topic_config("RMQ_SYS_TRACE_TOPIC")
    assert trace is not None and trace.write_queue_nums == 1
