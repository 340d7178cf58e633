"""Simple consumers over POP: ``AsyncSimpleConsumer`` and ``SimpleConsumer`` (blocking facade).

RocketMQ 5's consumption model (its ``SimpleConsumer``) over remoting POP (rocketmq5.md §8), so
Python users get it without gRPC: :meth:`AsyncSimpleConsumer.receive` pops up to N messages, which
stay invisible to every other member of the group for the given duration; :meth:`ack` removes one
for good; one not acked in time is delivered again (``reconsume_times`` + 1, attempt =
``reconsume_times + 1``), and after the group's ``retryMaxTimes`` it goes to ``%DLQ%<group>``.
:meth:`change_invisible_duration` extends (or shortens) a message's invisibility from now.

There is no client-side rebalance: members may come and go at any time and every broker of a
subscribed topic is read (round robin; one quick pass over them, then a long poll of one for up to
``await_duration`` seconds). ``fifo=True`` pops in order: a queue's next messages come only once
the previous batch of that queue is acked (or its invisible time ended, then the same messages come
again, in order).

FIFO pops carry an ``attemptId`` (as the v5 Java client's ``ReceiveMessageRequest.attempt_id``: a
random UUID per logical pop of a (topic, broker), the same one on its retries, a new one once an
answer brought messages). A pop whose answer is lost (timeout, connection cut) is sent again at once
with the same id, and the broker answers it with the batch it already handed out instead of keeping
the queue blocked for the invisible duration; if that answer is lost too, the next receive reuses
the id.

Example::

    consumer = SimpleConsumer(namesrv_addr=addr, consumer_group="cg", subscriptions={"TopicA": "*"})
    consumer.start()
    for msg in consumer.receive(max_messages=16, invisible_duration_s=30):
        handle(msg)
        consumer.ack(msg)
    consumer.shutdown()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from tidemq.client.config import ClientConfig, apply_overrides
from tidemq.client.consumer.selector import Selector, subscription_of
from tidemq.client.facade import BlockingFacade
from tidemq.client.instance import ClientInstance
from tidemq.errors import BrokerError, ClientError, RemotingError, TideMQError
from tidemq.protocol.body import ConsumeFromWhere, ConsumerData, ConsumeType, MessageModel, SubscriptionData
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.filter import is_tag_matched
from tidemq.protocol.headers.pop import (
    INIT_MODE_MAX,
    INIT_MODE_MIN,
    AckMessageRequestHeader,
    BatchAck,
    BatchAckMessageRequestBody,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from tidemq.protocol.message import MessageExt, MessageQueue
from tidemq.protocol.message_codec import decode_messages
from tidemq.protocol.topic import validate_topic

__all__ = ["AsyncSimpleConsumer", "SimpleConsumer", "SimpleConsumerConfig", "process_pop_response"]

log = logging.getLogger(__name__)

PROPERTY_POP_CK = "POP_CK"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
MAX_MESSAGES = 32
NOT_FOUND = (ResponseCode.PULL_NOT_FOUND, ResponseCode.POLLING_TIMEOUT, ResponseCode.NO_MESSAGE)


@dataclass(slots=True, kw_only=True)
class SimpleConsumerConfig(ClientConfig):
    """Simple consumer settings (RocketMQ 5 ``SimpleConsumerBuilder`` names where they exist).

    Attributes:
        consumer_group: group name (required).
        subscriptions: ``{topic: tag expression or MessageSelector}`` (``"*"``, ``"TagA || TagB"``,
            ``MessageSelector.by_sql("a > 5")``).
        await_duration: how long a receive may wait on a broker for messages, s (20; 0 = no wait).
        fifo: pop in order (FIFO): a queue's next batch only once its previous one is acked.
        consume_from_where: where a group new to a queue starts: ``CONSUME_FROM_LAST_OFFSET``
            (the queue's end; its start while the whole queue is still in the broker's memory, as
            RocketMQ 5) or ``CONSUME_FROM_FIRST_OFFSET``.
    """

    consumer_group: str = ""
    subscriptions: dict[str, Selector] = field(default_factory=dict)
    await_duration: float = 20.0
    fifo: bool = False
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"


def _info_map(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for one in (text or "").split(";"):
        parts = one.split(" ")
        if len(parts) == 3:
            out[f"{parts[0]}@{parts[1]}"] = parts[2]
    return out


def _retry_flag(msg: MessageExt) -> str:
    topic = msg.topic
    if topic.startswith("%RETRY%"):
        return "2" if "+" in topic else "1"
    return "0"


def process_pop_response(response: RemotingCommand, topic: str, broker_name: str) -> list[MessageExt]:
    """The messages of a SUCCESS POP_MESSAGE response, each with its receipt handle in ``POP_CK``
    (built from ``startOffsetInfo`` / ``msgOffsetInfo`` unless the broker set it, as for retried
    messages), ``topic``, ``broker_name``, ``reconsume_times`` (an order pop's ``orderCountInfo``)
    and ``1ST_POP_TIME``. Mirrors ``MQClientAPIImpl.processPopResponse``.

    Raises:
        ProtocolError: the body does not decode.
    """
    ext = response.ext_fields
    pop_time, invisible, revive_qid = (
        ext.get("popTime", "0"),
        ext.get("invisibleTime", "0"),
        ext.get("reviveQid", "0"),
    )
    starts = _info_map(ext.get("startOffsetInfo"))
    counts = {k: int(v) for k, v in _info_map(ext.get("orderCountInfo")).items()}
    msgs = decode_messages(response.body or b"", broker_name=broker_name)
    for msg in msgs:
        if msg.get_property(PROPERTY_POP_CK) is None:
            key = f"{_retry_flag(msg)}@{msg.queue_id}"
            start = starts.get(key, str(msg.queue_offset))
            extra = (
                f"{start} {pop_time} {invisible} {revive_qid} {_retry_flag(msg)} {broker_name} "
                f"{msg.queue_id} {msg.queue_offset}"
            )
            msg.put_property(PROPERTY_POP_CK, extra)
            count = counts.get(f"{_retry_flag(msg)}@qo{msg.queue_id}%{msg.queue_offset}", counts.get(key))
            if count:
                msg.reconsume_times = count
        if msg.get_property(PROPERTY_FIRST_POP_TIME) is None:
            msg.put_property(PROPERTY_FIRST_POP_TIME, pop_time)
        msg.topic = topic
        msg.broker_name = broker_name
    return msgs


def _real_topic(topic: str, group: str, retry: str) -> str:
    """The topic a handle's queue and offset are in: ``topic``, or its pop retry topic
    (``ExtraInfoUtil.getRealTopic``: flag 1 ``%RETRY%<group>_<topic>``, 2 ``%RETRY%<group>+<topic>``)."""
    if retry == "1":
        return f"%RETRY%{group}_{topic}"
    if retry == "2":
        return f"%RETRY%{group}+{topic}"
    return topic


def _handle(msg: MessageExt) -> list[str]:
    extra = msg.get_property(PROPERTY_POP_CK)
    parts = extra.split(" ") if extra else []
    if len(parts) < 8:
        raise ClientError(
            f"message {msg.msg_id} has no receipt handle (POP_CK); was it received by receive()?"
        )
    return parts


class AsyncSimpleConsumer:
    """An asyncio simple consumer over POP. See the module docstring.

    Args:
        config: a :class:`SimpleConsumerConfig` (or keyword overrides of its fields).
    """

    def __init__(self, config: SimpleConsumerConfig | None = None, **overrides: Any) -> None:
        self.config = apply_overrides(config, SimpleConsumerConfig, overrides)
        self.client_id = self.config.build_client_id()
        self.group_name = self.config.consumer_group
        self._subs: dict[str, SubscriptionData] = {}
        for topic, expression in self.config.subscriptions.items():
            self.subscribe(topic, expression)
        self._brokers: dict[str, list[str]] = {}
        self._next = 0
        self._attempts: dict[tuple[str, str], str] = {}
        """FIFO: the ``attemptId`` of the current logical pop of each (topic, broker)."""
        self._instance: ClientInstance | None = None
        self._running = False

    # -- setup ---------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        """Receive ``topic``'s messages that match ``expression``: a tag expression (``"*"``,
        ``"TagA || TagB"``) or a :class:`~tidemq.client.consumer.selector.MessageSelector`
        (``MessageSelector.by_sql("a > 5")``: the broker filters by properties)."""
        validate_topic(topic)
        self._subs[topic] = subscription_of(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving from ``topic`` (sent with the next heartbeat)."""
        self._subs.pop(topic, None)
        self._brokers.pop(topic, None)
        for key in [k for k in self._attempts if k[0] == topic]:
            del self._attempts[key]

    @property
    def instance(self) -> ClientInstance:
        """The shared client instance.

        Raises:
            ClientError: not started.
        """
        if self._instance is None:
            raise ClientError("the consumer is not started; call start() first")
        return self._instance

    async def start(self) -> None:
        """Join the ClientInstance, fetch routes, heartbeat (so admin tools list the members)."""
        if self._running:
            return
        if not self.group_name:
            raise ClientError("consumer_group is required")
        inst = ClientInstance.acquire(self.config)
        inst.register_consumer(self.group_name, self)
        self._instance = inst
        self._running = True
        try:
            await inst.start()
            for topic in self._subs:
                with_route = await inst.update_topic_route_info_from_name_server(topic)
                if not with_route:
                    log.warning("no route for topic %s yet", topic)
            await inst.send_heartbeat_to_all_brokers()
        except BaseException:  # not started: a later start() tries again from the beginning
            self._running = False
            self._instance = None
            with contextlib.suppress(Exception):
                await inst.unregister_consumer(self.group_name)
            raise

    async def shutdown(self) -> None:
        """Unregister from the brokers. Messages received and not acked come back after their
        invisible duration."""
        if not self._running:
            return
        self._running = False
        inst, self._instance = self._instance, None
        if inst is not None:
            await inst.unregister_consumer(self.group_name)

    # -- ConsumerInner ---------------------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        """This member in a heartbeat: a CONSUME_ACTIVELY clustering group with its subscriptions."""
        return ConsumerData(
            group_name=self.group_name,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=MessageModel.CLUSTERING,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            subscription_data_set=list(self._subs.values()),
        )

    def subscribed_topics(self) -> set[str]:
        """The topics subscribed to (their routes are kept up to date)."""
        return set(self._subs)

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        """A new route of ``topic``: the brokers to pop from."""
        self._brokers[topic] = sorted({mq.broker_name for mq in mqs})

    async def do_rebalance(self) -> None:
        """Nothing to do: POP has no client-side rebalance."""

    async def persist_consumer_offset(self) -> None:
        """Nothing to do: the broker moves a POP group's offsets."""

    # -- receive ---------------------------------------------------------------------------------

    def _targets(self) -> list[tuple[str, str]]:
        """Every (topic, broker) to read, rotated by one per receive (round robin)."""
        pairs = [(t, b) for t in sorted(self._subs) for b in self._brokers.get(t, [])]
        if not pairs:
            return []
        k = self._next % len(pairs)
        self._next += 1
        return pairs[k:] + pairs[:k]

    async def receive(self, max_messages: int = 16, invisible_duration_s: float = 30.0) -> list[MessageExt]:
        """Up to ``max_messages`` (1..32) messages, invisible to the group for
        ``invisible_duration_s`` seconds; an empty list when none came within ``await_duration``.

        An empty list also while no name server knows a subscribed topic yet.

        Raises:
            ClientError: not started, nothing subscribed, bad arguments.
            BrokerError: a broker refused the pop (unknown topic or group, bad filter...).
        """
        if not 1 <= max_messages <= MAX_MESSAGES:
            raise ClientError(f"max_messages must be in [1, {MAX_MESSAGES}], got {max_messages}")
        if invisible_duration_s <= 0:
            raise ClientError(f"invisible_duration_s must be > 0, got {invisible_duration_s}")
        inst = self.instance
        if not self._subs:
            raise ClientError("subscribe to a topic first")
        targets = self._targets()
        if not targets:  # no route yet (a topic just created): ask again, else wait a little
            for topic in self._subs:
                await inst.update_topic_route_info_from_name_server(topic)
            targets = self._targets()
            if not targets:
                log.debug("no route for %s yet", sorted(self._subs))
                await asyncio.sleep(min(self.config.await_duration, 1.0))
                return []
        invisible_ms = max(1, int(invisible_duration_s * 1000))
        for topic, broker in targets:  # a quick pass: any broker with messages answers at once
            msgs = await self._pop(topic, broker, max_messages, invisible_ms, 0)
            if msgs:
                return msgs
        poll_ms = int(self.config.await_duration * 1000)
        if poll_ms <= 0:
            return []
        topic, broker = targets[0]
        return await self._pop(topic, broker, max_messages, invisible_ms, poll_ms)

    def _pop_request(
        self, topic: str, max_nums: int, invisible_ms: int, poll_ms: int, attempt_id: str | None
    ) -> RemotingCommand:
        """A POP_MESSAGE (200050) request of ``topic`` from every queue (``queueId`` -1)."""
        sub = self._subs[topic]
        header = PopMessageRequestHeader(
            consumer_group=self.group_name,
            topic=topic,
            queue_id=-1,
            max_msg_nums=max_nums,
            invisible_time=invisible_ms,
            poll_time=poll_ms,
            born_time=time.time_ns() // 1_000_000,
            init_mode=INIT_MODE_MIN if "FIRST" in self.config.consume_from_where.upper() else INIT_MODE_MAX,
            exp_type=sub.expression_type or "TAG",
            exp=sub.sub_string or "*",
            order=self.config.fifo,
            attempt_id=attempt_id,
        )
        request = RemotingCommand.create_request(RequestCode.POP_MESSAGE, header.to_ext_fields())
        request.language = self.config.language
        return request

    async def _send_pop(
        self,
        addr: str,
        broker: str,
        topic: str,
        max_nums: int,
        invisible_ms: int,
        poll_ms: int,
        attempt_id: str | None,
    ) -> RemotingCommand | None:
        """The broker's answer to one pop, or None when none came. A FIFO pop (``attempt_id``) whose
        answer is lost is sent once more at once with the same id and no long polling: a batch the
        broker popped for the lost answer comes back at once."""
        remoting = self.instance.remoting
        api_timeout = self.config.mq_client_api_timeout
        request = self._pop_request(topic, max_nums, invisible_ms, poll_ms, attempt_id)
        try:
            return await remoting.invoke(addr, request, poll_ms / 1000.0 + api_timeout)
        except RemotingError as exc:
            if attempt_id is None:
                log.warning("pop from %s (%s) failed: %s", broker, addr, exc)
                return None
            log.info(
                "pop from %s (%s) lost its answer (%s); again, attempt %s", broker, addr, exc, attempt_id
            )
        except TideMQError as exc:
            log.warning("pop from %s (%s) failed: %s", broker, addr, exc)
            return None
        request = self._pop_request(topic, max_nums, invisible_ms, 0, attempt_id)
        try:
            return await remoting.invoke(addr, request, api_timeout)
        except TideMQError as exc:
            log.warning("pop from %s (%s) failed again: %s (attempt %s kept)", broker, addr, exc, attempt_id)
            return None

    async def _pop(
        self, topic: str, broker: str, max_nums: int, invisible_ms: int, poll_ms: int
    ) -> list[MessageExt]:
        """One pop of ``topic`` from ``broker``; FIFO pops whose answer is lost are sent once more at
        once with the same ``attemptId`` (see the module docstring). An empty list when the broker
        is unknown, had nothing, or could not be reached."""
        inst = self.instance
        addr = inst.find_broker_address_in_publish(broker)
        if addr is None:
            return []
        attempt_id = (
            self._attempts.setdefault((topic, broker), str(uuid.uuid4())) if self.config.fifo else None
        )
        response = await self._send_pop(addr, broker, topic, max_nums, invisible_ms, poll_ms, attempt_id)
        if response is None or response.code in NOT_FOUND:
            return []
        if response.code != ResponseCode.SUCCESS:
            raise BrokerError.for_code(response.code, response.remark, addr)
        msgs = process_pop_response(response, topic, broker)
        if msgs:  # delivered: the next pop is a new attempt (Java rotates on the raw answer)
            self._attempts.pop((topic, broker), None)
        sub = self._subs[topic]
        kept = [m for m in msgs if is_tag_matched(sub, m.tags)]
        for m in msgs:
            if m not in kept:  # a tag-hash collision at the broker: not ours, ack it away
                await self.ack(m)
        return kept

    # -- ack / change --------------------------------------------------------------------------

    async def ack(self, msg: MessageExt) -> None:
        """Ack a received message: it is not delivered again. An ack after the message's invisible
        duration ended may come too late (the message may be delivered again).

        Raises:
            ClientError: the message has no receipt handle.
            BrokerError: the broker refused the ack.
        """
        parts = _handle(msg)
        header = AckMessageRequestHeader(
            consumer_group=self.group_name,
            topic=_real_topic(msg.topic, self.group_name, parts[4]),
            queue_id=int(parts[6]),
            extra_info=" ".join(parts),
            offset=int(parts[7]),
        )
        await self._invoke(parts[5], RequestCode.ACK_MESSAGE, header.to_ext_fields())

    async def ack_many(self, msgs: list[MessageExt]) -> None:
        """Ack several received messages with one BATCH_ACK_MESSAGE per broker (RocketMQ 5's
        ``batchAckMessage``); same meaning as :meth:`ack` for each.

        Raises:
            ClientError: a message has no receipt handle.
            BrokerError: a broker refused the batch (its acks may be partly done: ack again).
        """
        by_broker: dict[str, dict[tuple[str, ...], BatchAck]] = {}
        for msg in msgs:
            p = _handle(msg)
            key = (msg.topic, p[4], p[6], p[0], p[1], p[2], p[3])
            acks = by_broker.setdefault(p[5], {})
            entry = acks.get(key)
            if entry is None:
                entry = acks[key] = BatchAck(
                    self.group_name, msg.topic, p[4], int(p[0]), int(p[6]), int(p[3]), int(p[1]), int(p[2]), 0
                )
            entry.bit_set |= 1 << (int(p[7]) - entry.start_offset)
        for broker, acks in by_broker.items():
            body = BatchAckMessageRequestBody(broker, list(acks.values())).encode()
            await self._invoke(broker, RequestCode.BATCH_ACK_MESSAGE, {}, body)

    async def change_invisible_duration(self, msg: MessageExt, invisible_duration_s: float) -> None:
        """Make a received message invisible for ``invisible_duration_s`` seconds from now. Its
        receipt handle (``POP_CK``) is replaced in place: ack ``msg`` afterwards as usual.

        Raises:
            ClientError: no receipt handle; BrokerError: refused (e.g. the handle expired).
        """
        parts = _handle(msg)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.group_name,
            topic=_real_topic(msg.topic, self.group_name, parts[4]),
            queue_id=int(parts[6]),
            extra_info=" ".join(parts),
            offset=int(parts[7]),
            invisible_time=max(1, int(invisible_duration_s * 1000)),
        )
        response = await self._invoke(
            parts[5], RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()
        )
        ext = response.ext_fields
        offset = parts[7]
        new = f"{offset} {ext['popTime']} {ext['invisibleTime']} {ext['reviveQid']} {parts[4]} {parts[5]} {parts[6]} {offset}"
        msg.put_property(PROPERTY_POP_CK, new)

    async def _invoke(
        self, broker: str, code: int, ext: dict[str, str], body: bytes = b""
    ) -> RemotingCommand:
        inst = self.instance
        addr = inst.find_broker_address_in_publish(broker)
        if addr is None:
            for topic in self._subs:
                await inst.update_topic_route_info_from_name_server(topic)
            addr = inst.find_broker_address_in_publish(broker)
        if addr is None:
            raise ClientError(f"the broker {broker} of the receipt handle is unknown")
        request = RemotingCommand.create_request(code, ext, body)
        request.language = self.config.language
        response = await inst.remoting.invoke(addr, request, self.config.mq_client_api_timeout)
        if response.code != ResponseCode.SUCCESS:
            raise BrokerError.for_code(response.code, response.remark, addr)
        return response


