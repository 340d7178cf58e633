"""Half, op, check-copy and discard records: pure builders over the store's record types.

Mirrors RocketMQ 4.9's ``TransactionalMessageBridge`` (``parseHalfMessageInner``,
``addRemoveTagInTransactionOp``, ``renewHalfMessageInner``) and
``AbstractTransactionalMessageCheckListener`` / ``EndTransactionProcessor.endMessageTransaction``
(transactions.md §1). No I/O here: the service in :mod:`tidemq.broker.transaction.service` puts
what these functions build.

Record shapes (all on queue 0 of their system topic; the half queue id is always 0):

* half: the producer's message with ``REAL_TOPIC`` / ``REAL_QID`` added and the sysFlag
  transaction bits reset to 0, on ``RMQ_SYS_TRANS_HALF_TOPIC``;
* check copy: a half record re-appended with ``TRANSACTION_CHECK_TIMES`` + 1 and
  ``TRAN_PREPARED_QUEUE_OFFSET`` = the half queue offset of the transaction's first record (its
  *origin*); an immunity copy has the origin only;
* op: tag ``d`` on ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, body the ended record's half queue offset in
  decimal ASCII (``"17"``, as 4.9 writes it), followed by ``",<origin>"`` when the ended record is
  a copy (5.x's comma-separated form: readers split on ``,``); property ``TIDEMQ_TX_END`` ``8``
  or ``12`` (tidemq: the decision, for :mod:`~tidemq.broker.transaction.fates`);
* committed message: ``REAL_TOPIC`` / ``REAL_QID`` restored and removed, ``TRAN_MSG`` removed,
  sysFlag transaction bits 8, ``preparedTransactionOffset`` = the ended record's commit-log offset;
* discarded: the half record as it is, on ``TRANS_CHECK_MAX_TIME_TOPIC`` queue 0, with
  ``TRAN_PREPARED_QUEUE_OFFSET`` = its origin.

tidemq extension (not in RocketMQ): a half message with property ``TIDEMQ_BATCH_BODY=1`` carries a
SEND_BATCH_MESSAGE body (protocol.md §5.6); its commit puts every item of that body on the real
queue, each with its own properties (the half's are not copied), in the same one append as the op
record. The Spark sink's transactional mode (docs/spark.md) sends a task's rows so: one half, one
END per chunk of rows instead of one per row.
"""

from __future__ import annotations

from typing import Final

from tidemq.errors import ProtocolError
from tidemq.protocol.filter import tags_hash
from tidemq.protocol.message import MessageConst, MessageExt, properties_to_string, property_value
from tidemq.protocol.message_codec import (
    MessageSysFlag,
    decode_batch_columns,
    decompress_body,
    encode_stored_message,
)
from tidemq.protocol.topic import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from tidemq.store.results import MessageExtBatch, MessageExtBrokerInner

__all__ = [
    "BATCH_BODY",
    "CHECK_TIMES",
    "CID_SYS_TRANS",
    "END_PROPERTY",
    "IMMUNITY",
    "PREPARED_QUEUE_OFFSET",
    "REMOVE_TAG",
    "check_body",
    "check_times",
    "committed_batch",
    "committed_message",
    "copy_batch",
    "discard_batch",
    "half_batch",
    "half_properties_text",
    "op_batch",
    "op_message",
    "origin_of",
    "parse_op_body",
]

