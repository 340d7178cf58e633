"""ClientInstance: the shared core of every producer and consumer with one client id.

Mirrors RocketMQ's ``MQClientInstance``. One per client id and event loop; it owns the
``RemotingClient`` + ``ClientAPI``, the route and broker-address tables, and the timers:

* route refresh from the name server every ``poll_name_server_interval`` (30 s),
* heartbeat to every broker every ``heartbeat_broker_interval`` (30 s),
* consumer offsets persisted every ``persist_consumer_offset_interval`` (5 s),
* rebalance every ``rebalance_interval`` (20 s) and at once on NOTIFY_CONSUMER_IDS_CHANGED.

Everything runs on one asyncio loop; producers and consumers register themselves and the
instance shuts down when the last one leaves. The blocking facades get their loop from
:func:`acquire_loop_thread` (one ``LoopThread`` per client id, reference counted).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tidemq.client.api import ClientAPI
from tidemq.client.config import ClientConfig
from tidemq.client.instance_routes import RouteTables
from tidemq.client.producer.request import PUSH_REPLY_MESSAGE_TO_CLIENT, ReplyMessageProcessor
from tidemq.client.route import (
    TopicPublishInfo,
)
from tidemq.errors import ClientError, TideMQError
from tidemq.protocol.body import ConsumerData, HeartbeatData, ProducerData, TopicRouteData
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.topic import MASTER_ID
from tidemq.remoting.channel import Channel
from tidemq.remoting.client import RemotingClient
from tidemq.remoting.loop import LoopThread

__all__ = ["ClientInstance", "ConsumerInner", "ProducerInner", "acquire_loop_thread", "release_loop_thread"]

log = logging.getLogger(__name__)


class ConsumerInner(Protocol):
    """What a consumer exposes to its instance. Mirrors ``MQConsumerInner``."""

    group_name: str

    def consumer_data(self) -> ConsumerData:
        """This consumer's part of a heartbeat."""
        ...

    def subscribed_topics(self) -> set[str]:
        """Topics whose routes the instance must keep fresh."""
        ...

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        """New readable queues of a subscribed topic."""
        ...

    async def do_rebalance(self) -> None:
        """One rebalance round."""
        ...

    async def persist_consumer_offset(self) -> None:
        """Persist the offsets of owned queues."""
        ...


class ProducerInner(Protocol):
    """What a producer exposes to its instance. Mirrors ``MQProducerInner``."""

    group_name: str

    def publish_topics(self) -> set[str]:
        """Topics this producer has sent to."""
        ...

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        """New writable queues of a topic."""
        ...


