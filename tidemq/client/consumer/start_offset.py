"""Where a newly owned queue starts: the I/O around :func:`decide_pull_from_where`.

Mirrors ``RebalancePushImpl.computePullFromWhereWithException`` (protocol.md §7.5), shared by the
push consumer and the lite pull consumer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tidemq.client.consumer.listener import (
    decide_pull_from_where,
    default_consume_timestamp,
    parse_consume_timestamp,
)
from tidemq.client.consumer.offset_store import OffsetStore, ReadOffsetType
from tidemq.errors import TideMQError
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.topic import is_retry_topic

if TYPE_CHECKING:
    from tidemq.client.config import PushConsumerConfig
    from tidemq.client.instance import ClientInstance

log = logging.getLogger(__name__)


async def compute_pull_from_where(
    instance: ClientInstance, offset_store: OffsetStore, config: PushConsumerConfig, mq: MessageQueue
) -> int:
    """The queue offset to start pulling ``mq`` from, or -1 to skip it this rebalance round.

    Reads the stored offset (QUERY_CONSUMER_OFFSET or the local file), then applies
    ``config.consume_from_where``: GET_MAX_OFFSET for LAST_OFFSET on a fresh queue,
    SEARCH_OFFSET_BY_TIMESTAMP (``config.consume_timestamp``, default 30 min ago) for TIMESTAMP.
    Network or broker errors are logged and give -1 (retried next round), as in RocketMQ.
    """
    last = await offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
    decision = decide_pull_from_where(
        config.consume_from_where, last, is_retry_topic=is_retry_topic(mq.topic)
    )
    try:
        if decision.kind == "offset":
            return decision.offset
        if decision.kind == "max_offset":
            return await instance.max_offset(mq, config.mq_client_api_timeout)
        if decision.kind == "timestamp":
            ts = parse_consume_timestamp(config.consume_timestamp or default_consume_timestamp())
            return await instance.search_offset(mq, ts, config.mq_client_api_timeout)
    except TideMQError as exc:
        log.warning("computing the start offset of %s failed: %s", mq, exc)
    return -1