class SimpleConsumer(BlockingFacade[AsyncSimpleConsumer]):
    """Blocking simple consumer over :class:`AsyncSimpleConsumer` (RocketMQ 5's ``SimpleConsumer``).

    Args:
        config: a :class:`SimpleConsumerConfig` (or keyword overrides of its fields).
    """

    def __init__(self, config: SimpleConsumerConfig | None = None, **overrides: Any) -> None:
        super().__init__(AsyncSimpleConsumer(config, **overrides))

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        """See :meth:`AsyncSimpleConsumer.subscribe`."""
        self._call(self._core.subscribe, topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """See :meth:`AsyncSimpleConsumer.unsubscribe`."""
        self._call(self._core.unsubscribe, topic)

    def shutdown(self) -> None:
        """See :meth:`AsyncSimpleConsumer.shutdown`; also stops the background loop when unused."""
        self._shutdown_core(self._core.shutdown, 30)

    def receive(self, max_messages: int = 16, invisible_duration_s: float = 30.0) -> list[MessageExt]:
        """See :meth:`AsyncSimpleConsumer.receive` (blocks up to ``await_duration`` s)."""
        return self._run(self._core.receive(max_messages, invisible_duration_s))

    def ack(self, msg: MessageExt) -> None:
        """See :meth:`AsyncSimpleConsumer.ack`."""
        self._run(self._core.ack(msg))

    def ack_many(self, msgs: list[MessageExt]) -> None:
        """See :meth:`AsyncSimpleConsumer.ack_many`."""
        self._run(self._core.ack_many(msgs))

    def change_invisible_duration(self, msg: MessageExt, invisible_duration_s: float) -> None:
        """See :meth:`AsyncSimpleConsumer.change_invisible_duration`."""
        self._run(self._core.change_invisible_duration(msg, invisible_duration_s))
