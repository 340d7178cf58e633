"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

Mirrors RocketMQ's ``SendMessageProcessor`` + ``AbstractSendMessageProcessor.msgCheck`` (protocol.md
§3.2). The batch flag decides batch handling, not the code: the C++ client sends batches as code 10
or 310 with ``batch: "1"``.

Order of checks (each failure answers a code + remark, never an exception):

1. header parses (else SYSTEM_ERROR naming the field); broker writable (else NO_PERMISSION);
2. topic name valid (SYSTEM_ERROR with TopicValidator's text) and not a system topic clients may
   not send to (NO_PERMISSION);
3. topic known, or auto-created from ``defaultTopic`` (TBW102) / as a 1-queue ``%RETRY%`` topic,
   else TOPIC_NOT_EXIST; topic writable (NO_PERMISSION); ``queueId < max(read, write) queues``
   (SYSTEM_ERROR); ``queueId < 0`` picks a random queue;
4. ``%RETRY%`` with ``reconsumeTimes >= maxReconsumeTimes`` goes to ``%DLQ%<group>`` queue 0;
5. body and properties sizes (MESSAGE_ILLEGAL); a half message (``TRAN_MSG=true``) goes to
   :func:`tidemq.broker.transaction.send_half_message`.

Then the broker adds ``CLUSTER``, drops ``WAIT`` (after reading it) and puts (the store parks
``DELAY`` messages in ``SCHEDULE_TOPIC_XXXX`` and tells the broker's long-polling service about the
arrival), waits for the fsync under SYNC_FLUSH (group commit), and answers with ``msgId`` (comma-joined for a batch), ``queueId``, ``queueOffset``, ``MSG_REGION``,
``TRACE_ON``.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING, ClassVar

from tidemq.broker.recall import attach_recall_handle
from tidemq.broker.timer_service import TIMER_KEYS, is_timer_message, transform_timer_message
from tidemq.errors import ProtocolError
from tidemq.protocol.body import TopicConfig
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RPC_TYPE_RESPONSE, RemotingCommand
from tidemq.protocol.filter import tags_hash
from tidemq.protocol.headers import HeaderError, SendMessageRequestHeader
from tidemq.protocol.message import MessageConst, properties_to_string, property_value, string_to_properties
from tidemq.protocol.message_codec import MAX_PROPERTIES_BYTES, MessageSysFlag, decode_batch_columns
from tidemq.protocol.topic import (
    RETRY_GROUP_TOPIC_PREFIX,
    check_topic,
    dlq_topic,
    group_of_retry_topic,
    is_not_allowed_send_topic,
    is_retry_topic,
)
from tidemq.store.disk import disk_util_text
from tidemq.store.results import MessageExtBatch, MessageExtBrokerInner, PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel

log = logging.getLogger(__name__)

FAQ_NO_TOPIC = " See http://rocketmq.apache.org/docs/faq/ for further details."
CLIENT_VERSION_WITH_MAX_RECONSUME = 121  # MQVersion V3_4_9
PERM_RW = 6
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_DELAY_PAIR = f"{_DELAY}\x01"
_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_CLUSTER = MessageConst.PROPERTY_CLUSTER
NOT_PLAIN = frozenset((_DELAY, MessageConst.PROPERTY_TRANSACTION_PREPARED, *TIMER_KEYS))
"""Properties that take a send off the plain path: delay level, half message, timer (one set test)."""
_NOT_PLAIN = NOT_PLAIN


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def error(code: int, remark: str, ext: dict[str, str] | None = None) -> RemotingCommand:
    """A response with ``code`` and ``remark`` (and ext fields)."""
    return RemotingCommand.create_response(code, remark, ext)


class SendMessageProcessor:
    """Stores produced messages. Mirrors RocketMQ's ``SendMessageProcessor``.

    Args:
        broker: the owning :class:`~tidemq.broker.broker.Broker` (config, managers, store, flush).
    """

    CODES: ClassVar[tuple[int, ...]] = (
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
    )

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._rng = random.Random()
        self._ext_key: tuple[str, bool] | None = None
        self._ext: dict[str, str] = {}
        self.valid_topics: set[str] = set()
        """Topic names that passed the name checks (a pure function of the name), checked once."""

    # -- entry point ---------------------------------------------------------------------------

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Handle one send request from ``channel``; returns the response."""
        ext = self.response_ext()  # shared, never changed: every answer copies it
        try:
            header = SendMessageRequestHeader.from_command(request)
        except HeaderError as exc:
            return error(ResponseCode.SYSTEM_ERROR, f"bad send request header: {exc}", ext)
        checked = self.msg_check(channel.remote_addr, header)
        if isinstance(checked, RemotingCommand):
            checked.ext_fields.update(ext)
            return checked
        topic_config, queue_id = checked
        if header.batch:
            return await self.send_batch_message(channel.remote_addr, header, request.body, queue_id, ext)
        return await self.send_message(channel.remote_addr, header, request, topic_config, queue_id, ext)

    def response_ext(self) -> dict[str, str]:
        """``MSG_REGION`` and ``TRACE_ON`` as every answer carries them: made again only when the
        config changed (do not modify the dict returned)."""
        cfg = self.broker.config
        key = (cfg.region_id, cfg.trace_on)
        if key != self._ext_key:
            self._ext = {
                MessageConst.PROPERTY_MSG_REGION: cfg.region_id,
                MessageConst.PROPERTY_TRACE_SWITCH: str(cfg.trace_on).lower(),
            }
            self._ext_key = key
        return self._ext

    # -- checks ----------------------------------------------------------------------------------

    def msg_check(
        self, remote_addr: str, header: SendMessageRequestHeader
    ) -> RemotingCommand | tuple[TopicConfig, int]:
        """RocketMQ's ``msgCheck``: permission, topic name, topic existence/auto-create, queue id.

        Returns ``(topic_config, queue_id)`` (queue id resolved when < 0) or an error response.
        """
        broker = self.broker
        if not broker.config.is_writeable or broker.config.is_slave:  # a slave never takes sends
            return error(
                ResponseCode.NO_PERMISSION, f"the broker[{broker.addr}] sending message is forbidden"
            )
        topic = header.topic
        if topic not in self.valid_topics:
            problem = check_topic(topic)
            if problem is not None:
                return error(ResponseCode.SYSTEM_ERROR, problem)
            if is_not_allowed_send_topic(topic):
                return error(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
            if len(self.valid_topics) >= 4096:
                self.valid_topics.clear()
            self.valid_topics.add(topic)
        tcm = broker.topic_config_manager
        topic_config = tcm.select_topic_config(topic)
        if topic_config is None:
            topic_config = tcm.create_topic_in_send_message_method(
                topic, header.default_topic, remote_addr, header.default_topic_queue_nums, 0
            )
            if topic_config is None and is_retry_topic(topic):
                topic_config = tcm.create_topic_in_send_message_back_method(topic, 1, PERM_RW, 0)
            if topic_config is None:
                return error(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!{FAQ_NO_TOPIC}",
                )
        if not topic_config.perm & 2:
            return error(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        queue_id = header.queue_id
        id_valid = max(topic_config.write_queue_nums, topic_config.read_queue_nums)
        if queue_id >= id_valid:
            return error(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic {topic} has {id_valid} queues, producer: {remote_addr}",
            )
        if queue_id < 0:
            if topic_config.write_queue_nums <= 0:
                return error(ResponseCode.NO_PERMISSION, f"the topic[{topic}] has no writable queue")
            queue_id = self._rng.randrange(topic_config.write_queue_nums)
        return topic_config, queue_id

    def handle_retry_and_dlq(
        self, header: SendMessageRequestHeader, request_version: int, inner: MessageExtBrokerInner
    ) -> RemotingCommand | None:
        """``%RETRY%`` topic past its max reconsume times -> ``%DLQ%<group>`` queue 0 (in place).

        Mirrors ``handleRetryAndDLQ``. Returns an error response, or None to go on.
        """
        group = group_of_retry_topic(header.topic)
        if group is None:
            return None
        sgc = self.broker.subscription_group_manager.find_subscription_group_config(group)
        if sgc is None:
            return error(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
        max_times = sgc.retry_max_times
        if request_version >= CLIENT_VERSION_WITH_MAX_RECONSUME and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if (header.reconsume_times or 0) >= max_times:
            new_topic = dlq_topic(group)
            self.broker.topic_config_manager.create_topic_in_send_message_back_method(
                new_topic, 1, PERM_RW, 0
            )
            inner.topic = new_topic
            inner.queue_id = 0
            inner.properties.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
            log.info(
                "message to %s reached %d reconsume times, sent to %s", header.topic, max_times, new_topic
            )
        return None

    def properties_of(self, header_properties: str | None) -> tuple[dict[str, str], bool, str]:
        """Header properties + CLUSTER, minus WAIT; returns (properties, wait_store_msg_ok, the
        properties as text). The text is the header's own plus the CLUSTER pair when parsing and
        writing it back would give it unchanged (every pair well formed, no name twice: as many names
        as pairs) and it holds neither WAIT nor CLUSTER: what every client sends."""
        text = header_properties or ""
        props = string_to_properties(text)
        had_wait = _WAIT in props
        wait = props.pop(_WAIT, "true").lower() != "false"
        cluster = self.broker.config.broker_cluster_name
        plain = not had_wait and _CLUSTER not in props and len(props) == text.count("\x02") + 1
        props[_CLUSTER] = cluster
        if plain:
            return props, wait, f"{text}\x02{_CLUSTER}\x01{cluster}"
        return props, wait, properties_to_string(props)

    def size_error(self, body_len: int, props_len: int) -> RemotingCommand | None:
        """The MESSAGE_ILLEGAL answer (no ext fields: the caller adds its own) to a message whose body
        (``body_len`` bytes) is over the store's ``max_message_size`` or whose properties
        (``props_len`` UTF-8 bytes) are over ``MAX_PROPERTIES_BYTES``; None when both fit. Also the half
        message's check (``transaction/processor.py``)."""
        limit = self.broker.store_config.max_message_size
        if body_len > limit:
            return error(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size {body_len} bytes is larger than the limit {limit} bytes",
            )
        if props_len > MAX_PROPERTIES_BYTES:
            return error(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message properties length {props_len} is larger than the limit {MAX_PROPERTIES_BYTES}",
            )
        return None

    # -- single message ----------------------------------------------------------------------------

    async def send_message(
        self,
        remote_addr: str,
        header: SendMessageRequestHeader,
        request: RemotingCommand,
        topic_config: TopicConfig,
        queue_id: int,
        ext: dict[str, str] | None = None,
    ) -> RemotingCommand:
        """Store one message (``asyncSendMessage``). The common case (no retry topic, no delay
        level) goes to the store as a one-message :class:`MessageExtBatch`, with no
        ``MessageExtBrokerInner``; a retry-topic or delayed message takes the general put path.
        ``ext``: the answer's ``MSG_REGION`` / ``TRACE_ON`` (default: from the config)."""
        if ext is None:
            ext = self.response_ext()
        props, wait, text = self.properties_of(header.properties)
        topic = header.topic
        if _NOT_PLAIN.isdisjoint(props) and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            answer = self._send_plain(
                remote_addr, header, request.body, topic_config, queue_id, wait, text, ext
            )
            if isinstance(answer, PutMessageResult):  # a flush or a slave to wait for
                return await self.handle_put_result(answer, queue_id, wait, ext)
            return answer
        if props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
            from tidemq.broker.transaction.processor import send_half_message  # transactions.md §1.2

            return await send_half_message(
                self, remote_addr, header, request.body, queue_id, props, text, wait, ext
            )
        sys_flag = header.sys_flag
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        store = self.broker.store
        try:
            if _DELAY not in props and not is_retry_topic(header.topic) and not is_timer_message(props):
                problem = self.size_error(len(request.body), _utf8_len(text))
                if problem is not None:
                    problem.ext_fields.update(ext)
                    return problem
                result = store.put_message_batch(
                    MessageExtBatch(
                        header.topic,
                        queue_id,
                        sys_flag,
                        header.born_timestamp,
                        remote_addr,
                        header.reconsume_times or 0,
                        flags=[header.flag],
                        bodies=[request.body],
                        properties=[text],
                    )
                )
            else:
                inner = MessageExtBrokerInner(
                    header.topic,
                    request.body,
                    flag=header.flag,
                    properties=props,
                    queue_id=queue_id,
                    sys_flag=sys_flag,
                    born_timestamp=header.born_timestamp,
                    born_host=remote_addr,
                    reconsume_times=header.reconsume_times or 0,
                    tags_code=tags_hash(props.get(MessageConst.PROPERTY_TAGS)),
                )
                problem = self.handle_retry_and_dlq(header, request.version, inner)
                if problem is None:  # TIMER_* / __STARTDELIVERTIME -> rmq_sys_wheel_timer (timer_service.py)
                    problem = transform_timer_message(inner, self.broker.store_config, now_ms())
                if problem is None:
                    text = inner.properties_string = properties_to_string(inner.properties)
                    problem = self.size_error(len(request.body), _utf8_len(text))
                if problem is not None:
                    problem.ext_fields.update(ext)
                    return problem
                result = store.put_message(inner)
                props = inner.properties  # as stored: a timer's answer gets its recallHandle below
        except ProtocolError as exc:
            return error(ResponseCode.MESSAGE_ILLEGAL, f"the message is illegal: {exc}", ext)
        if result.append_result is not None:  # statistics: one O(1) call per request
            self.broker.broker_stats.inc_put(header.topic, 1, result.append_result.wrote_bytes)
        answer = await self.handle_put_result(result, queue_id, wait, ext)
        return attach_recall_handle(answer, props, self.broker.config)  # broker/recall.py

    def _send_plain(
        self,
        remote_addr: str,
        header: SendMessageRequestHeader,
        body: bytes,
        topic_config: TopicConfig,
        queue_id: int,
        wait: bool,
        text: str,
        ext: dict[str, str],
    ) -> RemotingCommand | PutMessageResult:
        """:meth:`send_message` of a message with no delay level, timer or half-message property, to
        a topic that is not a retry topic (nearly every send): the same checks, put and answer, made
        without a coroutine of its own; the put's result instead when the answer must wait for a
        flush or a slave (then :meth:`handle_put_result`)."""
        broker = self.broker
        topic = header.topic
        # sizes: a text of at most MAX_PROPERTIES_BYTES // 4 characters fits in any encoding
        if len(body) > broker.store_config.max_message_size or len(text) * 4 > MAX_PROPERTIES_BYTES:
            problem = self.size_error(len(body), _utf8_len(text))
            if problem is not None:
                problem.ext_fields.update(ext)
                return problem
        sys_flag = header.sys_flag
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        try:
            result = broker.store.put_message_single(
                topic,
                queue_id,
                sys_flag,
                header.born_timestamp,
                remote_addr,
                header.reconsume_times or 0,
                header.flag,
                body,
                text,
            )
        except ProtocolError as exc:
            return error(ResponseCode.MESSAGE_ILLEGAL, f"the message is illegal: {exc}", ext)
        append = result.append_result
        if append is not None:  # statistics: one O(1) call per request
            broker.broker_stats.inc_put(topic, 1, append.wrote_bytes)
        if wait and (
            broker.group_commit_service is not None or (broker.ha is not None and broker.ha.is_sync_master)
        ):
            return result
        if append is None or result.status is not PutMessageStatus.PUT_OK:
            return self.put_error(result, ext)
        fields = ext.copy()  # SendMessageResponseHeader's fields, written directly (hot path)
        fields["msgId"] = append.msg_id or ",".join(append.msg_ids)
        fields["queueId"] = str(queue_id)
        fields["queueOffset"] = str(append.logics_offset)
        return RemotingCommand(ResponseCode.SUCCESS, flag=RPC_TYPE_RESPONSE, ext_fields=fields)

    # -- batch ------------------------------------------------------------------------------------

    async def send_batch_message(
        self,
        remote_addr: str,
        header: SendMessageRequestHeader,
        body: bytes,
        queue_id: int,
        ext: dict[str, str] | None = None,
    ) -> RemotingCommand:
        """Store a batch (``asyncSendBatchMessage``): every item gets the batch-level properties.
        ``ext``: the answer's ``MSG_REGION`` / ``TRACE_ON`` (default: from the config)."""
        if ext is None:
            ext = self.response_ext()
        topic = header.topic
        if is_retry_topic(topic):
            return error(
                ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}", ext
            )
        problem = self.size_error(len(body), 0)
        if problem is not None:
            problem.ext_fields.update(ext)
            return problem
        try:
            flags, bodies, item_texts = decode_batch_columns(body)
        except ProtocolError as exc:
            return error(ResponseCode.MESSAGE_ILLEGAL, f"the batch body is malformed: {exc}", ext)
        if not bodies:
            return error(ResponseCode.MESSAGE_ILLEGAL, "the batch body holds no message", ext)
        batch_props, wait, batch_str = self.properties_of(header.properties)
        if int(batch_props.get(_DELAY, "0") or 0) > 0:
            return error(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be delayed", ext)
        if batch_str:
            joined = "\x02" + batch_str
            texts = [t + joined if t and t[-1] != "\x02" else t + batch_str for t in item_texts]
        else:
            texts = item_texts
        # both checks over the whole batch at once; the item-by-item look (which names the first
        # problem) only when one may fail ("DELAY\x01" cannot span texts joined by "\x00")
        if max(map(len, texts)) * 4 > MAX_PROPERTIES_BYTES or _DELAY_PAIR in "\x00".join(texts):
            for text in texts:
                if len(text) * 4 > MAX_PROPERTIES_BYTES and len(text.encode()) > MAX_PROPERTIES_BYTES:
                    return error(
                        ResponseCode.MESSAGE_ILLEGAL, "a batch item's properties exceed 32767 bytes", ext
                    )
                if _DELAY_PAIR in text and int(property_value(text, _DELAY) or 0) > 0:
                    return error(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be delayed", ext)
        batch = MessageExtBatch(
            topic,
            queue_id,
            header.sys_flag,
            header.born_timestamp,
            remote_addr,
            header.reconsume_times or 0,
            flags=flags,
            bodies=bodies,
            properties=texts,
        )
        try:
            result = self.broker.store.put_message_batch(batch)
        except ProtocolError as exc:
            return error(ResponseCode.MESSAGE_ILLEGAL, f"the batch is illegal: {exc}", ext)
        if result.append_result is not None:  # statistics: one O(1) call per request
            append = result.append_result
            self.broker.broker_stats.inc_put(header.topic, append.msg_num, append.wrote_bytes)
        return await self.handle_put_result(result, queue_id, wait, ext)

    # -- result ------------------------------------------------------------------------------------

    async def handle_put_result(
        self,
        result: PutMessageResult,
        queue_id: int,
        wait: bool,
        ext: dict[str, str],
    ) -> RemotingCommand:
        """Map a put result to the response (``handlePutMessageResult``): SUCCESS with
        SendMessageResponseHeader's ``msgId`` / ``queueId`` / ``queueOffset`` added to ``ext``, after
        the fsync (SYNC_FLUSH) or the slave's copy (SYNC_MASTER) when ``wait`` (the message's
        WAIT property), FLUSH_DISK_TIMEOUT or the HA code when those fall short; a failed put is
        :meth:`put_error`'s answer. Also the half message's answer (``transaction/processor.py``)."""
        status = result.status
        append = result.append_result
        if status is not PutMessageStatus.PUT_OK or append is None:
            return self.put_error(result, ext)
        code = ResponseCode.SUCCESS
        if wait:
            broker = self.broker
            end = append.wrote_offset + append.wrote_bytes
            # SYNC_FLUSH: the fsync first; SYNC_MASTER: then a slave must hold it (store/ha). Neither
            # (the usual ASYNC_FLUSH master) awaits nothing.
            if broker.group_commit_service is not None and not await broker.wait_for_flush(end):
                code = ResponseCode.FLUSH_DISK_TIMEOUT
            elif broker.ha is not None and broker.ha.is_sync_master:
                code = await broker.handle_ha(end)
        fields = ext.copy()  # SendMessageResponseHeader's fields, written directly (hot path)
        fields["msgId"] = append.msg_id or ",".join(append.msg_ids)
        fields["queueId"] = str(queue_id)
        fields["queueOffset"] = str(append.logics_offset)
        return RemotingCommand(code, flag=RPC_TYPE_RESPONSE, ext_fields=fields)

    def put_error(self, result: PutMessageResult, ext: dict[str, str]) -> RemotingCommand:
        """The answer to a put whose status is not PUT_OK (``handlePutMessageResult``'s error
        branches): the status's response code and remark (plus the put's own), with ``ext``."""
        status = result.status
        detail = f": {result.remark}" if result.remark else ""
        if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
            return error(
                ResponseCode.MESSAGE_ILLEGAL,
                "the message is illegal, maybe msg body or properties length not matched" + detail,
                ext,
            )
        if status is PutMessageStatus.DISK_FULL:  # RocketMQ's code and remark, then tidemq's figures
            return error(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "service not available now. It may be caused by one of the following reasons: the broker's "
                f"disk is full [{disk_util_text(self.broker.store.retention.disk_used_ratio())}], messages are put to "
                "the slave, message store has been shut down, etc." + detail,
                ext,
            )
        if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
            return error(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "service not available now: the disk may be full or the message store is shut down" + detail,
                ext,
            )
        if status is PutMessageStatus.CREATE_MAPEDFILE_FAILED:
            return error(
                ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken" + detail, ext
            )
        if status is PutMessageStatus.OS_PAGECACHE_BUSY:
            return error(
                ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while", ext
            )
        return error(ResponseCode.SYSTEM_ERROR, f"{status.value}{detail}", ext)
