"""Which broker of the group a consumer should pull from next (``suggestWhichBrokerId``).

Mirrors the suggestion part of RocketMQ 4.9's ``PullMessageProcessor.processRequest``:

* ``slaveReadEnable`` off (RocketMQ's default): always the master (brokerId 0);
* on, and the pull read messages further from the commit log's end than
  ``accessMessageInMemoryMaxRatio`` % of RAM (``GetMessageResult.suggestPullingFromSlave``, which
  the store computes): the group's ``whichBrokerWhenConsumeSlowly`` (default 1, the first slave);
* on, otherwise: the group's ``brokerId`` (default 0, the master).

tidemq adds one rule on a slave: a pull that reached the end of what the slave holds (nothing
found, or ``nextBeginOffset`` = the queue's max offset) suggests the group's ``brokerId`` even when
the batch counted as far behind. The consumer is no longer behind *the slave*, and the master may
hold more: this is what sends a consumer back to the master when the slave lags. (RocketMQ gets
the same effect from the ratio rule alone as long as ``accessMessageInMemoryMaxRatio`` > 0.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemq.protocol.topic import MASTER_ID
from tidemq.store.results import GetMessageStatus

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.store.results import GetMessageResult


def suggest_which_broker_id(broker: Broker, group: str, result: GetMessageResult) -> int:
    """The brokerId to put in ``PullMessageResponseHeader.suggestWhichBrokerId`` for this pull."""
    if not broker.config.slave_read_enable:
        return MASTER_ID
    cfg = broker.subscription_group_manager.subscription_group_table.get(group)
    at_slave_end = broker.config.is_slave and (
        result.status is not GetMessageStatus.FOUND or result.next_begin_offset >= result.max_offset
    )
    if result.suggest_pulling_from_slave and not at_slave_end:
        return cfg.which_broker_when_consume_slowly if cfg is not None else 1
    return cfg.broker_id if cfg is not None else MASTER_ID
