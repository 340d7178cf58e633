"""Topic/group validation, retry and DLQ names, permission bits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.errors import ClientError
from tidemq.protocol import topic as t


@pytest.mark.parametrize("name", ["TopicA", "%RETRY%group-1", "a|b_c", "x" * 127, "TBW102"])
def test_valid_topics(name: str) -> None:
    """Names matching ^[%|a-zA-Z0-9_-]+$ up to 127 characters are accepted."""
    assert t.check_topic(name) is None
    assert t.validate_topic(name) == name


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("", "blank"),
        ("   ", "blank"),
        (None, "blank"),
        ("a b", "contains illegal characters"),
        ("topic.name", "contains illegal characters"),
        ("tópico", "contains illegal characters"),
        ("a\n", "contains illegal characters"),
        ("x" * 128, "longer than topic max length 127"),
    ],
)
def test_invalid_topics(name: str | None, text: str) -> None:
    """Invalid names raise ClientError (and check_topic returns the same text)."""
    with pytest.raises(ClientError, match=text):
        t.validate_topic(name)
    assert text in (t.check_topic(name) or "")


@given(st.text(max_size=140))
def test_validation_matches_the_regex(name: str) -> None:
    """Property: valid iff the Java regex matches and the length is <= 127."""
    import re

    expected = bool(re.fullmatch(r"[%|a-zA-Z0-9_-]+", name)) and len(name) <= 127
    assert (t.check_topic(name) is None) is expected


def test_group_validation() -> None:
    """Groups follow the same characters, up to 255."""
    assert t.validate_group("G_1") == "G_1"
    with pytest.raises(ClientError, match="illegal characters"):
        t.validate_group("G 1")
    assert t.check_group("g" * 256) is not None


def test_retry_and_dlq_topics() -> None:
    """%RETRY%<group> and %DLQ%<group> are built and recognised."""
    assert t.retry_topic("G") == "%RETRY%G" and t.is_retry_topic("%RETRY%G")
    assert t.dlq_topic("G") == "%DLQ%G" and t.is_dlq_topic("%DLQ%G")
    assert not t.is_retry_topic("G") and t.group_of_retry_topic("%RETRY%G") == "G"
    assert t.group_of_retry_topic("T") is None


def test_system_topics() -> None:
    """System topics and forbidden send targets are recognised."""
    assert t.is_system_topic(t.SCHEDULE_TOPIC) and t.is_system_topic("rmq_sys_x")
    assert t.is_not_allowed_send_topic(t.SCHEDULE_TOPIC)
    assert not t.is_not_allowed_send_topic(t.AUTO_CREATE_TOPIC_KEY)
    assert t.AUTO_CREATE_TOPIC_KEY == "TBW102" and t.MASTER_ID == 0 and t.DEFAULT_CLUSTER == "DefaultCluster"


@pytest.mark.parametrize(
    ("perm", "text", "r", "w", "x"),
    [
        (7, "RWX", True, True, True),
        (6, "RW-", True, True, False),
        (4, "R--", True, False, False),
        (2, "-W-", False, True, False),
    ],
)
def test_perm_name(perm: int, text: str, r: bool, w: bool, x: bool) -> None:
    """Perm bits: READ 4, WRITE 2, INHERIT 1."""
    assert t.PermName.perm_to_string(perm) == text
    assert (t.PermName.is_readable(perm), t.PermName.is_writeable(perm), t.PermName.is_inherited(perm)) == (
        r,
        w,
        x,
    )
    assert t.PermName.READ | t.PermName.WRITE == 6


def test_one_home_for_internal_topics_and_system_groups() -> None:
    """Every internal topic the broker creates is hidden from users' lists; a user's topic is not."""
    internal = [
        t.TRANS_HALF_TOPIC,
        t.TRANS_OP_HALF_TOPIC,
        t.TRANS_CHECK_MAX_TIME_TOPIC,
        t.TIMER_TOPIC,
        "rmq_sys_REVIVE_LOG_DefaultCluster",
        t.TRACE_TOPIC,
        "DefaultCluster_REPLY_TOPIC",
        t.retry_topic("g"),
        t.dlq_topic("g"),
        t.SCHEDULE_TOPIC,
        t.AUTO_CREATE_TOPIC_KEY,
    ]
    assert all(t.is_internal_topic(x) for x in internal)
    assert t.is_internal_topic("broker-a", frozenset({"broker-a"}))
    assert not t.is_internal_topic("TopicA") and not t.is_internal_topic("broker-a")
    assert all(t.is_system_group(g) for g in t.BROKER_BUILTIN_GROUPS)
    assert t.is_system_group("CID_RMQ_SYS_REVIVE_GROUP") and t.is_system_group(t.CLIENT_INNER_PRODUCER_GROUP)
    assert not t.is_system_group("cg-orders")
