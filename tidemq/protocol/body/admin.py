"""Admin bodies: connections, consume stats, topic stats, reset-offset tables. Mirrors
``ConsumerConnection``, ``ConsumeStats``, ``TopicStatsTable``, ``ResetOffsetBody(ForC)``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

import orjson

from tidemq.errors import BodyError
from tidemq.protocol.body.base import (
    _R,
    ConsumeFromWhere,
    ConsumeType,
    JsonBody,
    MessageModel,
    _as_int,
    _mq_table,
)
from tidemq.protocol.body.fastjson import fastjson_dumps
from tidemq.protocol.body.heartbeat import SubscriptionData, _enum_or_none
from tidemq.protocol.codes import LanguageCode
from tidemq.protocol.message import MessageQueue


@dataclass(slots=True)
class Connection(JsonBody):
    """One client connection of a group. Mirrors ``Connection`` (``language`` = LanguageCode name)."""

    client_id: str
    client_addr: str
    language: str = "JAVA"
    version: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        lang = r.obj.get("language", "JAVA")
        if isinstance(lang, int) and not isinstance(lang, bool):
            try:
                lang = LanguageCode(lang).name
            except ValueError:  # a language this version does not name
                lang = "OTHER"
        return cls(r.s("clientId"), r.s("clientAddr"), str(lang), r.i("version"))


@dataclass(slots=True)
class ConsumerConnection(JsonBody):
    """GET_CONSUMER_CONNECTION_LIST (203) body. Mirrors ``ConsumerConnection``."""

    connection_set: list[Connection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None

    def compute_min_version(self) -> int:
        """Lowest client version among the connections (``computeMinVersion``)."""
        return min((c.version for c in self.connection_set), default=2**31 - 1)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "connectionSet": [c.to_json() for c in self.connection_set],
            "subscriptionTable": {k: v.to_json() for k, v in self.subscription_table.items()},
        }
        for key, value in (
            ("consumeFromWhere", self.consume_from_where),
            ("consumeType", self.consume_type),
            ("messageModel", self.message_model),
        ):
            if value is not None:
                out[key] = value.value
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(
            [Connection.from_json_checked(c) for c in r.lst("connectionSet")],
            {str(k): SubscriptionData.from_json_checked(v) for k, v in r.dct("subscriptionTable").items()},
            _enum_or_none(ConsumeType, r.obj.get("consumeType")),
            _enum_or_none(MessageModel, r.obj.get("messageModel")),
            _enum_or_none(ConsumeFromWhere, r.obj.get("consumeFromWhere")),
        )


class _MQTableBody(JsonBody):
    """Shared encoding of bodies holding a MessageQueue-keyed ``offsetTable``."""

    __slots__ = ()

    def to_fastjson(self) -> dict[str, Any]:
        """The fastjson shape: a dict whose ``offsetTable`` has MessageQueue keys."""
        raise NotImplementedError

    def encode(self) -> bytes:
        """fastjson's object-as-key form (what Java admin tools read; what the broker sends)."""
        return fastjson_dumps(self.to_fastjson())

    def encode_standard(self) -> bytes:
        """Standard JSON: ``offsetTable`` as a list of ``{brokerName, queueId, topic, ...}``."""
        return orjson.dumps(self.to_json(), option=orjson.OPT_SORT_KEYS)


def _flat(mq: MessageQueue, values: dict[str, Any]) -> dict[str, Any]:
    return {**mq.to_json(), **values}


@dataclass(slots=True)
class OffsetWrapper(JsonBody):
    """Per-queue consume progress (``lastTimestamp`` ms). Mirrors ``OffsetWrapper``."""

    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(r.i("brokerOffset"), r.i("consumerOffset"), r.i("lastTimestamp"))


@dataclass(slots=True)
class ConsumeStats(_MQTableBody):
    """GET_CONSUME_STATS (208) body. Mirrors ``ConsumeStats``; see the module doc for the forms."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def compute_total_diff(self) -> int:
        """Sum of ``broker_offset - consumer_offset`` over all queues (the group's lag)."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())

    def to_fastjson(self) -> dict[str, Any]:
        return {
            "consumeTps": float(self.consume_tps),
            "offsetTable": {mq: w.to_json() for mq, w in self.offset_table.items()},
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeTps": float(self.consume_tps),
            "offsetTable": [_flat(mq, self.offset_table[mq].to_json()) for mq in sorted(self.offset_table)],
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        table = _mq_table(r.obj.get("offsetTable"), cls.__name__, OffsetWrapper.from_json_checked)
        return cls(table, r.f("consumeTps"))


@dataclass(slots=True)
class TopicOffset(JsonBody):
    """Per-queue offsets of a topic (``lastUpdateTimestamp`` ms). Mirrors ``TopicOffset``."""

    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(r.i("minOffset"), r.i("maxOffset"), r.i("lastUpdateTimestamp"))


@dataclass(slots=True)
class TopicStatsTable(_MQTableBody):
    """GET_TOPIC_STATS_INFO (202) body. Mirrors ``TopicStatsTable``; see the module doc."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def to_fastjson(self) -> dict[str, Any]:
        return {"offsetTable": {mq: t.to_json() for mq, t in self.offset_table.items()}}

    def to_json(self) -> dict[str, Any]:
        return {
            "offsetTable": [_flat(mq, self.offset_table[mq].to_json()) for mq in sorted(self.offset_table)]
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(_mq_table(r.obj.get("offsetTable"), cls.__name__, TopicOffset.from_json_checked))


def _offset_value(value: Any) -> int:
    if isinstance(value, dict):
        value = _R(value, "ResetOffsetBody entry").i("offset")
    try:
        return _as_int(value)
    except (TypeError, ValueError):
        raise BodyError(f"ResetOffsetBody: offset {value!r} is not an integer") from None


@dataclass(slots=True)
class ResetOffsetBody(_MQTableBody):
    """INVOKE_BROKER_TO_RESET_OFFSET response / RESET_CONSUMER_CLIENT_OFFSET body for Java.

    Mirrors ``ResetOffsetBody``: ``offsetTable`` maps a queue to its new offset.
    ``encode()`` writes fastjson's object-key form; ``to_json()`` the ForC list form.
    """

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def to_fastjson(self) -> dict[str, Any]:
        return {"offsetTable": dict(self.offset_table)}

    def to_json(self) -> dict[str, Any]:
        return {
            "offsetTable": [_flat(mq, {"offset": self.offset_table[mq]}) for mq in sorted(self.offset_table)]
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(_mq_table(r.obj.get("offsetTable"), cls.__name__, _offset_value))


@dataclass(slots=True)
class ResetOffsetBodyForC(ResetOffsetBody):
    """RESET_CONSUMER_CLIENT_OFFSET (220) body for C++ consumers. Mirrors ``ResetOffsetBodyForC``.

    Always standard JSON: ``{"offsetTable":[{"brokerName","offset","queueId","topic"}]}``.
    """

    def encode(self) -> bytes:
        return self.encode_standard()
