"""Message trace records: RocketMQ's ``TraceDataEncoder`` text format, sans I/O.

Mirrors ``TraceType``, ``TraceBean``, ``TraceContext``, ``TraceTransferBean`` and
``TraceDataEncoder`` of the Java client (4.9; the 5.x decoder's additions are accepted too). A
trace message's body is a run of records, each ended by ``\\x02`` (FIELD_SPLITOR) with fields
separated by ``\\x01`` (CONTENT_SPLITOR)::

    Pub       timeStamp region group topic msgId tags keys storeHost bodyLength costTime msgType offsetMsgId success
    SubBefore timeStamp region group requestId msgId retryTimes keys
    SubAfter  requestId msgId costTime success keys contextCode timeStamp group
    EndTransaction timeStamp region group topic msgId tags keys storeHost msgType transactionId state fromCheck
    Recall    timeStamp region group topic msgId success            (5.3: a timer message recalled)

Java writes absent strings as ``null`` (``StringBuilder.append(null)``), booleans as
``true``/``false``, ``msgType`` as the ``MessageType`` ordinal. Older Pub records have 13 fields
(no offsetMsgId), 5.x ones may add ``clientHost``; older SubAfter records stop after ``keys``.
The message's keys are every record's msgId plus its keys (split on spaces): what
``queryMsgTraceById`` looks the message id up by.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, IntEnum

__all__ = [
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "ConsumeReturnType",
    "MessageType",
    "TraceBean",
    "TraceContext",
    "TraceTransferBean",
    "TraceType",
    "decode_trace_data",
    "encode_trace_context",
]

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"


class TraceType(Enum):
    """``TraceType``: what a record describes."""

    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"
    Recall = "Recall"


class MessageType(IntEnum):
    """``MessageType`` (encoded by ordinal)."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3
    Order_Msg = 4


