"""Timer-message recall: RECALL_MESSAGE (370) and the send answer's ``recallHandle`` (RocketMQ 5.3).

Mirrors ``RecallMessageProcessor`` and ``SendMessageProcessor.attachRecallHandle``:

* a successful send of a timer message (single send, not a batch, not a retry topic) answers with
  ``recallHandle`` (:class:`~tidemq.protocol.recall.RecallHandle`: real topic, this broker's name,
  ``TIMER_OUT_MS`` + 1, UNIQ_KEY), see :func:`attach_recall_handle`;
* RECALL_MESSAGE ``{producerGroup?, topic, recallHandle}`` stores a cancellation marker: a timer
  message on the handle's topic with body ``"0"``, tag ``_RECALL_TAG_``, ``UNIQ_KEY`` = the
  recalled id, ``TIMER_DEL_UNIQKEY`` = ``topic+uniqKey`` and the recalled message's due time, so
  the timer store (``store/timer/cancels.py``) never delivers the message. The answer's ``msgId`` is
  the recalled UNIQ_KEY.

Refusals (RocketMQ's codes and remarks; tidemq adds what was wrong after a colon):
NO_PERMISSION ``recall failed, operation is forbidden`` (``recall_message_enable`` off),
SLAVE_NOT_AVAILABLE on a slave, TOPIC_NOT_EXIST, ILLEGAL_OPERATION (604) for a handle that does
not decode, names another topic or broker, or whose time has passed (``recall failed, timestamp
invalid``: the message is due, so it has been or is being delivered and cannot be recalled),
SYSTEM_ERROR when the store refuses the marker.

Differences from RocketMQ: ``recall_message_enable`` defaults to true (RocketMQ: false); tidemq
schedules at the exact ``TIMER_OUT_MS``, so the marker is due at the handle's timestamp - 1 (RocketMQ
floors both to the wheel precision). A recall of an unknown id succeeds and cancels nothing, as in
RocketMQ.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

from tidemq.broker.timer_service import transform_timer_message
from tidemq.clock import now_ms
from tidemq.errors import ProtocolError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.filter import tags_hash
from tidemq.protocol.headers import HeaderError
from tidemq.protocol.headers.recall import RecallMessageRequestHeader
from tidemq.protocol.message import MessageConst, properties_to_string
from tidemq.protocol.recall import RecallHandle, RecallHandleError, delete_key
from tidemq.protocol.topic import RETRY_GROUP_TOPIC_PREFIX, TIMER_TOPIC
from tidemq.store.results import MessageExtBrokerInner, PutMessageStatus

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.broker.config import BrokerConfig
    from tidemq.remoting import Channel

__all__ = ["RECALL_MESSAGE_TAG", "RecallMessageProcessor", "attach_recall_handle"]

log = logging.getLogger(__name__)

RECALL_MESSAGE_TAG = "_RECALL_TAG_"
"""The marker's TAGS (``RecallMessageProcessor.RECALL_MESSAGE_TAG``)."""
_STORED = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)
_C = MessageConst


