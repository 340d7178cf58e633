"""Telemetry settings: the server's answer to a client's ``Settings``.

Mirrors RocketMQ's ``GrpcClientSettingsManager`` / ``ClientActivity.processClientSettings``
(rocketmq5.md §4): the client's settings merged with the server's. Producers get an exponential
backoff (Node throws on any other strategy), ``max_body_size`` = the broker's ``maxMessageSize``
(0 would fail every send) and ``validate_message_type``; consumers get ``receive_batch_size`` 32,
``long_polling_timeout`` 20 s, ``fifo`` from the group's ``consumeMessageOrderly`` and a customized
backoff of ``retryMaxTimes + 1`` attempts over the delay levels from ``1s``. Every answer carries
``metric{on: false}`` (Python <= 5.1.0 needs it). Pure code.
"""

from __future__ import annotations

from typing import Any, Final

from tidemq.proxy import codes
from tidemq.proxy.pb import d

PRODUCER, PUSH_CONSUMER, SIMPLE_CONSUMER = 1, 2, 3
"""``apache.rocketmq.v2.ClientType`` values."""
RECEIVE_BATCH_SIZE: Final = 32
LONG_POLLING_TIMEOUT_S: Final = 20
CONSUMER_BACKOFF_S: Final = (
    1,
    5,
    10,
    30,
    60,
    120,
    180,
    240,
    300,
    360,
    420,
    480,
    540,
    600,
    1200,
    1800,
    3600,
    7200,
)
"""The delay levels from ``1s`` (level 3 on), as RocketMQ's consumer retry policy lists them."""


def merge(
    client: Any,
    *,
    max_body_size: int,
    fifo: bool = False,
    max_attempts: int = 17,
    long_polling_ms: int = LONG_POLLING_TIMEOUT_S * 1000,
) -> Any:
    """The settings to answer ``client`` with.

    Args:
        client: the client's ``Settings``.
        max_body_size: the broker's ``maxMessageSize`` (bytes).
        fifo: the consumer group's ``consumeMessageOrderly``.
        max_attempts: deliveries before the dead-letter queue (``retryMaxTimes + 1``).
        long_polling_ms: the consumers' long polling (PushConsumers poll this long).

    Raises:
        ProxyError: BAD_REQUEST when the settings hold neither publishing nor subscription, or
            UNRECOGNIZED_CLIENT_TYPE.
    """
    out = d.Settings()
    out.CopyFrom(client)
    kind = out.WhichOneof("pub_sub")
    if kind is None:
        raise codes.ProxyError(codes.BAD_REQUEST, "settings hold neither publishing nor subscription")
    out.metric.Clear()
    out.metric.on = False
    if kind == "publishing":
        # blank topics are skipped, never a failed stream (rocketmq-clients #1032)
        topics = [t for t in out.publishing.topics if t.name.strip()]
        del out.publishing.topics[:]
        out.publishing.topics.extend(topics)
        out.publishing.max_body_size = max_body_size
        out.publishing.validate_message_type = True
        policy = out.backoff_policy
        policy.Clear()
        policy.max_attempts = 3
        policy.exponential_backoff.initial.FromMilliseconds(10)
        policy.exponential_backoff.max.FromMilliseconds(1000)
        policy.exponential_backoff.multiplier = 2.0
        return out
    sub = out.subscription
    sub.receive_batch_size = RECEIVE_BATCH_SIZE
    sub.long_polling_timeout.FromMilliseconds(long_polling_ms)
    sub.fifo = fifo
    policy = out.backoff_policy
    policy.Clear()
    policy.max_attempts = max_attempts
    for seconds in CONSUMER_BACKOFF_S:
        policy.customized_backoff.next.add().FromSeconds(seconds)
    return out