BATCH_BODY: Final = "TIDEMQ_BATCH_BODY"
"""Half-message property (value ``1``): the body is a batch body whose items the commit puts."""
CID_SYS_TRANS: Final = "CID_RMQ_SYS_TRANS"
"""The group whose offsets on the half and op queues are the check service's progress (``MixAll``)."""
CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
IMMUNITY: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
REMOVE_TAG: Final = "d"
_REAL_TOPIC = MessageConst.PROPERTY_REAL_TOPIC
_REAL_QID = MessageConst.PROPERTY_REAL_QUEUE_ID
_TRAN_MSG = MessageConst.PROPERTY_TRANSACTION_PREPARED
_NOT_TYPE = MessageSysFlag.TRANSACTION_NOT_TYPE
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_TIMER_KEYS = frozenset(
    {"TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_DEL_UNIQKEY", "__STARTDELIVERTIME"}
)
"""Properties that make a committed message go through the timer (RocketMQ 5's put hook)."""
_SCHEDULE_PAIRS = tuple(f"{key}\x01" for key in (_DELAY, *_TIMER_KEYS))
_COMMIT_DROPS = frozenset({_REAL_TOPIC, _REAL_QID, _TRAN_MSG})
END_PROPERTY: Final = "TIDEMQ_TX_END"
"""Op-record property (tidemq): the decision it records, ``"8"`` commit or ``"12"`` rollback
(:mod:`tidemq.broker.transaction.fates` reads it back at start-up)."""
_OP_PROPERTIES = {
    commit: f"{MessageConst.PROPERTY_TAGS}\x01{REMOVE_TAG}\x02{END_PROPERTY}\x01{8 if commit else 12}"
    for commit in (True, False)
}
_PREPARED_PAIR = f"{PREPARED_QUEUE_OFFSET}\x01"


def _uint(raw: str | None) -> int | None:
    """``raw`` (a property a producer may have set) as a non-negative int when it is ASCII digits,
    else None: ``str.isdigit`` alone lets ``"²"`` through to an ``int()`` that raises."""
    return int(raw) if raw is not None and raw.isascii() and raw.isdigit() else None


def half_properties_text(text: str, topic: str, queue_id: int) -> str:
    """The properties text of a half record: the producer's ``text`` plus ``REAL_TOPIC`` / ``REAL_QID``,
    less any ``TRAN_PREPARED_QUEUE_OFFSET`` the producer set: that property names the transaction a
    record belongs to (:func:`origin_of`), so one a producer copied from a check message (or made up)
    would have its END decide another producer's transaction, whose own END is then ignored."""
    if _PREPARED_PAIR in text:
        text = "\x02".join(p for p in text.split("\x02") if not p.startswith(_PREPARED_PAIR))
    pairs = f"{_REAL_TOPIC}\x01{topic}\x02{_REAL_QID}\x01{queue_id}"
    return f"{text.rstrip(chr(2))}\x02{pairs}" if text else pairs


def half_batch(
    *,
    topic: str,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: str,
    reconsume_times: int,
    flag: int,
    body: bytes,
    properties_text: str,
) -> MessageExtBatch:
    """The half record of a sent message (``parseHalfMessageInner``), as a one-message batch: the
    store's batch path leaves ``DELAY`` alone, so a delayed transactional message is scheduled when
    it is committed, not now."""
    return MessageExtBatch(
        TRANS_HALF_TOPIC,
        0,
        MessageSysFlag.reset_transaction_value(sys_flag, _NOT_TYPE),
        born_timestamp,
        born_host,
        reconsume_times,
        flags=[flag],
        bodies=[body],
        properties=[half_properties_text(properties_text, topic, queue_id)],
    )


def origin_of(msg: MessageExt) -> int:
    """The half queue offset of the transaction's first record: ``TRAN_PREPARED_QUEUE_OFFSET`` of a
    copy, else the record's own queue offset."""
    origin = _uint(msg.get_property(PREPARED_QUEUE_OFFSET))
    return msg.queue_offset if origin is None else origin


def check_times(msg: MessageExt) -> int:
    """``TRANSACTION_CHECK_TIMES`` of a half record (0 when absent or not a number)."""
    return _uint(msg.get_property(CHECK_TIMES)) or 0


def _batch(topic: str, msg: MessageExt, properties: dict[str, str]) -> MessageExtBatch:
    return MessageExtBatch(
        topic,
        0,
        msg.sys_flag,
        msg.born_timestamp,
        msg.born_host or "0.0.0.0:0",
        msg.reconsume_times,
        flags=[msg.flag],
        bodies=[msg.body],
        properties=[properties_to_string(properties)],
    )


