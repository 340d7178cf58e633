"""RocketMQ 5.3's recall handle (``RecallMessageHandle.HandleV1``) and delete key."""

from __future__ import annotations

import base64

import pytest

from tidemq.broker.config import BrokerConfig
from tidemq.broker.recall import attach_recall_handle
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.recall import RecallHandle, RecallHandleError, delete_key


def test_handle_is_javas_url_safe_base64_of_five_fields() -> None:
    handle = RecallHandle.for_timer("T", "broker-a", 1_700_000_000_999, "ID1")
    text = handle.encode()
    assert text == base64.urlsafe_b64encode(b"v1 T broker-a 1700000001000 ID1").decode()
    assert RecallHandle.decode(text) == handle and handle.timestamp_ms == 1_700_000_001_000
    assert RecallHandle.decode(text.rstrip("=")) == handle  # Java's decoder takes it unpadded too
    # Java splits on spaces and ignores a sixth field
    assert RecallHandle.decode(base64.urlsafe_b64encode(b"v1 T b 5 id extra").decode()).message_id == "id"


@pytest.mark.parametrize(
    "text", ["", "!!!", base64.b64encode(b"v2 T b 1 id").decode(), base64.b64encode(b"v1 T b 1").decode()]
)
def test_bad_handles_are_refused_with_rocketmqs_words(text: str) -> None:
    with pytest.raises(RecallHandleError, match="recall handle is invalid"):
        RecallHandle.decode(text)


def test_delete_key_and_a_non_numeric_timestamp() -> None:
    assert delete_key("T", "U") == "T+U"
    assert RecallHandle("T", "b", "soon", "U").timestamp_ms == -1


def test_only_a_stored_timer_send_gets_a_handle() -> None:
    def answer() -> RemotingCommand:
        return RemotingCommand.create_response(0, None, {"msgId": "x", "queueOffset": "3"})

    cfg = BrokerConfig(broker_name="b")
    timer = {"TIMER_OUT_MS": "1000", "REAL_TOPIC": "T", "UNIQ_KEY": "U"}
    got = attach_recall_handle(answer(), timer, cfg).ext_fields["recallHandle"]
    assert RecallHandle.decode(got) == RecallHandle("T", "b", "1001", "U")
    for props in (
        {"UNIQ_KEY": "U"},  # not a timer message
        {**timer, "REAL_TOPIC": "%RETRY%g"},  # RocketMQ skips retry topics
        {**timer, "TIMER_DEL_UNIQKEY": "T+V"},  # a cancellation itself
    ):
        assert "recallHandle" not in attach_recall_handle(answer(), props, cfg).ext_fields
    refused = RemotingCommand.create_response(13, "no", {})
    assert "recallHandle" not in attach_recall_handle(refused, timer, cfg).ext_fields
