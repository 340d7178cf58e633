"""Name checks at every broker request that can create state.

Topic and group names arrive from the network (send, heartbeat, send-back, create topic,
subscription group, offset commits); before anything is created from one it is checked as
RocketMQ's ``TopicValidator`` / ``Validators.checkGroup`` do: a topic is 1..127 characters of
``[%|a-zA-Z0-9_-]``, a group 1..255 of them. A consumer group whose retry topic
(``%RETRY%<group>``) would break the topic rule (groups of 121..255 characters) is accepted, but
no retry topic is created for it and its send-backs are refused up front, so a delayed retry can
never be parked with a destination the store will refuse (the schedule-service stall of issue 10).
A heartbeat's client id (``ip@instance``, kept per connection and written in log lines) is 1..255
printable characters: RocketMQ does not check it, but a fuzzer's 70,000-character client ids made
8.6 of the 10.5 MB its run wrote to the broker log.

Each function returns ``None`` when the name is fine, else the reason (the remark of the
SYSTEM_ERROR response). Pure functions; no I/O.
"""

from __future__ import annotations

from tidemq.protocol.topic import check_group, check_topic, retry_topic

__all__ = [
    "CLIENT_ID_MAX_LENGTH",
    "check_client_id",
    "check_group_name",
    "check_retry_topic_of",
    "check_topic_name",
    "is_valid_group",
    "is_valid_topic",
]


def check_topic_name(topic: object) -> str | None:
    """Why ``topic`` cannot name a topic (not a str, blank, bad characters, > 127), or ``None``."""
    if not isinstance(topic, str):
        return f"The specified topic must be a string, got {type(topic).__name__}."
    return check_topic(topic)


def check_group_name(group: object) -> str | None:
    """Why ``group`` cannot name a consumer/producer group (not a str, blank, bad characters,
    > 255), or ``None``."""
    if not isinstance(group, str):
        return f"the specified group must be a string, got {type(group).__name__}"
    return check_group(group)


CLIENT_ID_MAX_LENGTH = 255
"""Longest client id accepted in a heartbeat (characters)."""


def check_client_id(client_id: object) -> str | None:
    """Why ``client_id`` cannot be a heartbeat's client id (not a str, blank, longer than
    :data:`CLIENT_ID_MAX_LENGTH`, control characters), or ``None``."""
    if not isinstance(client_id, str):
        return f"the client id must be a string, got {type(client_id).__name__}"
    if not client_id.strip():
        return "the client id is blank"
    if len(client_id) > CLIENT_ID_MAX_LENGTH:
        return f"the client id is longer than {CLIENT_ID_MAX_LENGTH} characters ({len(client_id)})"
    if not client_id.isprintable():
        return "the client id contains control characters"
    return None


def check_retry_topic_of(group: str) -> str | None:
    """Why ``%RETRY%<group>`` cannot be a topic (a group longer than 120 characters), or ``None``."""
    problem = check_group_name(group)
    if problem is not None:
        return problem
    if check_topic(retry_topic(group)) is not None:
        return (
            f"the retry topic of group [{group[:32]}...] would be longer than 127 characters: "
            "use a group name of at most 120 characters to have retries"
        )
    return None


def is_valid_topic(topic: object) -> bool:
    """``check_topic_name(topic) is None``."""
    return check_topic_name(topic) is None


def is_valid_group(group: object) -> bool:
    """``check_group_name(group) is None``."""
    return check_group_name(group) is None
