"""Push consumers: ``AsyncPushConsumer`` (asyncio) and ``PushConsumer`` (blocking facade).

Mirrors RocketMQ's ``DefaultMQPushConsumer`` / ``DefaultMQPushConsumerImpl`` + ``RebalancePushImpl``:
subscribe (``*`` or ``tagA || tagB``; CLUSTERING also subscribes ``%RETRY%<group>``),
rebalance (20 s timer and NOTIFY_CONSUMER_IDS_CHANGED), long-polling pulls with ProcessQueue flow
control, concurrent or orderly consumption (:class:`MessageListenerOrderly` or
``register_message_listener(fn, orderly=True)``: queues locked on the broker, one task per queue in
offset order), send-back of failures, offsets on the broker (CLUSTERING) or in a local file
(BROADCASTING), and ``shutdown(timeout)`` that stops pulling, drains in-flight messages, persists
offsets, unlocks orderly queues and unregisters.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from tidemq.client.config import PushConsumerConfig, apply_overrides
from tidemq.client.consumer.client_check import check_client_in_broker
from tidemq.client.consumer.consume_orderly import ConsumeMessageOrderlyService
from tidemq.client.consumer.consume_service import ConsumeMessageConcurrentlyService
from tidemq.client.consumer.handoff import InstanceLocks, QueueHandoff
from tidemq.client.consumer.listener import (
    MessageListener,
    MessageListenerOrderly,
    default_consume_timestamp,
    parse_consume_timestamp,
)
from tidemq.client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
)
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull_api import PullAPIWrapper
from tidemq.client.consumer.pull_core import PullRequest
from tidemq.client.consumer.pull_kernel import PushPullKernel
from tidemq.client.consumer.rebalance import Rebalancer
from tidemq.client.consumer.selector import Selector, subscription_of
from tidemq.client.consumer.start_offset import compute_pull_from_where
from tidemq.client.facade import BlockingFacade
from tidemq.client.instance import ClientInstance
from tidemq.errors import ClientError, TideMQError
from tidemq.protocol.body import ConsumeFromWhere, ConsumerData, ConsumeType, MessageModel
from tidemq.protocol.filter import build_subscription_data
from tidemq.protocol.message import Message, MessageConst, MessageExt, MessageQueue
from tidemq.protocol.topic import is_retry_topic, retry_topic, validate_group, validate_topic

__all__ = ["AsyncPushConsumer", "PushConsumer", "QueueListener"]

log = logging.getLogger(__name__)

QueueListener = Callable[[str, set[MessageQueue], set[MessageQueue]], Any]
"""``listener(topic, mq_all, mq_divided)``: told when this member's queues of a topic change
(RocketMQ's ``MessageQueueListener``)."""


class AsyncPushConsumer:
    """An asyncio push consumer. Mirrors ``DefaultMQPushConsumer``.

    Args:
        config: a :class:`PushConsumerConfig`; keyword ``overrides`` replace its fields.

    Example::

        consumer = AsyncPushConsumer(namesrv_addr=addr, consumer_group="cg")
        consumer.subscribe("TopicA", "TagA || TagB")
        consumer.register_message_listener(on_messages)   # def/async def on_messages(msgs, ctx)
        await consumer.start()
        ...
        await consumer.shutdown(timeout=10)
    """

    def __init__(self, config: PushConsumerConfig | None = None, **overrides: Any) -> None:
        self.config = apply_overrides(config, PushConsumerConfig, overrides)
        if self.config.message_model == "BROADCASTING" and not self.config.instance_name:
            # Java keeps instance name DEFAULT for BROADCASTING, so the local offsets path
            # (<dir>/<client id>/<group>) is the same after a restart.
            self.config.instance_name = "DEFAULT"
        self.client_id = self.config.build_client_id()
        self.group_name = self.config.consumer_group
        self._subscriptions: dict[str, Selector] = {}
        self._listener: MessageListener | MessageListenerOrderly | None = None
        self.consume_orderly = False
        self.queue_listener: QueueListener | None = None
        self._instance: ClientInstance | None = None
        self._offset_store: OffsetStore | None = None
        self._consume: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None = None
        self.kernel = PushPullKernel(self)
        """Pulls every owned queue (``pull_kernel.py``)."""
        self.rebalancer = Rebalancer(
            self.group_name,
            self.client_id,
            self.config.message_model,
            self.config.allocate_message_queue_strategy,
            self,
        )
        self._pull_api: PullAPIWrapper | None = None
        self._running = False
        self._background: set[asyncio.Task[None]] = set()
        self._handoff: QueueHandoff | None = None
        """Clean hand-off of queues (CLUSTERING with ``clean_handoff``; ``handoff.py``)."""
        self._trace: Any = None  # AsyncTraceDispatcher while enable_msg_trace (tidemq.client.trace)

    # -- setup -------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        """Subscribe to ``topic`` with ``"*"``, ``"tagA || tagB"`` or a :class:`MessageSelector`
        (``MessageSelector.by_sql("a > 5")``: the broker filters by properties). Mirrors ``subscribe``.

        May be called after start(); the next heartbeat and rebalance pick it up.
        """
        validate_topic(topic)
        self._subscriptions[topic] = expression
        self.rebalancer.subscription_inner[topic] = subscription_of(topic, expression)
        inst = self._instance
        if inst is not None:

            async def after_subscribe() -> None:
                await inst.update_topic_route_info_from_name_server(topic)
                await inst.send_heartbeat_to_all_brokers()
                inst.rebalance_immediately()

            task = asyncio.ensure_future(after_subscribe())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``. Mirrors ``unsubscribe``."""
        self._subscriptions.pop(topic, None)
        self.rebalancer.subscription_inner.pop(topic, None)

    def register_message_listener(
        self, listener: MessageListener | MessageListenerOrderly | Any, *, orderly: bool = False
    ) -> None:
        """Set the listener: ``listener(msgs, context)``; a coroutine function runs on the loop, a
        plain function in the pool.

        Concurrent (default): returns a ``ConsumeConcurrentlyStatus`` (None = success), context
        ``ConsumeConcurrentlyContext``. Orderly (``orderly=True`` or a :class:`MessageListenerOrderly`):
        returns a ``ConsumeOrderlyStatus`` (None = SUCCESS), context ``ConsumeOrderlyContext``.
        Must be called before :meth:`start`.
        """
        self._listener = listener
        self.consume_orderly = orderly or isinstance(listener, MessageListenerOrderly)

    @property
    def instance(self) -> ClientInstance:
        """The running ClientInstance. Raises ClientError before start()."""
        if self._instance is None:
            raise ClientError("the consumer is not started; call start() first")
        return self._instance

    @property
    def pull_api(self) -> PullAPIWrapper:
        """The group's :class:`PullAPIWrapper`. Raises ClientError before start()."""
        if self._pull_api is None:
            raise ClientError("the consumer is not started; call start() first")
        return self._pull_api

    @property
    def offset_store(self) -> OffsetStore:
        """The offset store (remote for CLUSTERING, local file for BROADCASTING)."""
        if self._offset_store is None:
            raise ClientError("the consumer is not started; call start() first")
        return self._offset_store

    @property
    def is_broadcasting(self) -> bool:
        return self.config.message_model == "BROADCASTING"

    @property
    def running(self) -> bool:
        """True from :meth:`start` until :meth:`shutdown` begins."""
        return self._running

    @property
    def consume_service(self) -> ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None:
        """The consume service (None before :meth:`start`)."""
        return self._consume

    def assignment(self) -> list[MessageQueue]:
        """Queues this member owns now (sorted)."""
        return self.rebalancer.owned()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Validate, join the ClientInstance, heartbeat and rebalance at once. Mirrors ``start``.

        Raises:
            ClientError: no listener, no subscription, or an invalid setting (named).
        """
        if self._running:
            return
        cfg = self.config
        cfg.validate()
        validate_group(self.group_name)
        if self._listener is None:
            raise ClientError("register a message listener before start()")
        if not self._subscriptions:
            raise ClientError("subscribe to at least one topic before start()")
        if cfg.consume_from_where == "CONSUME_FROM_TIMESTAMP":
            parse_consume_timestamp(cfg.consume_timestamp or default_consume_timestamp())
        if not self.is_broadcasting:
            rt = retry_topic(self.group_name)
            self.rebalancer.subscription_inner[rt] = build_subscription_data(rt, "*")
        inst = ClientInstance.acquire(cfg)
        inst.rebalance_interval = cfg.rebalance_interval
        if self.is_broadcasting:
            self._offset_store = LocalFileOffsetStore(cfg.offset_store_dir, self.client_id, self.group_name)
        else:
            self._offset_store = RemoteBrokerOffsetStore(inst, self.group_name)
        await self._offset_store.load()
        locks = InstanceLocks(inst, self.group_name, self.client_id)
        listener = self._listener
        if cfg.enable_msg_trace:  # message trace: SubBefore / SubAfter records around the listener
            from tidemq.client.trace import start_consume_trace

            self._trace, listener = await start_consume_trace(cfg, self.group_name, listener)
        self._consume, self._handoff = _consume_service(self, listener, locks)
        inst.register_consumer(self.group_name, self)
        self._instance = inst
        self.kernel.loop = inst.loop
        self._pull_api = PullAPIWrapper(inst, self.group_name)
        self.kernel.start(self._consume)
        self._running = True
        await inst.start()
        if isinstance(self._consume, ConsumeMessageOrderlyService):
            self._consume.start()
        if self._handoff is not None:
            self._handoff.start_renewal(self.rebalancer.owned)
        for topic in self.subscribed_topics():
            await inst.update_topic_route_info_from_name_server(topic)
        try:  # SQL92 subscriptions: the broker must accept them (CHECK_CLIENT_CONFIG)
            await check_client_in_broker(
                inst, self.group_name, self.client_id, self.rebalancer.subscription_inner.values()
            )
        except ClientError:
            await self.shutdown()
            raise
        await inst.send_heartbeat_to_all_brokers()
        await _refresh_missing_routes(self.instance, self.rebalancer)
        inst.rebalance_immediately()

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Stop pulling, drain in-flight messages (up to ``timeout`` s), persist offsets, unregister.

        Mirrors ``DefaultMQPushConsumerImpl.shutdown``.
        """
        if not self._running:
            return
        self._running = False
        await self.kernel.shutdown(timeout)
        if self._consume is not None and not await self._consume.shutdown(timeout):
            log.warning("%s: in-flight messages did not finish within %gs", self.group_name, timeout)
        await self.persist_consumer_offset(oneway=False)
        if isinstance(self._consume, ConsumeMessageOrderlyService) and not self.is_broadcasting:
            await self._consume.unlock_all(set(self.rebalancer.process_queue_table), oneway=False)
        if self._handoff is not None:  # committed above: the next owners start right there
            await self._handoff.stop_renewal()
            await self._handoff.unlock_all(self.rebalancer.owned())
        self.rebalancer.destroy()
        trace, self._trace = self._trace, None
        if trace is not None:
            await trace.shutdown()
        inst, self._instance = self._instance, None
        self.kernel.loop = None
        if inst is not None:
            await inst.unregister_consumer(self.group_name)

    async def __aenter__(self) -> AsyncPushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def suspend(self) -> None:
        """Pause pulling (resumed by :meth:`resume`)."""
        self.kernel.paused = True

    def resume(self) -> None:
        """Resume pulling."""
        self.kernel.paused = False

    # -- ConsumerInner (called by the instance) ------------------------------------------------

    def subscribed_topics(self) -> set[str]:
        return set(self.rebalancer.subscription_inner)

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if topic in self.rebalancer.subscription_inner:
            self.rebalancer.topic_subscribe_info_table[topic] = set(mqs)

    def consumer_data(self) -> ConsumerData:
        cfg = self.config
        return ConsumerData(
            group_name=self.group_name,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=MessageModel(cfg.message_model),
            consume_from_where=ConsumeFromWhere(cfg.consume_from_where),
            subscription_data_set=list(self.rebalancer.subscription_inner.values()),
            unit_mode=False,
        )

    async def do_rebalance(self) -> None:
        if self._running and not self.kernel.paused:
            await _refresh_missing_routes(self.instance, self.rebalancer)
            await self.rebalancer.do_rebalance()

    async def persist_consumer_offset(self, *, oneway: bool = True) -> None:
        """Persist the offsets of owned queues. Mirrors ``persistConsumerOffset``."""
        if self._offset_store is None:
            return
        owned = set(self.rebalancer.process_queue_table)
        if oneway or self.is_broadcasting:
            await self._offset_store.persist_all(owned)
        else:
            for mq in sorted(owned):
                await self._offset_store.persist(mq)

    # -- RebalanceHost -------------------------------------------------------------------------

    async def find_consumer_id_list(self, topic: str) -> list[str]:
        return await self.instance.find_consumer_id_list(topic, self.group_name)

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        async def persist() -> None:
            await self.offset_store.persist(mq)
            self.offset_store.remove_offset(mq)

        self.kernel.stop_lane(mq, pq)
        if isinstance(self._consume, ConsumeMessageOrderlyService) and not self.is_broadcasting:
            return await self._consume.remove_process_queue(mq, pq, persist)
        if self._handoff is not None:  # clean hand-off: drain, commit, then let the next owner in
            await self._handoff.drain(mq, pq)
            await persist()
            await self._handoff.unlock_all([mq])
            return True
        await persist()
        return True

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        self.offset_store.remove_offset(mq)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Mirrors ``RebalancePushImpl.computePullFromWhereWithException`` (protocol.md §7.5)."""
        return await compute_pull_from_where(self.instance, self.offset_store, self.config, mq)

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        """New subscription version + heartbeat (Java's ``RebalancePushImpl.messageQueueChanged``)."""
        sub = self.rebalancer.subscription_inner.get(topic)
        if sub is not None:
            sub.sub_version = int(time.time() * 1000)
        await self.instance.send_heartbeat_to_all_brokers()
        if self.queue_listener is not None and not is_retry_topic(topic):
            try:
                self.queue_listener(topic, set(mq_all), set(mq_divided))
            except Exception:
                log.exception("queue listener failed")

    def dispatch_pull_request(self, requests: list[PullRequest]) -> None:
        """Start pulling newly assigned queues. Mirrors ``RebalancePushImpl.dispatchPullRequest``.
        With queue lanes on, a new queue's first pull is a lane's (its first answer hands a backlog
        back to the loop, as any lane's does): the first messages after a start or a rebalance do
        not wait for a loop pull to find them and a lane thread and connection to be started."""
        self.kernel.dispatch(requests)

    # -- OrderlyConsumerHost --------------------------------------------------------------------

    def owned_process_queues(self) -> dict[MessageQueue, ProcessQueue]:
        """The live ``{queue: ProcessQueue}`` table of the rebalancer."""
        return self.rebalancer.process_queue_table

    # -- retries -------------------------------------------------------------------------------

    async def send_message_back(self, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK to the message's broker; on failure re-send a copy to
        ``%RETRY%<group>`` through the inner producer. Mirrors ``sendMessageBack``."""
        max_times = self.config.effective_max_reconsume_times
        try:
            addr = self.instance.find_broker_address_in_publish(msg.broker_name) or msg.store_host
            await self.instance.api.consumer_send_message_back(
                addr, msg, self.group_name, delay_level, max_times, self.config.mq_client_api_timeout
            )
            return True
        except TideMQError as exc:
            log.warning("send back of %s failed (%s); resending to the retry topic", msg.msg_id, exc)
        try:
            copy = Message(
                retry_topic(self.group_name), msg.body, flag=msg.flag, properties=dict(msg.properties)
            )
            copy.properties.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
            copy.properties.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, msg.topic)
            copy.properties[MessageConst.PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times + 1)
            copy.properties[MessageConst.PROPERTY_MAX_RECONSUME_TIMES] = str(max_times)
            copy.properties.pop(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, None)
            copy.delay_time_level = 3 + msg.reconsume_times
            producer = await self.instance.get_inner_producer()
            await producer.send(copy)
            return True
        except TideMQError as exc:
            log.warning("resending %s to the retry topic failed: %s", msg.msg_id, exc)
            return False


def _consume_service(
    consumer: AsyncPushConsumer, listener: Any, locks: InstanceLocks
) -> tuple[ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService, QueueHandoff | None]:
    """The consume service of ``consumer`` (orderly or concurrent) and, for concurrent CLUSTERING
    with ``clean_handoff``, its :class:`QueueHandoff`; sets the rebalancer's lock hook (orderly:
    own only locked queues; clean hand-off: wait for the old owner's release)."""
    cfg, rebalancer = consumer.config, consumer.rebalancer
    if consumer.consume_orderly:
        orderly = ConsumeMessageOrderlyService(
            consumer,
            listener,
            locks,
            consume_thread_max=cfg.consume_thread_max,
            consume_message_batch_max_size=cfg.consume_message_batch_max_size,
            suspend_current_queue_time_millis=cfg.suspend_current_queue_time_millis,
            max_reconsume_times=cfg.max_reconsume_times,
        )
        if not consumer.is_broadcasting:
            rebalancer.lock_hook = orderly.lock
            rebalancer.lock_wait = cfg.handoff_timeout if cfg.clean_handoff else 0.0
        return orderly, None
    concurrent = ConsumeMessageConcurrentlyService(
        consumer,
        listener,
        consume_thread_max=cfg.consume_thread_max,
        consume_message_batch_max_size=cfg.consume_message_batch_max_size,
    )
    if not cfg.clean_handoff or consumer.is_broadcasting:
        return concurrent, None
    handoff = QueueHandoff(locks, cfg.handoff_timeout)
    rebalancer.lock_hook = handoff.lock
    rebalancer.lock_wait = cfg.handoff_timeout
    rebalancer.lock_required = False
    return concurrent, handoff


async def _refresh_missing_routes(inst: ClientInstance, rebalancer: Rebalancer) -> None:
    """Ask for the routes of subscribed topics not routed yet: ``%RETRY%<group>`` becomes routable
    only after the first heartbeat created it."""
    for topic in list(rebalancer.subscription_inner):
        if not rebalancer.topic_subscribe_info_table.get(topic):
            await inst.update_topic_route_info_from_name_server(topic)


class PushConsumer(BlockingFacade[AsyncPushConsumer]):
    """Blocking push consumer. Mirrors ``DefaultMQPushConsumer``; runs :class:`AsyncPushConsumer`
    on a background loop. Sync listeners run in a pool of ``consume_thread_max`` threads.

    Example::

        consumer = PushConsumer(namesrv_addr=addr, consumer_group="cg")
        consumer.subscribe("TopicA", "*")
        consumer.register_message_listener(lambda msgs, ctx: print(msgs))
        consumer.start()
        ...
        consumer.shutdown()
    """

    def __init__(self, config: PushConsumerConfig | None = None, **overrides: Any) -> None:
        super().__init__(AsyncPushConsumer(config, **overrides))

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        """See :meth:`AsyncPushConsumer.subscribe`."""
        self._call(self._core.subscribe, topic, expression)

    def register_message_listener(
        self, listener: MessageListener | MessageListenerOrderly | Any, *, orderly: bool = False
    ) -> None:
        """See :meth:`AsyncPushConsumer.register_message_listener`."""
        self._core.register_message_listener(listener, orderly=orderly)

    def set_queue_listener(self, listener: QueueListener) -> None:
        """Called (on the loop thread) as ``listener(topic, mq_all, mq_divided)`` when queues change."""
        self._core.queue_listener = listener

    def shutdown(self, timeout: float = 10.0) -> None:
        """See :meth:`AsyncPushConsumer.shutdown`; also stops the background loop when unused."""
        self._shutdown_core(lambda: self._core.shutdown(timeout), timeout + 30)

    def assignment(self) -> list[MessageQueue]:
        """See :meth:`AsyncPushConsumer.assignment`."""
        result: list[MessageQueue] = self._call(self._core.assignment)
        return result
