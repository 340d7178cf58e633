"""Broker-initiated requests a push consumer answers: offset reset and running info.

Mirrors the consumer side of RocketMQ's ``ClientRemotingProcessor``:

* RESET_CONSUMER_CLIENT_OFFSET (220, oneway, sent by the broker after an admin's
  INVOKE_BROKER_TO_RESET_OFFSET): :func:`reset_offset` is ``MQClientInstance.resetOffset``:
  suspend, drop the topic's process queues named in the table, wait for in-flight consumption
  (10 s in Java), write the new offsets and persist them to the broker, forget the queues, resume
  and rebalance (which re-adds them from the new offsets).
* GET_CONSUMER_RUNNING_INFO (307, relayed by the broker for mqadmin ``consumerStatus``):
  :func:`consumer_running_info` builds the ``ConsumerRunningInfo`` body (``properties``,
  ``subscriptionSet``, ``mqTable`` of ``ProcessQueueInfo``, ``statusTable``, ``jstack``), with
  ``mqTable`` in fastjson's object-key form, which is what the Java admin tools parse.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import weakref
from typing import Any, Protocol

from tidemq.client.consumer.consume_rates import ConsumeRates
from tidemq.client.consumer.offset_store import OffsetStore, ReadOffsetType
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.rebalance import Rebalancer
from tidemq.protocol.body import fastjson_dumps
from tidemq.protocol.message import MessageQueue

__all__ = ["RESET_OFFSET_WAIT", "ResettableConsumer", "consumer_running_info", "reset_offset"]

log = logging.getLogger(__name__)

RESET_OFFSET_WAIT = 10.0
"""Seconds between dropping the queues and writing the new offsets (Java sleeps 10 s)."""


class ResettableConsumer(Protocol):
    """What these requests need from a push consumer (``AsyncPushConsumer`` fits)."""

    group_name: str
    config: Any
    rebalancer: Rebalancer

    @property
    def offset_store(self) -> OffsetStore: ...

    def suspend(self) -> None: ...

    def resume(self) -> None: ...

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool: ...


async def reset_offset(
    consumer: ResettableConsumer,
    topic: str,
    offset_table: dict[MessageQueue, int],
    *,
    wait: float = RESET_OFFSET_WAIT,
) -> list[MessageQueue]:
    """Move ``consumer``'s offsets of ``topic`` to ``offset_table``. Mirrors ``MQClientInstance.resetOffset``.

    Args:
        consumer: the group's push consumer in this client.
        topic: the topic being reset (queues of other topics in the table are ignored).
        offset_table: queue -> new offset (the RESET_CONSUMER_CLIENT_OFFSET body).
        wait: seconds to let in-flight consumption of the dropped queues finish (10 s like Java).

    Returns:
        The owned queues whose offsets were reset (and persisted to the broker).
    """
    table = consumer.rebalancer.process_queue_table
    consumer.suspend()
    done: list[MessageQueue] = []
    try:
        for mq, pq in list(table.items()):
            if mq.topic == topic and mq in offset_table:
                pq.dropped = True
                pq.clear()
        await asyncio.sleep(wait)
        for mq in [mq for mq in list(table) if mq.topic == topic and mq in offset_table]:
            try:
                consumer.offset_store.update_offset(mq, offset_table[mq], False)
                pq = table[mq]
                await consumer.remove_unnecessary_message_queue(mq, pq)
                table.pop(mq, None)
                done.append(mq)
            except Exception:
                log.exception("reset offset of %s in group %s failed", mq, consumer.group_name)
    finally:
        consumer.resume()
    log.info("reset offsets of group %s on %s: %s", consumer.group_name, topic, offset_table)
    return done


def _process_queue_info(pq: ProcessQueue, commit_offset: int) -> dict[str, Any]:
    """Mirrors ``ProcessQueue.fillProcessQueueInfo`` (``ProcessQueueInfo``, Java field names)."""
    cached = pq.messages()
    return {
        "cachedMsgCount": pq.msg_count,
        "cachedMsgMaxOffset": cached[-1].queue_offset if cached else 0,
        "cachedMsgMinOffset": cached[0].queue_offset if cached else 0,
        "cachedMsgSizeInMiB": pq.msg_size // (1024 * 1024),
        "commitOffset": commit_offset,
        "droped": pq.dropped,
        "lastConsumeTimestamp": pq.last_consume_timestamp,
        "lastLockTimestamp": pq.last_lock_timestamp,
        "lastPullTimestamp": pq.last_pull_timestamp,
        "locked": pq.locked,
        "transactionMsgCount": 0,
        "transactionMsgMaxOffset": 0,
        "transactionMsgMinOffset": 0,
        "tryUnlockTimes": pq.try_unlock_times,
    }


async def consumer_running_info(
    consumer: ResettableConsumer, namesrv_addr: str, client_version: str = ""
) -> bytes:
    """The GET_CONSUMER_RUNNING_INFO body of ``consumer``. Mirrors ``DefaultMQPushConsumerImpl.consumerRunningInfo``.

    ``properties`` holds the consumer's settings (camelCase, as strings) and the ``PROP_*`` keys
    Java adds; ``statusTable`` has one ``ConsumeStatus`` per subscribed topic with the consumer's
    consume rates and listener time (``consume_rates.py``; over all its topics). ``pullRT`` and
    ``pullTPS`` are not measured by tidemq's client and are left out (Java reads them as 0).
    """
    cfg = consumer.config
    orderly = bool(getattr(consumer, "consume_orderly", False))
    props: dict[str, str] = {}
    if dataclasses.is_dataclass(cfg):
        for f in dataclasses.fields(cfg):
            value = getattr(cfg, f.name)
            if isinstance(value, str | int | float | bool) or value is None:
                props[_camel(f.name)] = "" if value is None else str(value)
    props.update(
        {
            "PROP_NAMESERVER_ADDR": namesrv_addr,
            "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
            "PROP_CONSUME_ORDERLY": str(orderly).lower(),
            "PROP_THREADPOOL_CORE_SIZE": str(getattr(cfg, "consume_thread_min", 1)),
            "PROP_CONSUMER_START_TIMESTAMP": str(
                getattr(consumer, "start_timestamp", int(time.time() * 1000))
            ),
            "PROP_CLIENT_VERSION": client_version,
        }
    )
    mq_table: dict[MessageQueue, dict[str, Any]] = {}
    for mq in sorted(consumer.rebalancer.process_queue_table):
        pq = consumer.rebalancer.process_queue_table[mq]
        commit = await consumer.offset_store.read_offset(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE)
        mq_table[mq] = _process_queue_info(pq, commit)
    subs = sorted(consumer.rebalancer.subscription_inner.values(), key=lambda s: s.topic)
    status = {s.topic: _consume_status(consumer) for s in subs}
    body = {
        "jstack": "",
        "mqTable": mq_table,
        "properties": props,
        "statusTable": status,
        "subscriptionSet": [s.to_json() for s in subs],
    }
    return fastjson_dumps(body)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_rates: weakref.WeakKeyDictionary[object, ConsumeRates] = weakref.WeakKeyDictionary()
"""The rate windows of each consumer asked for its running info (kept as long as the consumer)."""


def _consume_status(consumer: ResettableConsumer) -> dict[str, float | int]:
    """``ConsumeStatus`` of ``consumer``: ok / failed rates, the listener's mean time (ms) and the
    failures of the last hour (``consume_rates.py``)."""
    service = getattr(consumer, "consume_service", None)  # a lite pull consumer has none
    totals = (
        int(getattr(service, "consumed_ok", 0)),
        int(getattr(service, "consumed_failed", 0)),
        int(getattr(service, "consume_calls", 0)),
        float(getattr(service, "consume_rt_ms", 0.0)),
    )
    rates = _rates.get(consumer)
    if rates is None:
        started_ms = int(getattr(consumer, "start_timestamp", 0) or 0)
        age = max(time.time() - started_ms / 1000, 0.0) if started_ms else 0.0
        rates = _rates[consumer] = ConsumeRates(time.monotonic() - age)
    return rates.figures(totals)