def copy_batch(msg: MessageExt, *, count_check: bool) -> MessageExtBatch:
    """A half record re-appended to the half queue (``renewHalfMessageInner``): the origin recorded
    in ``TRAN_PREPARED_QUEUE_OFFSET``, and ``TRANSACTION_CHECK_TIMES`` + 1 when ``count_check``
    (a check copy; an immunity copy keeps its count)."""
    props = dict(msg.properties)
    props[PREPARED_QUEUE_OFFSET] = str(origin_of(msg))
    if count_check:
        props[CHECK_TIMES] = str(check_times(msg) + 1)
    return _batch(TRANS_HALF_TOPIC, msg, props)


def discard_batch(msg: MessageExt) -> MessageExtBatch:
    """A half record given up on, for ``TRANS_CHECK_MAX_TIME_TOPIC`` queue 0 (``resolveDiscardMsg``),
    with ``TRAN_PREPARED_QUEUE_OFFSET`` = its origin even when it is the first record (so the
    fate file can be rebuilt from the discards)."""
    props = dict(msg.properties)
    props[PREPARED_QUEUE_OFFSET] = str(origin_of(msg))
    return _batch(TRANS_CHECK_MAX_TIME_TOPIC, msg, props)


def op_message(half: MessageExt, born_host: str, commit: bool = True) -> MessageExtBrokerInner:
    """The op record that ends ``half`` (``addRemoveTagInTransactionOp``): tag ``d``, body the half
    queue offset, plus ``,<origin>`` for a copy; :data:`END_PROPERTY` says whether it commits."""
    origin = origin_of(half)
    body = str(half.queue_offset) if origin == half.queue_offset else f"{half.queue_offset},{origin}"
    props = {MessageConst.PROPERTY_TAGS: REMOVE_TAG, END_PROPERTY: "8" if commit else "12"}
    return MessageExtBrokerInner(
        TRANS_OP_HALF_TOPIC,
        body.encode(),
        properties=props,
        queue_id=half.queue_id,
        born_timestamp=half.store_timestamp,
        born_host=born_host,
        tags_code=tags_hash(REMOVE_TAG),
    )


def parse_op_body(body: bytes) -> list[int]:
    """The half queue offsets an op record ends: ``b"17"`` (4.9) or ``b"17,18,"`` (5.x); parts that
    are not numbers are skipped."""
    out: list[int] = []
    for part in body.split(b","):
        part = part.strip()
        if part.isdigit():
            out.append(int(part))
    return out


def committed_message(half: MessageExt) -> MessageExtBrokerInner:
    """The real message a commit puts (``endMessageTransaction``): topic and queue from
    ``REAL_TOPIC`` / ``REAL_QID`` (both removed), ``TRAN_MSG`` removed, transaction bits 8,
    ``preparedTransactionOffset`` = the half record's commit-log offset; body, flag, born time and
    host, reconsume times and the other properties kept; tags code from ``TAGS``."""
    props = dict(half.properties)
    topic = props.pop(_REAL_TOPIC, half.topic)
    raw_qid = props.pop(_REAL_QID, "0")
    props.pop(_TRAN_MSG, None)
    return MessageExtBrokerInner(
        topic,
        half.body,
        flag=half.flag,
        properties=props,
        queue_id=_uint(raw_qid) or 0,
        sys_flag=MessageSysFlag.reset_transaction_value(
            half.sys_flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE
        ),
        born_timestamp=half.born_timestamp,
        born_host=half.born_host or "0.0.0.0:0",
        reconsume_times=half.reconsume_times,
        prepared_transaction_offset=half.commit_log_offset,
        tags_code=tags_hash(props.get(MessageConst.PROPERTY_TAGS)),
    )


