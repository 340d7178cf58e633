"""tidemq.client: RocketMQ-compatible producers and consumers (asyncio core, blocking facades).

``Producer`` / ``AsyncProducer``, ``PushConsumer`` / ``AsyncPushConsumer``, ``PullConsumer`` /
``AsyncPullConsumer``, ``SimpleConsumer`` / ``AsyncSimpleConsumer`` (RocketMQ 5 POP); allocation
strategies in ``tidemq.client.consumer.allocate``.

The names below are imported on first use (PEP 562): a process that needs one module of the package
(the admin client and the Spark connector use :mod:`tidemq.client.api` only) does not load every
client. Each Spark query starts a new Python process for its source's driver side, which imports
the connector; the producer and the consumers would be 65 ms of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidemq.client.config import ClientConfig, ProducerConfig, PullConsumerConfig, PushConsumerConfig
    from tidemq.client.consumer.listener import (
        ConsumeConcurrentlyContext,
        ConsumeConcurrentlyStatus,
        ConsumeOrderlyStatus,
    )
    from tidemq.client.consumer.pull import AsyncPullConsumer, PullConsumer
    from tidemq.client.consumer.push import AsyncPushConsumer, PushConsumer
    from tidemq.client.consumer.selector import MessageSelector
    from tidemq.client.consumer.simple import AsyncSimpleConsumer, SimpleConsumer, SimpleConsumerConfig
    from tidemq.client.producer.producer import AsyncProducer, Producer, split_batch
    from tidemq.client.producer.request import RequestTimeoutError, create_reply_message
    from tidemq.client.producer.selector import SelectMessageQueueByHash, SelectMessageQueueByRandom
    from tidemq.client.producer.transaction import (
        AsyncTransactionProducer,
        LocalTransactionState,
        TransactionListener,
        TransactionProducer,
        TransactionSendResult,
    )

_MODULES = {
    "tidemq.client.config": ("ClientConfig", "ProducerConfig", "PullConsumerConfig", "PushConsumerConfig"),
    "tidemq.client.consumer.listener": (
        "ConsumeConcurrentlyContext",
        "ConsumeConcurrentlyStatus",
        "ConsumeOrderlyStatus",
    ),
    "tidemq.client.consumer.pull": ("AsyncPullConsumer", "PullConsumer"),
    "tidemq.client.consumer.push": ("AsyncPushConsumer", "PushConsumer"),
    "tidemq.client.consumer.selector": ("MessageSelector",),
    "tidemq.client.consumer.simple": ("AsyncSimpleConsumer", "SimpleConsumer", "SimpleConsumerConfig"),
    "tidemq.client.producer.producer": ("AsyncProducer", "Producer", "split_batch"),
    "tidemq.client.producer.request": ("RequestTimeoutError", "create_reply_message"),
    "tidemq.client.producer.selector": ("SelectMessageQueueByHash", "SelectMessageQueueByRandom"),
    "tidemq.client.producer.transaction": (
        "AsyncTransactionProducer",
        "LocalTransactionState",
        "TransactionListener",
        "TransactionProducer",
        "TransactionSendResult",
    ),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "AsyncProducer",
    "AsyncPullConsumer",
    "AsyncPushConsumer",
    "AsyncSimpleConsumer",
    "AsyncTransactionProducer",
    "ClientConfig",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyStatus",
    "LocalTransactionState",
    "MessageSelector",
    "Producer",
    "ProducerConfig",
    "PullConsumer",
    "PullConsumerConfig",
    "PushConsumer",
    "PushConsumerConfig",
    "RequestTimeoutError",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SimpleConsumer",
    "SimpleConsumerConfig",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "create_reply_message",
    "split_batch",
]


def __getattr__(name: str) -> Any:
    """Import an exported name's module on first access (then it is a plain module attribute)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'tidemq.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
