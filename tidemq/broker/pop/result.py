"""What a pop returns, and the error every POP call raises. Pure code.

:class:`PopResult` serves both front ends: the remoting POP_MESSAGE answer (``body`` +
:meth:`PopResult.response_fields`) and the gRPC ReceiveMessage (:meth:`PopResult.decode_messages`,
each with its receipt handle in the ``POP_CK`` property).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.message import MessageExt
from tidemq.protocol.message_codec import decode_message

PROPERTY_POP_CK = "POP_CK"
"""``MessageConst.PROPERTY_POP_CK``: a popped message's receipt handle (extraInfo)."""
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
"""``MessageConst.PROPERTY_FIRST_POP_TIME``: when the message was first popped (ms)."""


class PopError(Exception):
    """A POP call refused: ``code`` is the RocketMQ response code, ``remark`` says what was wrong.

    Attributes:
        code: a :class:`~tidemq.protocol.codes.ResponseCode` (e.g. TOPIC_NOT_EXIST,
            SUBSCRIPTION_GROUP_NOT_EXIST, INVALID_PARAMETER, NO_MESSAGE, POLLING_FULL,
            NO_PERMISSION, SYSTEM_ERROR).
        remark: human-readable reason.
        expired: True when a receipt handle's invisible time is over (gRPC: INVALID_RECEIPT_HANDLE
            "receipt handle is expired").
    """

    def __init__(self, code: int, remark: str, *, expired: bool = False) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark
        self.expired = expired

    def __repr__(self) -> str:
        try:
            code: object = ResponseCode(self.code).name
        except ValueError:  # a code this version does not name
            code = self.code
        return f"PopError({code}, {self.remark!r})"


@dataclass(slots=True)
class PoppedMessage:
    """One popped message.

    Attributes:
        record: the stored record to send (commit-log layout). A message from the pop retry topic
            is re-encoded with the requested topic and its ``POP_CK`` property, as RocketMQ does.
        topic: the topic it was read from (the pop retry topic for a retried message).
        queue_id / queue_offset: where it is in ``topic``.
        extra_info: its receipt handle (ack / change-invisible-time take it).
        reconsume_times: earlier deliveries (delivery attempt - 1).
    """

    record: bytes
    topic: str
    queue_id: int
    queue_offset: int
    extra_info: str
    reconsume_times: int


@dataclass(slots=True)
class PopResult:
    """The outcome of :meth:`PopService.pop` (found or not).

    Attributes:
        messages: the popped messages, in queue order per queue.
        pop_time / invisible_time: ms; every message is invisible until ``pop_time + invisible_time``.
        revive_qid: the revive queue of the check-points (999 for an order pop).
        rest_num: messages left behind in the queues read.
        start_offset_info / msg_offset_info / order_count_info: the response header strings.
        polling_timed_out: the pop waited its whole poll time and found nothing.
        topic: the requested topic; broker_name: this broker.
    """

    topic: str
    broker_name: str
    pop_time: int
    invisible_time: int
    revive_qid: int
    messages: list[PoppedMessage] = field(default_factory=list)
    rest_num: int = 0
    start_offset_info: list[str] = field(default_factory=list)
    msg_offset_info: list[str] = field(default_factory=list)
    order_count_info: list[str] = field(default_factory=list)
    polling_timed_out: bool = False

    @property
    def found(self) -> bool:
        """Whether the pop returned at least one message (``PopStatus.FOUND``)."""
        return bool(self.messages)

    def body(self) -> bytes:
        """The POP_MESSAGE response body: the records back to back (as a pull body)."""
        return b"".join(m.record for m in self.messages)

    def response_fields(self) -> dict[str, str]:
        """The ``PopMessageResponseHeader`` ext fields."""
        fields = {
            "popTime": str(self.pop_time),
            "invisibleTime": str(self.invisible_time),
            "reviveQid": str(self.revive_qid),
            "restNum": str(self.rest_num),
        }
        if self.start_offset_info:
            fields["startOffsetInfo"] = ";".join(self.start_offset_info)
        if self.msg_offset_info:
            fields["msgOffsetInfo"] = ";".join(self.msg_offset_info)
        if self.order_count_info:
            fields["orderCountInfo"] = ";".join(self.order_count_info)
        return fields

    def decode_messages(self, *, decompress: bool = True) -> list[MessageExt]:
        """The messages decoded, each with ``topic`` = the requested topic, ``broker_name``,
        ``reconsume_times`` (delivery attempt - 1) and properties ``POP_CK`` (the receipt handle)
        and ``1ST_POP_TIME``.

        Raises:
            ProtocolError: a stored record does not decode (a corrupt store).
        """
        out: list[MessageExt] = []
        for popped in self.messages:
            msg = decode_message(popped.record, decompress=decompress)[0]
            msg.topic = self.topic
            msg.broker_name = self.broker_name
            msg.reconsume_times = popped.reconsume_times
            msg.queue_id = popped.queue_id
            msg.queue_offset = popped.queue_offset
            msg.put_property(PROPERTY_POP_CK, popped.extra_info)
            if msg.get_property(PROPERTY_FIRST_POP_TIME) is None:
                msg.put_property(PROPERTY_FIRST_POP_TIME, str(self.pop_time))
            out.append(msg)
        return out
