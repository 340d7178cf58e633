"""Producers: ``AsyncProducer`` (asyncio) and ``Producer`` (blocking facade over the same core).

Mirrors RocketMQ's ``DefaultMQProducer`` / ``DefaultMQProducerImpl``: sync send with
``retry_times_when_send_failed`` (2) retries on another queue/broker within one
``send_msg_timeout`` (3 s) budget; async and oneway sends; sends to a chosen queue or through a
``MessageQueueSelector``; batches (one SEND_BATCH_MESSAGE; :func:`split_batch` for lists over
4 MiB); ``UNIQ_KEY`` message ids; zlib for bodies of at least 4 KiB; topic auto-creation
through ``TBW102``. Errors are typed: ``NoRouteError``, ``BrokerError`` (code, remark, broker
address), ``RemotingTimeoutError``, ``ClientError`` for bad messages.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tidemq.client import query
from tidemq.client.config import ProducerConfig, apply_overrides
from tidemq.client.direct import DirectPool
from tidemq.client.facade import BlockingFacade
from tidemq.client.instance import ClientInstance
from tidemq.client.producer.encode import BATCH_ITEM_HEAD, BATCH_ITEM_OVERHEAD, U16, SendEncoder
from tidemq.client.producer.fault import MQFaultStrategy
from tidemq.client.producer.selector import SelectorLike, select_queue
from tidemq.client.query import QueryResult
from tidemq.client.route import TopicPublishInfo, route_to_publish_info
from tidemq.errors import (
    BrokerError,
    ClientError,
    NoRouteError,
    ProtocolError,
    RemotingError,
    RemotingTimeoutError,
)
from tidemq.protocol.message import (
    Message,
    MessageExt,
    MessageQueue,
    SendResult,
    properties_to_string,
)
from tidemq.protocol.message_codec import (
    MAX_PROPERTIES_BYTES,
)
from tidemq.protocol.topic import is_retry_topic, validate_topic

__all__ = ["AsyncProducer", "Producer", "batch_record", "split_batch"]

_RETRY_CODES = {
    1,
    14,
    16,
    17,
    204,
    205,
}  # SYSTEM_ERROR, SERVICE_NOT_AVAILABLE, NO_PERMISSION, TOPIC_NOT_EXIST, ...


def batch_record(body: bytes, properties: str, flag: int = 0) -> bytes:
    """One message of a SEND_BATCH_MESSAGE body (protocol.md §5.6): the bytes
    :meth:`AsyncProducer.prepare_batch` appends for a message with this body, flag and properties
    text (``properties_to_string`` of its properties, ``UNIQ_KEY`` included). For
    :meth:`AsyncProducer.send_batch_records`.

    Raises:
        ClientError: empty body.
        ProtocolError: properties longer than 32767 bytes.
    """
    size = len(body)
    if not size:
        raise ClientError("message body is empty")
    raw = properties.encode()
    if len(raw) > MAX_PROPERTIES_BYTES:
        raise ProtocolError(f"properties are {len(raw)} bytes, more than {MAX_PROPERTIES_BYTES}")
    return b"".join(
        (BATCH_ITEM_HEAD.pack(22 + size + len(raw), 0, 0, flag, size), body, U16.pack(len(raw)), raw)
    )


def split_batch(msgs: Sequence[Message], max_bytes: int = 4 * 1024 * 1024) -> list[list[Message]]:
    """Split ``msgs`` into consecutive batches whose encoded bodies stay within ``max_bytes``.

    The size of one item is its batch-body record (20 + body + 2 + properties bytes, protocol.md
    §5.6) plus room for the ``UNIQ_KEY`` property the producer adds.

    Raises:
        ClientError: a single message is larger than ``max_bytes``.
    """
    batches: list[list[Message]] = []
    current: list[Message] = []
    size = 0
    for msg in msgs:
        item = BATCH_ITEM_OVERHEAD + len(msg.body) + len(properties_to_string(msg.properties).encode()) + 48
        if item > max_bytes:
            raise ClientError(f"message of {item} bytes does not fit in a batch of at most {max_bytes} bytes")
        if current and size + item > max_bytes:
            batches.append(current)
            current, size = [], 0
        current.append(msg)
        size += item
    if current:
        batches.append(current)
    return batches


class SendAttempts:
    """The retry policy of one default send, sans I/O. Mirrors the loop of ``sendDefaultImpl``.

    Up to ``1 + retries`` attempts within ``timeout`` seconds in all; each attempt's queue comes
    from the producer's :class:`~tidemq.client.producer.fault.MQFaultStrategy` (another broker than
    the previous attempt's, and with ``send_latency_fault_enable`` none that recently failed or was
    slow); every attempt's latency is reported back to it (a failure isolates the broker).
    Transport errors and ``ClientError`` are retried; ``BrokerError`` only for retriable codes
    (SYSTEM_ERROR, SERVICE_NOT_AVAILABLE, NO_PERMISSION, TOPIC_NOT_EXIST, ...); ``NoRouteError``
    never. A non-OK store status (FLUSH_*/SLAVE_*) is retried only with
    ``retry_another_broker_when_not_store_ok``, and the last such result is returned when attempts
    run out (as Java).

    Usage: ``while (mq := a.next_queue(info)) is not None:`` send with ``a.remaining`` seconds;
    on an exception ``if not a.failed(exc, mq): raise``; on a result ``if a.succeeded(r, mq): return r``;
    after the loop ``return a.give_up()``.
    """

    __slots__ = (
        "_begin",
        "attempts",
        "brokers_sent",
        "count",
        "deadline",
        "last_broker",
        "last_exc",
        "last_result",
        "producer",
        "remaining",
        "timeout",
        "topic",
    )

    def __init__(self, producer: AsyncProducer, topic: str, timeout: float, retries: int) -> None:
        self.producer = producer
        self.topic = topic
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.attempts = 1 + max(0, retries)
        self.count = 0
        self.last_broker: str | None = None
        self.last_exc: Exception | None = None
        self.last_result: SendResult | None = None
        self.brokers_sent: list[str] = []
        self.remaining = timeout
        self._begin = 0.0

    def next_queue(self, info: TopicPublishInfo) -> MessageQueue | None:
        """The queue of the next attempt, or None when attempts or time ran out."""
        if self.count >= self.attempts:
            return None
        now = time.monotonic()
        self.remaining = self.deadline - now
        if self.remaining <= 0:
            return None
        mq = self.producer.fault_strategy.select_one_message_queue(info, self.last_broker)
        self.count += 1
        self.last_broker = mq.broker_name
        self.brokers_sent.append(mq.broker_name)
        self._begin = now
        return mq

    def _latency_ms(self) -> int:
        return int((time.monotonic() - self._begin) * 1000)

    def failed(self, exc: Exception, mq: MessageQueue) -> bool:
        """Record a failed attempt; True to try again, False when ``exc`` must be raised now."""
        if isinstance(exc, NoRouteError):
            return False
        self.producer.fault_strategy.update_fault_item(mq.broker_name, self._latency_ms(), True)
        if isinstance(exc, BrokerError) and not (exc.code in _RETRY_CODES and self.count < self.attempts):
            return False
        self.last_exc = exc
        return True

    def succeeded(self, result: SendResult, mq: MessageQueue) -> bool:
        """Record an answered attempt; True when ``result`` is final."""
        self.producer.fault_strategy.update_fault_item(mq.broker_name, self._latency_ms(), False)
        self.last_result = result
        return (
            result.send_status == "SEND_OK" or not self.producer.config.retry_another_broker_when_not_store_ok
        )

    def give_up(self) -> SendResult:
        """After the last attempt: the last non-OK result, else raise the last error (with a note
        naming the brokers tried) or a ``RemotingTimeoutError``."""
        if self.last_result is not None:
            return self.last_result
        exc = self.last_exc or RemotingTimeoutError(
            f"send to topic {self.topic} timed out after {self.timeout:g}s"
        )
        exc.add_note(
            f"send of topic {self.topic} failed after {len(self.brokers_sent)} attempt(s) within "
            f"{self.timeout:g}s, brokers tried: {self.brokers_sent}"
        )
        raise exc


class AsyncProducer:
    """An asyncio producer. Mirrors ``DefaultMQProducer``.

    Args:
        config: a :class:`ProducerConfig`; keyword ``overrides`` replace its fields
            (``AsyncProducer(namesrv_addr="127.0.0.1:9876", producer_group="g")``).

    Example::

        producer = AsyncProducer(namesrv_addr=addr, producer_group="pg")
        await producer.start()
        result = await producer.send(Message("TopicA", b"hello", tags="TagA"))
        await producer.shutdown()
    """

    def __init__(self, config: ProducerConfig | None = None, **overrides: Any) -> None:
        self.config = apply_overrides(config, ProducerConfig, overrides)
        self.client_id = self.config.build_client_id()
        self.group_name = self.config.producer_group
        self.encoder = SendEncoder(self.config, self.group_name)
        """Checks and encodes messages (UNIQ_KEY, compression, header, batch body)."""
        self._publish_table: dict[str, TopicPublishInfo] = {}
        self._instance: ClientInstance | None = None
        self.fault_strategy = MQFaultStrategy(
            send_latency_fault_enable=self.config.send_latency_fault_enable,
            latency_max=self.config.latency_max,
            not_available_duration=self.config.not_available_duration,
        )
        self.trace_hook: Any = None
        """A ``tidemq.client.trace.SendTraceHook`` while ``enable_msg_trace`` (set by :meth:`start`)."""

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the ClientInstance of this client id and start it.

        Raises:
            ClientError: bad group name, or the group already runs in this client.
        """
        if self._instance is not None:
            return
        if not self.group_name:
            raise ClientError("producer_group is required")
        inst = ClientInstance.acquire(self.config)
        inst.register_producer(self.group_name, self)
        self._instance = inst
        await inst.start()
        if self.config.enable_msg_trace:  # message trace: Pub records (tidemq.client.trace)
            from tidemq.client.trace import start_send_trace

            self.trace_hook = await start_send_trace(self.config, self.group_name)

    async def shutdown(self) -> None:
        """Unregister from every broker and stop the instance if nothing else uses it."""
        hook, self.trace_hook = self.trace_hook, None
        if hook is not None:
            await hook.dispatcher.shutdown()
        inst, self._instance = self._instance, None
        if inst is not None:
            await inst.unregister_producer(self.group_name)

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def instance(self) -> ClientInstance:
        """The running ClientInstance. Raises ClientError before start()."""
        if self._instance is None:
            raise ClientError("the producer is not started; call start() first")
        return self._instance

    # ProducerInner
    def publish_topics(self) -> set[str]:
        """Topics this producer has sent to (their routes are refreshed every 30 s)."""
        return set(self._publish_table)

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        """Take a refreshed route (called by the instance)."""
        if info.ok or topic not in self._publish_table:
            self._publish_table[topic] = info

    # -- routing -----------------------------------------------------------------------------

    async def find_publish_info(self, topic: str) -> TopicPublishInfo:
        """Mirrors ``tryToFindTopicPublishInfo``: ``topic``'s route (asked of the name server when
        not known yet), else the ``TBW102`` route (``create_topic_key``) for auto-creation.

        Raises:
            NoRouteError: neither route has a queue to send to.
        """
        info = self._publish_table.get(topic)
        if info is not None and info.ok:
            return info
        self._publish_table.setdefault(topic, TopicPublishInfo(topic))
        await self.instance.update_topic_route_info_from_name_server(topic)
        info = self._publish_table.get(topic)
        if info is not None and info.ok:
            return info
        key = self.config.create_topic_key
        try:
            route = await self.instance.get_route(key)
        except NoRouteError:
            raise NoRouteError(
                f"no route info for topic {topic} and no {key} route to auto-create it "
                f"(name server {self.config.namesrv_addr})"
            ) from None
        self.instance.remember_brokers(route)
        info = route_to_publish_info(topic, route, max_queue_nums=self.config.default_topic_queue_nums)
        if not info.ok:
            raise NoRouteError(
                f"no writable queue for topic {topic} (name server {self.config.namesrv_addr})"
            )
        self._publish_table[topic] = info
        return info

    def cached_publish_info(self, topic: str) -> TopicPublishInfo | None:
        """The known publish info of ``topic`` when it has writable queues (no I/O), else None."""
        info = self._publish_table.get(topic)
        return info if info is not None and info.ok else None

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic``. Mirrors ``fetchPublishMessageQueues``."""
        return list((await self.find_publish_info(topic)).message_queue_list)

    # -- send --------------------------------------------------------------------------------

    async def send(
        self,
        msg: Message,
        timeout: float | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Send and wait for the broker's answer. Mirrors ``send`` (sync).

        Args:
            msg: the message; its ``UNIQ_KEY`` is set if missing.
            timeout: seconds for all attempts together (default ``send_msg_timeout``).
            queue: send to exactly this queue (no retries).
            selector: pick the queue with ``selector(mqs, msg, arg)`` (no retries; orderly sends).
            arg: passed to ``selector``.

        Raises:
            ClientError: invalid message (empty body, bad topic, too large).
            NoRouteError: no route for the topic.
            BrokerError: the broker refused (after retries where retriable).
            RemotingTimeoutError: the time budget ran out.
        """
        self.encoder.check_message(msg)
        timeout = self.config.send_msg_timeout if timeout is None else timeout
        if queue is not None or selector is not None:
            mq = await self._choose_queue(msg, queue, selector, arg)
            return await self.send_kernel(msg, mq, timeout)
        return await self.send_default(msg, timeout, self.config.retry_times_when_send_failed)

    async def _choose_queue(
        self, msg: Message, queue: MessageQueue | None, selector: SelectorLike | None, arg: Any
    ) -> MessageQueue:
        if queue is not None:
            if queue.topic != msg.topic:
                raise ClientError(f"message topic {msg.topic} does not match queue topic {queue.topic}")
            return queue
        assert selector is not None
        info = await self.find_publish_info(msg.topic)
        return select_queue(selector, info.message_queue_list, msg, arg)

    async def send_default(self, msg: Message, timeout: float, retries: int) -> SendResult:
        """Mirrors ``sendDefaultImpl``: up to 1 + ``retries`` attempts, each on another queue
        (policy in :class:`SendAttempts`, shared with the blocking producer's direct path), all
        within ``timeout`` s.

        Raises:
            ClientError, BrokerError, RemotingError: the last attempt's failure (see
                :meth:`SendAttempts.give_up`).
        """
        info = await self.find_publish_info(msg.topic)
        attempts = SendAttempts(self, msg.topic, timeout, retries)
        while (mq := attempts.next_queue(info)) is not None:
            try:
                result = await self.send_kernel(msg, mq, attempts.remaining)
            except (RemotingError, ClientError, BrokerError) as exc:
                if not attempts.failed(exc, mq):
                    raise
                continue
            if attempts.succeeded(result, mq):
                return result
        return attempts.give_up()

    async def broker_addr(self, mq: MessageQueue) -> str:
        """The master address (``host:port``) of ``mq``'s broker, refreshing ``mq.topic``'s route
        once when it is not known (``findBrokerAddressInPublish``).

        Raises:
            ClientError: the route names no such broker.
        """
        addr = self.instance.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            await self.instance.update_topic_route_info_from_name_server(mq.topic)
            addr = self.instance.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            raise ClientError(f"the broker {mq.broker_name} does not exist (topic {mq.topic})")
        return addr

    async def send_kernel(self, msg: Message, mq: MessageQueue, timeout: float) -> SendResult:
        """Mirrors ``sendKernelImpl``: UNIQ_KEY, compression, header, one SEND_MESSAGE_V2 request
        to ``mq``'s master, answered within ``timeout`` s; no retry.

        Raises:
            ClientError, BrokerError, RemotingError: as :meth:`broker_addr` and the request.
        """
        addr = await self.broker_addr(mq)
        body, sys_flag, uniq = self.encoder.prepare(msg)
        header = self.encoder.build_header(msg, mq, sys_flag, batch=False)
        result = await self.instance.api.send_message(
            addr, mq.broker_name, header, body, timeout, uniq_id=uniq
        )
        if self.trace_hook is not None:
            self.trace_hook.sent(msg, header, addr, result)
        return result

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
    ) -> None:
        """Send without waiting for an answer (no retries). Mirrors ``sendOneway``."""
        self.encoder.check_message(msg)
        if queue is not None or selector is not None:
            mq = await self._choose_queue(msg, queue, selector, arg)
        else:
            mq = self.fault_strategy.select_one_message_queue(await self.find_publish_info(msg.topic), None)
        addr = await self.broker_addr(mq)
        body, sys_flag, _ = self.encoder.prepare(msg)
        await self.instance.api.send_message_oneway(
            addr, self.encoder.build_header(msg, mq, sys_flag, batch=False), body
        )

    def send_async(
        self,
        msg: Message,
        timeout: float | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
    ) -> asyncio.Task[SendResult]:
        """Start a send and return a task (await it, or add a done callback). Mirrors ``send`` with a SendCallback.

        Retries up to ``retry_times_when_send_async_failed`` times like the sync send.
        Must be called on the producer's event loop.
        """

        async def run() -> SendResult:
            if queue is not None or selector is not None:
                return await self.send(msg, timeout, queue=queue, selector=selector, arg=arg)
            self.encoder.check_message(msg)
            t = self.config.send_msg_timeout if timeout is None else timeout
            return await self.send_default(msg, t, self.config.retry_times_when_send_async_failed)

        return asyncio.ensure_future(run())

    def prepare_batch(self, batch: list[Message]) -> tuple[Message, bytes, str]:
        """Check a batch and encode its body: ``(carrier message, body, comma-joined UNIQ_KEYs)``;
        see :meth:`SendEncoder.prepare_batch` (errors: ClientError, ProtocolError)."""
        return self.encoder.prepare_batch(batch)

    async def send_batch(
        self,
        msgs: Iterable[Message],
        timeout: float | None = None,
        *,
        queue: MessageQueue | None = None,
    ) -> SendResult:
        """Send several messages of one topic in one SEND_BATCH_MESSAGE request. Mirrors ``send(Collection)``.

        ``SendResult.msg_id`` is the comma-joined ``UNIQ_KEY``s. Use :func:`split_batch` for
        lists over 4 MiB. Batches are never compressed.

        Raises:
            ClientError: empty list, mixed topics, delayed, timer or retry-topic messages, body too large.
        """
        carrier, body, uniq = self.prepare_batch(list(msgs))
        timeout = self.config.send_msg_timeout if timeout is None else timeout
        if queue is not None:
            mq = queue
        else:
            info = await self.find_publish_info(carrier.topic)
            mq = self.fault_strategy.select_one_message_queue(info, None)
        return await self.send_batch_kernel(carrier, body, uniq, mq, timeout)

    async def send_batch_records(
        self,
        topic: str,
        records: Sequence[bytes],
        uniq_ids: Sequence[str],
        timeout: float | None = None,
        *,
        queue: MessageQueue,
    ) -> SendResult:
        """:meth:`send_batch` of messages already encoded by :func:`batch_record` (each with its
        ``UNIQ_KEY``, listed in order in ``uniq_ids``): the same SEND_BATCH_MESSAGE to ``queue``,
        for a caller that builds many messages of one shape (the flights publisher) and resends the
        same bytes on a retry.

        Raises:
            ClientError: no record, an invalid or retry topic, body too large.
        """
        if not records:
            raise ClientError("send_batch needs at least one message")
        validate_topic(topic)
        if is_retry_topic(topic):
            raise ClientError("retry-topic messages cannot be sent in a batch")
        body = b"".join(records)
        if len(body) > self.config.max_message_size:
            raise ClientError(
                f"batch body is {len(body)} bytes, more than max_message_size "
                f"{self.config.max_message_size}; use split_batch()"
            )
        timeout = self.config.send_msg_timeout if timeout is None else timeout
        return await self.send_batch_kernel(Message(topic, body), body, ",".join(uniq_ids), queue, timeout)

    async def send_batch_kernel(
        self, carrier: Message, body: bytes, uniq: str, mq: MessageQueue, timeout: float
    ) -> SendResult:
        """One SEND_BATCH_MESSAGE of the encoded batch ``body`` to ``mq``'s master (``carrier``
        gives the header's topic, flag and properties; ``uniq`` the comma-joined UNIQ_KEYs), within
        ``timeout`` s; no retry (``sendKernelImpl`` for a ``MessageBatch``).

        Raises:
            ClientError, BrokerError, RemotingError: as :meth:`send_kernel`.
        """
        addr = await self.broker_addr(mq)
        header = self.encoder.build_header(carrier, mq, 0, batch=True)
        return await self.instance.api.send_message(addr, mq.broker_name, header, body, timeout, uniq_id=uniq)

    # -- request-reply (tidemq.client.producer.request) ----------------------------------------

    async def request(self, msg: Message, timeout_ms: int = 3000, **send_kwargs: Any) -> MessageExt:
        """Send ``msg`` as a request, return the reply. Mirrors ``request(msg, timeout)``; see
        :func:`tidemq.client.producer.request.request` (``RequestTimeoutError`` when none comes)."""
        from tidemq.client.producer.request import request

        return await request(self, msg, timeout_ms, **send_kwargs)

    def request_async(
        self, msg: Message, timeout_ms: int = 3000, **send_kwargs: Any
    ) -> asyncio.Task[MessageExt]:
        """:meth:`request` as a task. Mirrors ``request(msg, RequestCallback, timeout)``."""
        return asyncio.ensure_future(self.request(msg, timeout_ms, **send_kwargs))

    async def send_reply(self, reply: Message, timeout: float | None = None) -> SendResult:
        """Send a reply built by ``create_reply_message`` once (SEND_REPLY_MESSAGE_V2); see
        :func:`tidemq.client.producer.request.send_reply`."""
        from tidemq.client.producer.request import send_reply

        return await send_reply(self, reply, timeout)

    # -- queries (MQAdmin) -------------------------------------------------------------------

    async def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryResult:
        """Messages of ``topic`` whose KEYS hold ``key``, stored within ``[begin, end]`` ms (QUERY_MESSAGE).

        Mirrors ``DefaultMQProducer.queryMessage``; see :func:`tidemq.client.query.query_message`.

        Raises:
            ClientError: nothing found. NoRouteError: unknown topic.
        """
        return await query.query_message(self.instance, topic, key, max_num, begin, end)

    async def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """The message with an offset msg id or (with ``topic``) a UNIQ_KEY. Mirrors ``viewMessage``.

        Raises:
            ClientError: no such message.
        """
        return await query.view_message(self.instance, msg_id, topic)

    async def recall_message(self, topic: str, recall_handle: str) -> str:
        """Cancel a timer message not yet due; its message id. Mirrors ``recallMessage`` (5.3); see
        :func:`tidemq.client.producer.recall.recall_message` (errors: ClientError, BrokerError)."""
        from tidemq.client.producer.recall import recall_message

        return await recall_message(self, topic, recall_handle)


