"""A message's trace, assembled from the trace messages that name it (pure).

Mirrors the Java client's ``TraceView.decodeFromTraceTransData`` and what mqadmin's
``queryMsgTraceById`` prints: the Pub records (who sent it, from where, to which broker, how long
the send took, the result) and, per consumer group, each consume attempt (SubBefore joined to its
SubAfter by request id: when it began, how long it took per message, the result, the retry
count). ``client_host`` is the born host of the trace message that carried the record, as Java
shows it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tidemq.client.trace.encoder import ConsumeReturnType, TraceType, decode_trace_data
from tidemq.protocol.message import MessageExt

__all__ = ["ConsumeStep", "MessageTrace", "TraceView", "build_message_trace", "trace_views"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class TraceView:
    """One record about one message. Mirrors ``TraceView`` (``msg_type`` is the TraceType name)."""

    msg_id: str
    msg_type: str
    time_stamp: int
    group_name: str
    cost_time: int
    status: str
    client_host: str
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    offset_msg_id: str = ""
    request_id: str = ""
    retry_times: int = 0
    context_code: int = 0
    transaction_state: str = ""
    from_transaction_check: bool = False


@dataclass(slots=True)
class ConsumeStep:
    """One consume attempt of a group: SubBefore (``begin`` ms) and, once done, SubAfter."""

    group_name: str
    client_host: str
    begin: int
    end: int | None
    cost_time: int | None
    status: str
    retry_times: int
    return_type: str

    def to_json(self) -> dict[str, Any]:
        """The step as a JSON-ready dict (camelCase keys, times in ms)."""
        return {
            "consumerGroup": self.group_name,
            "clientHost": self.client_host,
            "consumeTime": self.begin,
            "endTime": self.end,
            "costTime": self.cost_time,
            "status": self.status,
            "retryTimes": self.retry_times,
            "returnType": self.return_type,
        }


@dataclass(slots=True)
class MessageTrace:
    """Everything known about one message id: its sends and, by group, its consume attempts.

    ``store_time`` (ms) is the broker's store timestamp when the caller looked the message up,
    else Java's estimate (send time + half the send's cost); 0 without a Pub record.
    """

    msg_id: str
    pubs: list[TraceView] = field(default_factory=list)
    consumes: dict[str, list[ConsumeStep]] = field(default_factory=dict)
    store_time: int = 0
    transactions: list[TraceView] = field(default_factory=list)
    """EndTransaction records (a transactional message's commit / rollback / unknown), by time."""
    recalls: list[TraceView] = field(default_factory=list)
    """Recall records (a timer message recalled before its time, RocketMQ 5.3), by time."""

    @property
    def found(self) -> bool:
        """Whether any trace record of the message was found."""
        return bool(self.pubs or self.consumes or self.transactions or self.recalls)

    def to_json(self) -> dict[str, Any]:
        """The trace as a JSON-ready dict (camelCase keys, times in ms)."""
        return {
            "msgId": self.msg_id,
            "storeTime": self.store_time,
            "pub": [
                {
                    "producerGroup": p.group_name,
                    "clientHost": p.client_host,
                    "sendTime": p.time_stamp,
                    "costTime": p.cost_time,
                    "status": p.status,
                    "topic": p.topic,
                    "tags": p.tags,
                    "keys": p.keys,
                    "storeHost": p.store_host,
                    "offsetMsgId": p.offset_msg_id,
                }
                for p in self.pubs
            ],
            "sub": {g: [s.to_json() for s in steps] for g, steps in self.consumes.items()},
            "endTransaction": [
                {
                    "producerGroup": t.group_name,
                    "clientHost": t.client_host,
                    "time": t.time_stamp,
                    "transactionState": t.transaction_state,
                    "fromTransactionCheck": t.from_transaction_check,
                    "transactionId": t.request_id,
                }
                for t in self.transactions
            ],
            "recall": [
                {
                    "producerGroup": r.group_name,
                    "clientHost": r.client_host,
                    "time": r.time_stamp,
                    "status": r.status,
                }
                for r in self.recalls
            ],
        }


def trace_views(msg_id: str, trace_msgs: Iterable[MessageExt]) -> list[TraceView]:
    """The records about ``msg_id`` in ``trace_msgs``. Mirrors ``TraceView.decodeFromTraceTransData``
    (a trace message whose body cannot be decoded is logged and skipped)."""
    out: list[TraceView] = []
    for tm in trace_msgs:
        try:
            contexts = decode_trace_data(tm.body.decode("utf-8", "replace"))
        except ValueError as exc:
            log.warning("undecodable trace message %s: %s", tm.msg_id, exc)
            continue
        for ctx in contexts:
            bean = ctx.trace_beans[0]
            if bean.msg_id != msg_id:
                continue
            out.append(
                TraceView(
                    msg_id=msg_id,
                    msg_type=ctx.trace_type.value,
                    time_stamp=ctx.time_stamp,
                    group_name=ctx.group_name or "",
                    cost_time=ctx.cost_time,
                    status="success" if ctx.is_success else "failed",
                    client_host=tm.born_host,
                    topic=bean.topic or "",
                    tags=bean.tags or "",
                    keys=bean.keys or "",
                    store_host=bean.store_host or "",
                    offset_msg_id=bean.offset_msg_id or "",
                    request_id=(bean.transaction_id or "")
                    if ctx.trace_type is TraceType.EndTransaction
                    else (ctx.request_id or ""),
                    retry_times=bean.retry_times,
                    context_code=ctx.context_code,
                    transaction_state=bean.transaction_state or "",
                    from_transaction_check=bean.from_transaction_check,
                )
            )
    return out


def _return_type(code: int) -> str:
    try:
        return ConsumeReturnType(code).name
    except ValueError:
        return str(code)


def build_message_trace(msg_id: str, trace_msgs: Iterable[MessageExt]) -> MessageTrace:
    """Pub records (by send time) and consume attempts per group (by start time) of ``msg_id``."""
    views = trace_views(msg_id, trace_msgs)
    trace = MessageTrace(msg_id)
    trace.pubs = sorted((v for v in views if v.msg_type == TraceType.Pub.value), key=lambda v: v.time_stamp)
    trace.transactions = sorted(
        (v for v in views if v.msg_type == TraceType.EndTransaction.value), key=lambda v: v.time_stamp
    )
    trace.recalls = sorted(
        (v for v in views if v.msg_type == TraceType.Recall.value), key=lambda v: v.time_stamp
    )
    afters = {v.request_id: v for v in views if v.msg_type == TraceType.SubAfter.value}
    befores = sorted(
        (v for v in views if v.msg_type == TraceType.SubBefore.value), key=lambda v: v.time_stamp
    )
    for b in befores:
        a = afters.pop(b.request_id, None)
        step = ConsumeStep(
            group_name=b.group_name,
            client_host=b.client_host,
            begin=b.time_stamp,
            end=a.time_stamp if a is not None else None,
            cost_time=a.cost_time if a is not None else None,
            status=a.status if a is not None else "consuming",
            retry_times=b.retry_times,
            return_type=_return_type(a.context_code) if a is not None else "",
        )
        trace.consumes.setdefault(b.group_name, []).append(step)
    for a in afters.values():  # a SubAfter whose SubBefore was lost (or written by an old client)
        step = ConsumeStep(
            a.group_name, a.client_host, a.time_stamp - a.cost_time, a.time_stamp, a.cost_time, a.status, 0,
            _return_type(a.context_code),
        )  # fmt: skip
        trace.consumes.setdefault(a.group_name, []).append(step)
    if trace.pubs:
        p = trace.pubs[0]
        trace.store_time = p.time_stamp + p.cost_time // 2
    return trace