class ConsumeReturnType(IntEnum):
    """``ConsumeReturnType``: a SubAfter record's ``contextCode``."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(slots=True)
class TraceBean:
    """One message in a trace record. Mirrors ``TraceBean`` (``None`` prints as Java's ``null``)."""

    topic: str | None = ""
    msg_id: str | None = ""
    offset_msg_id: str | None = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str | None = ""
    client_host: str | None = ""
    store_time: int = 0
    retry_times: int = 0
    body_length: int = 0
    msg_type: MessageType = MessageType.Normal_Msg
    transaction_id: str | None = None
    transaction_state: str | None = None
    from_transaction_check: bool = False


@dataclass(slots=True)
class TraceContext:
    """One trace event. Mirrors ``TraceContext``: ``time_stamp`` ms since the epoch, ``cost_time`` ms
    (per message for a consume), ``context_code`` a :class:`ConsumeReturnType` for SubAfter."""

    trace_type: TraceType
    time_stamp: int = 0
    region_id: str | None = ""
    group_name: str | None = ""
    cost_time: int = 0
    is_success: bool = True
    request_id: str | None = ""
    context_code: int = 0
    trace_beans: list[TraceBean] = field(default_factory=list)


@dataclass(slots=True)
class TraceTransferBean:
    """Encoded records of one context and the keys they are found by. Mirrors ``TraceTransferBean``."""

    trans_data: str
    trans_key: list[str]


def _s(value: object) -> str:
    """Java's ``StringBuilder.append``: ``null`` for None, ``true``/``false`` for booleans."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _record(*fields: object) -> str:
    return CONTENT_SPLITOR.join(map(_s, fields)) + FIELD_SPLITOR


def encode_trace_context(ctx: TraceContext) -> TraceTransferBean:
    """The records of ``ctx`` and their keys. Mirrors ``TraceDataEncoder.encoderFromContextBean``.

    A Pub, EndTransaction or Recall context encodes its first bean; SubBefore / SubAfter one record per
    bean.
    """
    t = ctx.trace_type
    parts: list[str] = []
    if t is TraceType.Pub:
        b = ctx.trace_beans[0]
        parts.append(
            _record(
                t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
                b.store_host, b.body_length, ctx.cost_time, int(b.msg_type), b.offset_msg_id, ctx.is_success,
            )
        )  # fmt: skip
    elif t is TraceType.SubBefore:
        for b in ctx.trace_beans:
            parts.append(
                _record(
                    t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, ctx.request_id, b.msg_id,
                    b.retry_times, b.keys,
                )
            )  # fmt: skip
    elif t is TraceType.SubAfter:
        for b in ctx.trace_beans:
            parts.append(
                _record(
                    t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.is_success, b.keys,
                    ctx.context_code, ctx.time_stamp, ctx.group_name,
                )
            )  # fmt: skip
    elif t is TraceType.Recall:
        b = ctx.trace_beans[0]
        parts.append(
            _record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, ctx.is_success)
        )
    else:
        b = ctx.trace_beans[0]
        parts.append(
            _record(
                t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
                b.store_host, int(b.msg_type), b.transaction_id, b.transaction_state, b.from_transaction_check,
            )
        )  # fmt: skip
    keys: list[str] = []
    for b in ctx.trace_beans:
        keys.append(_s(b.msg_id))
        if b.keys:
            keys.extend(k for k in b.keys.split(" ") if k)
    return TraceTransferBean("".join(parts), keys)


def _bool(text: str) -> bool:
    """Java's ``Boolean.parseBoolean``."""
    return text.lower() == "true"


def _decode_one(line: list[str]) -> TraceContext | None:
    kind = line[0]
    if kind == "Pub":
        ctx = TraceContext(TraceType.Pub, int(line[1]), line[2], line[3], cost_time=int(line[10]))
        b = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8])
        b.body_length = int(line[9])
        b.msg_type = MessageType(int(line[11]))
        if len(line) == 13:
            ctx.is_success = _bool(line[12])
        elif len(line) >= 14:
            b.offset_msg_id = line[12]
            ctx.is_success = _bool(line[13])
            if len(line) >= 15:
                b.client_host = line[14]
    elif kind == "SubBefore":
        ctx = TraceContext(TraceType.SubBefore, int(line[1]), line[2], line[3], request_id=line[4])
        b = TraceBean(msg_id=line[5], retry_times=int(line[6]), keys=line[7])
    elif kind == "SubAfter":
        ctx = TraceContext(TraceType.SubAfter, request_id=line[1], cost_time=int(line[3]))
        ctx.is_success = _bool(line[4])
        b = TraceBean(msg_id=line[2], keys=line[5])
        if len(line) >= 7:
            ctx.context_code = int(line[6])
        if len(line) >= 9:
            ctx.time_stamp = int(line[7])
            ctx.group_name = line[8]
    elif kind == "EndTransaction":
        ctx = TraceContext(TraceType.EndTransaction, int(line[1]), line[2], line[3])
        b = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8])
        b.msg_type = MessageType(int(line[9]))
        b.transaction_id, b.transaction_state = line[10], line[11]
        b.from_transaction_check = _bool(line[12])
    elif kind == "Recall":
        ctx = TraceContext(TraceType.Recall, int(line[1]), line[2], line[3])
        b = TraceBean(topic=line[4], msg_id=line[5])
        ctx.is_success = _bool(line[6])
    else:  # anything newer: not shown
        return None
    ctx.trace_beans.append(b)
    return ctx


def decode_trace_data(text: str) -> list[TraceContext]:
    """The contexts in a trace message body, one per record. Mirrors
    ``TraceDataEncoder.decoderFromTraceDataString`` (unknown record types are skipped).

    Raises:
        ValueError: a record is truncated or holds a non-number where a number belongs.
    """
    out: list[TraceContext] = []
    for record in text.split(FIELD_SPLITOR):
        if not record:
            continue
        try:
            ctx = _decode_one(record.split(CONTENT_SPLITOR))
        except IndexError:
            raise ValueError(f"truncated trace record: {record!r}") from None
        if ctx is not None:
            out.append(ctx)
    return out
