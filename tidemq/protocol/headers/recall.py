"""RECALL_MESSAGE (370, RocketMQ 5.3) headers. Mirrors ``RecallMessageRequestHeader`` and
``RecallMessageResponseHeader``; the handle itself is :mod:`tidemq.protocol.recall`."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.protocol.headers.base import CommandHeader, s


@dataclass(slots=True, kw_only=True)
class RecallMessageRequestHeader(CommandHeader):
    """RECALL_MESSAGE request: cancel the timer message ``recall_handle`` names (the send answer's
    ``recallHandle``) on ``topic``. ``producer_group`` is optional (``@CFNullable``); ``bname`` is
    the broker name the Java client adds (``TopicRequestHeader``)."""

    producer_group: str | None = s("producerGroup", required=False)
    topic: str = s("topic")
    recall_handle: str = s("recallHandle")
    bname: str | None = s("bname", required=False)


@dataclass(slots=True, kw_only=True)
class RecallMessageResponseHeader(CommandHeader):
    """RECALL_MESSAGE answer: ``msg_id`` is the recalled message's UNIQ_KEY."""

    msg_id: str = s("msgId")