def attach_recall_handle(
    answer: RemotingCommand, properties: dict[str, str], config: BrokerConfig
) -> RemotingCommand:
    """Add ``recallHandle`` to a stored send's ``answer`` when ``properties`` (the stored message's,
    after the timer hook) make it a parked timer message (``TIMER_OUT_MS`` and ``REAL_TOPIC``, not a
    retry topic, with a UNIQ_KEY, not a cancellation); returns ``answer``. ``config``: this broker's
    (its ``broker_name`` goes in the handle)."""
    out = properties.get(_C.PROPERTY_TIMER_OUT_MS)
    topic = properties.get(_C.PROPERTY_REAL_TOPIC)
    uniq = properties.get(_C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if (
        out is None
        or _C.PROPERTY_TIMER_DEL_UNIQKEY in properties  # a cancellation itself
        or topic is None
        or uniq is None
        or "queueOffset" not in answer.ext_fields
        or topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        or not (out.isascii() and out.isdigit())
    ):
        return answer
    answer.ext_fields["recallHandle"] = RecallHandle.for_timer(
        topic, config.broker_name, int(out), uniq
    ).encode()
    return answer


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


class RecallMessageProcessor:
    """RECALL_MESSAGE (370). Mirrors ``RecallMessageProcessor``; see the module docstring.

    Args:
        broker: the owning broker (config, topics, store, timer service).
    """

    CODES: ClassVar[tuple[int, ...]] = (RequestCode.RECALL_MESSAGE,)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def _answer(self, code: int, remark: str | None, msg_id: str | None = None) -> RemotingCommand:
        ext = {_C.PROPERTY_MSG_REGION: self.broker.config.region_id}
        if msg_id is not None:
            ext["msgId"] = msg_id
        return RemotingCommand.create_response(code, remark, ext)

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """Check the request and the handle, store the cancellation marker; the answer."""
        try:
            header = RecallMessageRequestHeader.from_command(request)
        except HeaderError as exc:
            return self._answer(ResponseCode.INVALID_PARAMETER, f"bad recall request header: {exc}")
        refusal = self._check(header)
        if isinstance(refusal, RemotingCommand):
            return refusal
        handle, due = refusal
        inner = self._marker(channel, header, handle, due)
        problem = transform_timer_message(inner, self.broker.store_config, now_ms())
        if problem is not None:
            problem.ext_fields[_C.PROPERTY_MSG_REGION] = self.broker.config.region_id
            return problem
        inner.properties_string = properties_to_string(inner.properties)
        try:
            result = self.broker.store.put_message(inner)
        except ProtocolError as exc:
            return self._answer(ResponseCode.SYSTEM_ERROR, f"recall failed, execute error: {exc}")
        if result.status not in _STORED or result.append_result is None:
            detail = f"{result.status.value} {result.remark or ''}".rstrip()
            return self._answer(ResponseCode.SYSTEM_ERROR, f"recall failed, execute error: {detail}")
        append = result.append_result
        self.broker.broker_stats.inc_put(TIMER_TOPIC, 1, append.wrote_bytes)
        if not await self.broker.wait_for_flush(append.wrote_offset + append.wrote_bytes):
            log.warning("recall of %s on %s: the marker's flush timed out", handle.message_id, handle.topic)
        service = self.broker.timer_message_service
        if service is not None:  # in effect now, not only once the timer store has read the marker
            service.timer_store.cancels.add(delete_key(handle.topic, handle.message_id), due)
        log.info(
            "recall of %s on %s (due %s) from %s",
            handle.message_id,
            handle.topic,
            _iso(due),
            channel.remote_addr,
        )
        return self._answer(ResponseCode.SUCCESS, None, handle.message_id)

    def _check(self, header: RecallMessageRequestHeader) -> RemotingCommand | tuple[RecallHandle, int]:
        """The refusal, or the decoded handle and the recalled message's due time (ms)."""
        broker = self.broker
        cfg = broker.config
        if not cfg.recall_message_enable:
            return self._answer(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if cfg.is_slave:
            return self._answer(
                ResponseCode.SLAVE_NOT_AVAILABLE, "recall failed, broker service not available"
            )
        if broker.topic_config_manager.select_topic_config(header.topic) is None:
            return self._answer(
                ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{header.topic}] not exist"
            )
        try:
            handle = RecallHandle.decode(header.recall_handle)
        except RecallHandleError as exc:
            return self._answer(ResponseCode.ILLEGAL_OPERATION, str(exc))
        if handle.topic != header.topic:
            return self._answer(
                ResponseCode.ILLEGAL_OPERATION,
                f"recall failed, topic not match: the handle is for {handle.topic}, not {header.topic}",
            )
        if handle.broker_name != cfg.broker_name:
            return self._answer(
                ResponseCode.ILLEGAL_OPERATION,
                f"recall failed, broker service not available: the handle is for broker {handle.broker_name}, "
                f"this is {cfg.broker_name}",
            )
        stamp = handle.timestamp_ms
        now = now_ms()
        max_ms = broker.store_config.timer_max_delay_sec * 1000
        if stamp - 1 <= now:  # tidemq delivers at TIMER_OUT_MS exactly (= stamp - 1)
            why = (
                f"the message was due at {_iso(stamp - 1)}: it has been delivered (or is being delivered) "
                "and cannot be recalled"
                if stamp > 0
                else f"timestamp {handle.timestamp!r} is not a time"
            )
            return self._answer(ResponseCode.ILLEGAL_OPERATION, f"recall failed, timestamp invalid: {why}")
        if stamp - now >= max_ms:
            return self._answer(
                ResponseCode.ILLEGAL_OPERATION,
                f"recall failed, timestamp invalid: {_iso(stamp)} is more than {max_ms} ms ahead",
            )
        return handle, stamp - 1

    def _marker(
        self, channel: Channel, header: RecallMessageRequestHeader, handle: RecallHandle, due: int
    ) -> MessageExtBrokerInner:
        """The cancellation marker (``RecallMessageProcessor.buildMessage``), before the timer hook."""
        now = now_ms()
        props = {
            _C.PROPERTY_TAGS: RECALL_MESSAGE_TAG,
            _C.PROPERTY_TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.message_id),
            _C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id,
            _C.PROPERTY_TIMER_DELIVER_MS: str(due),
            "BORN_TIMESTAMP": str(now),
            "TRACE_CONTEXT": "",
        }
        if header.producer_group:
            props[_C.PROPERTY_PRODUCER_GROUP] = header.producer_group
        return MessageExtBrokerInner(
            handle.topic,
            b"0",
            properties=props,
            queue_id=0,
            born_timestamp=now,
            born_host=channel.remote_addr,
            tags_code=tags_hash(RECALL_MESSAGE_TAG),
        )