class Producer(BlockingFacade[AsyncProducer]):
    """Blocking producer. Mirrors ``DefaultMQProducer``; runs :class:`AsyncProducer` on a background loop.

    Example::

        producer = Producer(namesrv_addr="127.0.0.1:9876", producer_group="pg")
        producer.start()
        print(producer.send(Message("TopicA", b"hi")).msg_id)
        producer.shutdown()
    """

    def __init__(self, config: ProducerConfig | None = None, **overrides: Any) -> None:
        super().__init__(AsyncProducer(config, **overrides))
        cfg = self._core.config
        signed = bool(cfg.access_key and cfg.secret_key)
        self._direct: DirectPool | None = DirectPool() if cfg.sync_send_direct and not signed else None

    @property
    def config(self) -> ProducerConfig:
        return self._core.config

    def shutdown(self) -> None:
        """See :meth:`AsyncProducer.shutdown`; also stops the background loop when unused."""
        if self._direct is not None:
            self._direct.close()
        self._shutdown_core(self._core.shutdown, 30)

    def send(
        self,
        msg: Message,
        timeout: float | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
    ) -> SendResult:
        """See :meth:`AsyncProducer.send`.

        With ``sync_send_direct`` (default) and the topic's route already known, the request is
        written and its answer read on this thread (:mod:`tidemq.client.direct`); same retries,
        errors and results as the event-loop path, which is used otherwise.
        """
        if self._direct is not None:
            core = self._core
            core.encoder.check_message(msg)
            info = core.cached_publish_info(msg.topic)
            if info is not None:
                t = core.config.send_msg_timeout if timeout is None else timeout
                if queue is not None or selector is not None:
                    mq = _choose_queue_sync(msg, info, queue, selector, arg)
                    return self._send_kernel_direct(msg, mq, t)
                return self._send_default_direct(msg, info, t, core.config.retry_times_when_send_failed)
        return self._run(self._core.send(msg, timeout, queue=queue, selector=selector, arg=arg))

    def _send_default_direct(
        self, msg: Message, info: TopicPublishInfo, timeout: float, retries: int
    ) -> SendResult:
        """:meth:`AsyncProducer.send_default` on the caller's thread (same :class:`SendAttempts`)."""
        attempts = SendAttempts(self._core, msg.topic, timeout, retries)
        while (mq := attempts.next_queue(info)) is not None:
            try:
                result = self._send_kernel_direct(msg, mq, attempts.remaining)
            except (RemotingError, ClientError, BrokerError) as exc:
                if not attempts.failed(exc, mq):
                    raise
                continue
            if attempts.succeeded(result, mq):
                return result
        return attempts.give_up()

    def _send_kernel_direct(
        self,
        msg: Message,
        mq: MessageQueue,
        timeout: float,
        *,
        batch_body: bytes | None = None,
        uniq: str = "",
    ) -> SendResult:
        """One request on this thread's direct connection to ``mq``'s master (the loop when the
        connection is busy with another thread or the broker address is not known yet)."""
        core = self._core
        inst = core.instance
        addr = inst.find_broker_address_in_publish(mq.broker_name)
        assert self._direct is not None
        conn = self._direct.try_acquire(addr) if addr is not None else None
        if conn is None:
            if batch_body is not None:
                return self._run(core.send_batch_kernel(msg, batch_body, uniq, mq, timeout))
            return self._run(core.send_kernel(msg, mq, timeout))
        try:
            assert addr is not None
            if batch_body is None:
                body, sys_flag, uniq = core.encoder.prepare(msg)
                header = core.encoder.build_header(msg, mq, sys_flag, batch=False)
            else:
                body, header = batch_body, core.encoder.build_header(msg, mq, 0, batch=True)
            api = inst.api
            response = conn.invoke(api.build_send_request(header, body), timeout)
        finally:
            conn.lock.release()
        result = api.process_send_response(mq.broker_name, header.topic, response, addr, uniq, mq)
        if core.trace_hook is not None and batch_body is None:
            core.trace_hook.sent(msg, header, addr, result)
        return result

    def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
    ) -> None:
        """See :meth:`AsyncProducer.send_oneway`."""
        self._run(self._core.send_oneway(msg, queue=queue, selector=selector, arg=arg))

    def send_async(
        self,
        msg: Message,
        callback: Callable[[SendResult | None, BaseException | None], object] | None = None,
        timeout: float | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send; returns a ``concurrent.futures.Future``. ``callback(result, error)`` runs on completion."""

        async def run() -> SendResult:
            return await self._core.send_async(msg, timeout, queue=queue, selector=selector, arg=arg)

        fut = self._loop.submit(run())
        if callback is not None:

            def done(f: concurrent.futures.Future[SendResult]) -> None:
                exc = f.exception()
                callback(None if exc else f.result(), exc)

            fut.add_done_callback(done)
        return fut

    def send_batch(
        self, msgs: Iterable[Message], timeout: float | None = None, *, queue: MessageQueue | None = None
    ) -> SendResult:
        """See :meth:`AsyncProducer.send_batch` (on this thread's direct connection when possible, as :meth:`send`)."""
        batch = list(msgs)
        if self._direct is not None and batch:
            core = self._core
            info = core.cached_publish_info(batch[0].topic)
            if info is not None:
                carrier, body, uniq = core.encoder.prepare_batch(batch)
                t = core.config.send_msg_timeout if timeout is None else timeout
                mq = queue if queue is not None else core.fault_strategy.select_one_message_queue(info, None)
                return self._send_kernel_direct(carrier, mq, t, batch_body=body, uniq=uniq)
        return self._run(self._core.send_batch(batch, timeout, queue=queue))

    def request(self, msg: Message, timeout_ms: int = 3000, **send_kwargs: Any) -> MessageExt:
        """See :meth:`AsyncProducer.request` (blocks for the reply, at most ``timeout_ms``)."""
        return self._run(self._core.request(msg, timeout_ms, **send_kwargs))

    def request_async(
        self,
        msg: Message,
        callback: Callable[[MessageExt | None, BaseException | None], object] | None = None,
        timeout_ms: int = 3000,
        **send_kwargs: Any,
    ) -> concurrent.futures.Future[MessageExt]:
        """Start a request; ``callback(reply, error)`` runs when the reply (or the error) comes."""
        fut = self._loop.submit(self._core.request(msg, timeout_ms, **send_kwargs))
        if callback is not None:

            def done(f: concurrent.futures.Future[MessageExt]) -> None:
                exc = f.exception()
                callback(None if exc else f.result(), exc)

            fut.add_done_callback(done)
        return fut

    def send_reply(self, reply: Message, timeout: float | None = None) -> SendResult:
        """See :meth:`AsyncProducer.send_reply`."""
        return self._run(self._core.send_reply(reply, timeout))

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """See :meth:`AsyncProducer.fetch_publish_message_queues`."""
        return self._run(self._core.fetch_publish_message_queues(topic))

    def send_heartbeat_to_all_brokers(self) -> None:
        """Heartbeat now to every broker of the routes known (``sendHeartbeatToAllBrokerWithLock``),
        so they list this producer group (and can check its transactions) at once instead of after
        the 30 s timer; blocks until sent."""
        self._run(self._core.instance.send_heartbeat_to_all_brokers())

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryResult:
        """See :meth:`AsyncProducer.query_message`."""
        return self._run(self._core.query_message(topic, key, max_num, begin, end))

    def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """See :meth:`AsyncProducer.view_message`."""
        return self._run(self._core.view_message(msg_id, topic))

    def recall_message(self, topic: str, recall_handle: str) -> str:
        """See :meth:`AsyncProducer.recall_message`."""
        return self._run(self._core.recall_message(topic, recall_handle))


def _choose_queue_sync(
    msg: Message, info: TopicPublishInfo, queue: MessageQueue | None, selector: SelectorLike | None, arg: Any
) -> MessageQueue:
    """:meth:`AsyncProducer._choose_queue` with the publish info at hand."""
    if queue is not None:
        if queue.topic != msg.topic:
            raise ClientError(f"message topic {msg.topic} does not match queue topic {queue.topic}")
        return queue
    assert selector is not None
    return select_queue(selector, info.message_queue_list, msg, arg)