class ClientInstance(RouteTables):
    """The asyncio core shared by the producers and consumers of one client id. Mirrors ``MQClientInstance``.

    Use :meth:`acquire` (not the constructor) so one client id maps to one instance. The route and
    broker-address tables and their lookups are :class:`~tidemq.client.instance_routes.RouteTables`.

    Args:
        config: the client settings of the first producer/consumer of this client id.
        client_id: ``ip@instance``.
    """

    _instances: dict[str, ClientInstance] = {}
    _registry_lock = threading.Lock()

    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config
        self.client_id = client_id
        self.loop = asyncio.get_running_loop()
        self.remoting = RemotingClient()
        if config.access_key and config.secret_key:  # ACL: sign every request (docs/acl.md)
            from tidemq.acl import AclClientRPCHook, SessionCredentials

            creds = SessionCredentials(config.access_key, config.secret_key, config.security_token)
            self.remoting.register_rpc_hook(AclClientRPCHook(creds))
        self.api = ClientAPI(self.remoting, language=config.language)
        self.namesrv_addrs = config.namesrv_addrs()
        self._namesrv_index = random.randrange(len(self.namesrv_addrs))
        self.producers: dict[str, ProducerInner] = {}
        self.consumers: dict[str, ConsumerInner] = {}
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._rebalance_wakeup = asyncio.Event()
        self._started = False
        self._route_lock = asyncio.Lock()
        self._heartbeat_lock = asyncio.Lock()
        self._heartbeat_soon: asyncio.Task[None] | None = None
        self._heartbeat_soon_at = 0.0
        self._rebalance_lock = asyncio.Lock()
        self.rebalance_interval = 20.0
        #: seconds RESET_CONSUMER_CLIENT_OFFSET waits for in-flight consumption (Java: 10 s)
        self.reset_offset_wait = 10.0
        self.inner_producer: Any = None  # AsyncProducer for send-back fallbacks, created lazily

    # -- registry ----------------------------------------------------------------------------

    @classmethod
    def acquire(cls, config: ClientConfig) -> ClientInstance:
        """The instance for ``config``'s client id on the running loop (created on first use).

        Raises:
            ClientError: an instance with this client id already runs on another event loop.
        """
        cid = config.build_client_id()
        loop = asyncio.get_running_loop()
        with cls._registry_lock:
            inst = cls._instances.get(cid)
            if inst is not None and inst.loop is not loop:
                if inst.loop.is_closed() or not (inst.producers or inst.consumers):
                    inst = None
                else:
                    raise ClientError(
                        f"client id {cid} is already in use on another event loop; set a distinct instance_name"
                    )
            if inst is None:
                inst = cls(config, cid)
                cls._instances[cid] = inst
            return inst

    def register_producer(self, group: str, producer: ProducerInner) -> None:
        """Add a producer group. Raises ClientError if the group is already registered here."""
        if group in self.producers:
            raise ClientError(f"producer group {group} is already running in client {self.client_id}")
        self.producers[group] = producer

    def register_consumer(self, group: str, consumer: ConsumerInner) -> None:
        """Add a consumer group. Raises ClientError if the group is already registered here."""
        if group in self.consumers:
            raise ClientError(
                f"consumer group {group} is already running in client {self.client_id}; "
                "use another instance_name for a second member in one process"
            )
        self.consumers[group] = consumer

    async def unregister_producer(self, group: str) -> None:
        """Remove a producer group and tell every broker (UNREGISTER_CLIENT)."""
        if self.producers.pop(group, None) is not None:
            await self._unregister_client(producer_group=group)
        await self._shutdown_if_unused()

    async def unregister_consumer(self, group: str) -> None:
        """Remove a consumer group and tell every broker (UNREGISTER_CLIENT)."""
        if self.consumers.pop(group, None) is not None:
            await self._unregister_client(consumer_group=group)
        await self._shutdown_if_unused()

    async def _unregister_client(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        for addr in self._all_broker_addrs():
            try:
                await self.api.unregister_client(
                    addr,
                    self.client_id,
                    producer_group=producer_group,
                    consumer_group=consumer_group,
                    timeout=self.config.mq_client_api_timeout,
                )
            except TideMQError as exc:
                log.warning("unregister %s from %s failed: %s", self.client_id, addr, exc)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Register the server-initiated request handlers and start the timers (idempotent)."""
        if self._started:
            return
        self._started = True
        self._closing = False
        self.remoting.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, _ClientProcessor(self))
        self.remoting.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, _ClientProcessor(self))
        self.remoting.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, _ClientProcessor(self))
        self.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, _ClientProcessor(self))
        self.remoting.register_processor(
            PUSH_REPLY_MESSAGE_TO_CLIENT, ReplyMessageProcessor()
        )  # request-reply
        cfg = self.config
        self.spawn(
            self._every(cfg.poll_name_server_interval, self.update_topic_route_info_from_name_server, 0.01)
        )
        self.spawn(self._every(cfg.heartbeat_broker_interval, self.send_heartbeat_to_all_brokers, 1.0))
        self.spawn(self._every(cfg.persist_consumer_offset_interval, self.persist_all_consumer_offsets, 10.0))
        self.spawn(self._rebalance_service())

    def spawn(self, coro: Awaitable[None]) -> None:
        """Run ``coro`` as a task of this instance, cancelled by :meth:`shutdown`."""
        self._tasks.append(asyncio.ensure_future(coro))

    async def _every(self, interval: float, fn: Callable[[], Awaitable[Any]], first_delay: float) -> None:
        await asyncio.sleep(first_delay)
        while True:
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scheduled task %s failed", getattr(fn, "__name__", fn))
            await asyncio.sleep(interval)

    async def _rebalance_service(self) -> None:
        """Mirrors ``RebalanceService``: wait up to the interval (or a wakeup), rebalance. Ends at
        :meth:`shutdown` even when the cancel meets a wakeup (Python 3.11's ``wait_for`` then
        returns the wakeup and drops the cancel)."""
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rebalance_wakeup.wait(), self.rebalance_interval)
            if self._closing:
                return
            self._rebalance_wakeup.clear()
            try:
                await self.do_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("rebalance failed")

    def rebalance_immediately(self) -> None:
        """Wake the rebalance service now (``MQClientInstance.rebalanceImmediately``)."""
        self._rebalance_wakeup.set()

    async def _shutdown_if_unused(self) -> None:
        if self.producers or self.consumers:
            return
        if self.inner_producer is not None and not self.consumers:
            inner, self.inner_producer = self.inner_producer, None
            await inner.shutdown()
            if self.producers or self.consumers:
                return
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stop the timers and close connections. Mirrors ``MQClientInstance.shutdown``."""
        with self._registry_lock:
            if self._instances.get(self.client_id) is self:
                del self._instances[self.client_id]
        self._closing = True
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.remoting.close()
        self._started = False

    # -- heartbeats / rebalance / offsets -------------------------------------------------------

    def prepare_heartbeat_data(self) -> HeartbeatData:
        """This client's producers and consumers. Mirrors ``prepareHeartbeatData``."""
        return HeartbeatData(
            client_id=self.client_id,
            producer_data_set=[ProducerData(group_name=g) for g in self.producers],
            consumer_data_set=[c.consumer_data() for c in self.consumers.values()],
        )

    def heartbeat_soon(self, min_interval: float = 1.0) -> None:
        """Send HEART_BEAT to every broker now, in the background, unless one went out less than
        ``min_interval`` s ago or is still under way.

        Called when a broker answers SUBSCRIPTION_NOT_EXIST / SUBSCRIPTION_NOT_LATEST to a pull: a
        restarted broker forgets the group's consumers until their next heartbeat, which would
        otherwise be up to ``heartbeat_broker_interval`` (30 s) away. RocketMQ's client waits for
        that timer; this one re-registers at once.
        """
        now = time.monotonic()
        if not self._started or now - self._heartbeat_soon_at < min_interval:
            return
        if self._heartbeat_soon is not None and not self._heartbeat_soon.done():
            return
        self._heartbeat_soon_at = now
        self._heartbeat_soon = asyncio.ensure_future(self.send_heartbeat_to_all_brokers())

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT to every known broker address (masters only when there are no consumers)."""
        if not self.producers and not self.consumers:
            return
        async with self._heartbeat_lock:
            data = self.prepare_heartbeat_data()
            for name, addrs in list(self.broker_addr_table.items()):
                for broker_id, addr in addrs.items():
                    if not self.consumers and broker_id != MASTER_ID:
                        continue
                    try:
                        await self.api.send_heartbeat(addr, data, self.config.mq_client_api_timeout)
                    except TideMQError as exc:
                        log.warning("heartbeat to %s (%s) failed: %s", name, addr, exc)

    async def do_rebalance(self) -> None:
        """One rebalance round for every consumer. Mirrors ``MQClientInstance.doRebalance``."""
        async with self._rebalance_lock:
            for c in list(self.consumers.values()):
                try:
                    await c.do_rebalance()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("rebalance of group %s failed", c.group_name)

    async def persist_all_consumer_offsets(self) -> None:
        """Persist every consumer's offsets. Mirrors ``persistAllConsumerOffset``."""
        for c in list(self.consumers.values()):
            await c.persist_consumer_offset()

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP on one broker of ``topic``. Mirrors ``findConsumerIdList``."""
        route = self.topic_route_table.get(topic)
        names = sorted(bd.broker_name for bd in route.broker_datas) if route else []
        if not names:
            return []
        addr = self.find_broker_address_in_subscribe(random.choice(names))
        if addr is None:
            return []
        try:
            return await self.api.get_consumer_id_list_by_group(
                addr, group, self.config.mq_client_api_timeout
            )
        except TideMQError as exc:
            log.warning("getting the consumer list of %s from %s failed: %s", group, addr, exc)
            return []

    # OffsetBackend for RemoteBrokerOffsetStore
    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET at ``mq``'s broker."""
        addr = await self.find_broker_addr(mq.broker_name, topic=mq.topic)
        return await self.api.query_consumer_offset(addr, group, mq, self.config.mq_client_api_timeout)

    async def update_consumer_offset(
        self, group: str, mq: MessageQueue, offset: int, *, oneway: bool
    ) -> None:
        """UPDATE_CONSUMER_OFFSET at ``mq``'s broker."""
        addr = await self.find_broker_addr(mq.broker_name, topic=mq.topic)
        await self.api.update_consumer_offset(
            addr, group, mq, offset, self.config.mq_client_api_timeout, oneway=oneway
        )

    async def get_inner_producer(self) -> Any:
        """The ``CLIENT_INNER_PRODUCER`` used for send-back fallbacks (started on first use)."""
        if self.inner_producer is None:
            from tidemq.client.producer.producer import AsyncProducer

            producer = AsyncProducer(
                namesrv_addr=self.config.namesrv_addr,
                producer_group="CLIENT_INNER_PRODUCER",
                client_ip=self.config.client_ip,
                instance_name=self.config.instance_name,
                unit_name=self.config.unit_name,
            )
            await producer.start()
            self.inner_producer = producer
        return self.inner_producer


class _ClientProcessor:
    """Server-initiated requests. Mirrors ``ClientRemotingProcessor`` (NOTIFY_CONSUMER_IDS_CHANGED)."""

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            log.info(
                "receive broker's notification[%s], the consumer group: %s changed, rebalance immediately",
                channel.remote_addr,
                request.ext_fields.get("consumerGroup"),
            )
            self.instance.rebalance_immediately()
            return None
        if request.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            self._reset_offset(request)
            return None
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return await self._running_info(request)
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self._check_transaction_state(channel, request)
            return None
        return RemotingCommand.create_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
        )

    def _check_transaction_state(self, channel: Channel, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (39, oneway): hand the half message to the producer of its
        ``PGROUP`` (``ClientRemotingProcessor.checkTransactionState``); answers come as END_TRANSACTION."""
        from tidemq.protocol.headers import CheckTransactionStateRequestHeader
        from tidemq.protocol.message_codec import decode_message

        try:
            header = CheckTransactionStateRequestHeader.from_command(request)
            msg, _ = decode_message(request.body or b"")
        except TideMQError as exc:
            log.warning("bad CHECK_TRANSACTION_STATE from %s: %s", channel.remote_addr, exc)
            return
        group = msg.get_property("PGROUP") or ""
        producer = self.instance.producers.get(group)
        check = getattr(producer, "check_transaction_state", None)
        if check is None:
            log.debug("CHECK_TRANSACTION_STATE for group %r: no transactional producer here", group)
            return
        check(channel.remote_addr, msg, header)

    def _reset_offset(self, request: RemotingCommand) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: reset in the background (Java answers nothing)."""
        from tidemq.client.consumer.remote_admin import reset_offset
        from tidemq.protocol.body import ResetOffsetBody

        # header: topic, group, timestamp[, isForce] (isForce is absent in some brokers' form)
        topic = str(request.ext_fields.get("topic", ""))
        group = str(request.ext_fields.get("group", ""))
        try:
            table = ResetOffsetBody.decode(request.body or b"{}").offset_table
        except TideMQError as exc:
            log.warning("bad RESET_CONSUMER_CLIENT_OFFSET body from %s: %s", group, exc)
            return
        consumer = self.instance.consumers.get(group)
        if not topic or consumer is None or not hasattr(consumer, "rebalancer"):
            log.info("[reset-offset] consumer does not exist. group=%s topic=%s", group, topic)
            return
        log.info("invoke reset offset operation from broker. group=%s topic=%s", group, topic)

        async def run() -> None:
            await reset_offset(consumer, topic, table, wait=self.instance.reset_offset_wait)  # type: ignore[arg-type]
            self.instance.rebalance_immediately()

        self.instance.spawn(run())

    async def _running_info(self, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO: the ConsumerRunningInfo body, or SYSTEM_ERROR for an unknown group."""
        from tidemq import __version__
        from tidemq.client.consumer.remote_admin import consumer_running_info

        group = request.ext_fields.get("consumerGroup", "")
        consumer = self.instance.consumers.get(group)
        if consumer is None or not hasattr(consumer, "rebalancer"):
            return RemotingCommand.create_response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer"
            )
        body = await consumer_running_info(
            consumer,  # type: ignore[arg-type]
            self.instance.config.namesrv_addr,
            f"tidemq-{__version__}",
        )
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = body
        return response


# -- loop threads for the blocking facades ------------------------------------------------------

_loop_threads: dict[str, tuple[LoopThread, int]] = {}
_loop_threads_lock = threading.Lock()


def acquire_loop_thread(client_id: str) -> LoopThread:
    """The background loop for ``client_id`` (one per client id, reference counted)."""
    with _loop_threads_lock:
        entry = _loop_threads.get(client_id)
        if entry is None or not entry[0].is_running:
            lt = LoopThread(f"tidemq-client-{client_id}")
            _loop_threads[client_id] = (lt, 1)
            return lt
        _loop_threads[client_id] = (entry[0], entry[1] + 1)
        return entry[0]


def release_loop_thread(client_id: str) -> None:
    """Drop one reference; the last one stops the loop thread."""
    with _loop_threads_lock:
        entry = _loop_threads.get(client_id)
        if entry is None:
            return
        lt, refs = entry
        if refs > 1:
            _loop_threads[client_id] = (lt, refs - 1)
            return
        del _loop_threads[client_id]
    lt.stop()
