"""tidemq.client: RocketMQ-compatible producers and consumers (asyncio core, blocking facades).

``Producer`` / ``AsyncProducer``, ``PushConsumer`` / ``AsyncPushConsumer``, ``PullConsumer`` /
``AsyncPullConsumer``; allocation strategies in ``tidemq.client.consumer.allocate``.
"""

from tidemq.client.config import ClientConfig, ProducerConfig, PullConsumerConfig, PushConsumerConfig
from tidemq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
)
from tidemq.client.consumer.pull import AsyncPullConsumer, PullConsumer
from tidemq.client.consumer.push import AsyncPushConsumer, PushConsumer
from tidemq.client.producer.producer import AsyncProducer, Producer, split_batch
from tidemq.client.producer.selector import SelectMessageQueueByHash, SelectMessageQueueByRandom

__all__ = [
    "AsyncProducer",
    "AsyncPullConsumer",
    "AsyncPushConsumer",
    "ClientConfig",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyStatus",
    "Producer",
    "ProducerConfig",
    "PullConsumer",
    "PullConsumerConfig",
    "PushConsumer",
    "PushConsumerConfig",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "split_batch",
]