def committed_batch(half: MessageExt) -> MessageExtBatch | None:
    """:func:`committed_message` as a one-message batch built on the properties text (the END's fast
    path), or None when the message needs the general put (a ``DELAY`` level or a timer property
    to schedule). A ``TIDEMQ_BATCH_BODY`` half gives the batch of its items."""
    text = half.properties_text()
    if property_value(text, BATCH_BODY) == "1":
        return _committed_items(half, half.properties)
    if any(pair in text for pair in _SCHEDULE_PAIRS):
        return None
    kept = [p for p in text.split("\x02") if p and p.partition("\x01")[0] not in _COMMIT_DROPS]
    raw_qid = property_value(text, _REAL_QID) or "0"
    return MessageExtBatch(
        property_value(text, _REAL_TOPIC) or half.topic,
        _uint(raw_qid) or 0,
        MessageSysFlag.reset_transaction_value(half.sys_flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE),
        half.born_timestamp,
        half.born_host or "0.0.0.0:0",
        half.reconsume_times,
        half.commit_log_offset,
        flags=[half.flag],
        bodies=[half.body],
        properties=["\x02".join(kept)],
    )


def _committed_items(half: MessageExt, props: dict[str, str]) -> MessageExtBatch:
    """The items of a ``TIDEMQ_BATCH_BODY`` half (inflated first if it was sent compressed), as
    :func:`committed_batch` builds a single message.

    Raises:
        ProtocolError: the body is not a batch body (the END is refused, the half stays pending).
    """
    body = half.body
    sys_flag = half.sys_flag
    if sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        body, sys_flag = decompress_body(body), sys_flag & ~MessageSysFlag.COMPRESSED_FLAG
    flags, bodies, texts = decode_batch_columns(body)
    if not bodies:
        raise ProtocolError("the half message's batch body holds no message")
    raw_qid = props.get(_REAL_QID, "0")
    return MessageExtBatch(
        props.get(_REAL_TOPIC, half.topic),
        _uint(raw_qid) or 0,
        MessageSysFlag.reset_transaction_value(sys_flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE),
        half.born_timestamp,
        half.born_host or "0.0.0.0:0",
        half.reconsume_times,
        half.commit_log_offset,
        flags=flags,
        bodies=bodies,
        properties=texts,
    )


def op_batch(half: MessageExt, born_host: str, commit: bool) -> MessageExtBatch:
    """:func:`op_message` as a one-message batch."""
    origin = origin_of(half)
    body = str(half.queue_offset) if origin == half.queue_offset else f"{half.queue_offset},{origin}"
    return MessageExtBatch(
        TRANS_OP_HALF_TOPIC,
        half.queue_id,
        0,
        half.store_timestamp,
        born_host,
        0,
        flags=[0],
        bodies=[body.encode()],
        properties=[_OP_PROPERTIES[commit]],
    )


def check_body(copy: MessageExt) -> bytes:
    """The body of CHECK_TRANSACTION_STATE (39): the stored layout of the check copy with topic and
    queue id set back to ``REAL_TOPIC`` / ``REAL_QID`` and every property kept (``MessageDecoder.encode``)."""
    props = copy.properties
    raw_qid = props.get(_REAL_QID, "0")
    return encode_stored_message(
        topic=props.get(_REAL_TOPIC, copy.topic),
        body=copy.body,
        properties=properties_to_string(props),
        queue_id=_uint(raw_qid) or 0,
        flag=copy.flag,
        queue_offset=copy.queue_offset,
        commit_log_offset=copy.commit_log_offset,
        sys_flag=copy.sys_flag,
        born_timestamp=copy.born_timestamp,
        born_host=copy.born_host or "0.0.0.0:0",
        store_timestamp=copy.store_timestamp,
        store_host=copy.store_host or "0.0.0.0:0",
        reconsume_times=copy.reconsume_times,
        prepared_transaction_offset=copy.prepared_transaction_offset,
    )
