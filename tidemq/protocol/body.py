"""JSON request / response bodies, their enums, and fastjson's non-standard JSON.

Mirrors RocketMQ's ``RemotingSerializable`` bodies (``common/protocol/body``, ``route``,
``heartbeat``, ``admin``, ``TopicConfig``, ``DataVersion``, ``SubscriptionGroupConfig``).

Every body is a dataclass with ``to_json() -> dict`` / ``from_json(obj)`` (Python objects) and
``encode() -> bytes`` / ``decode(data)`` (wire bytes). ``encode`` writes what Java's fastjson
writes: the Java field names, keys in alphabetical order, nulls omitted. ``decode`` is tolerant
of what real peers send: the C++ client's enum ordinals, string numbers, absent sets and trailing
newline, fastjson's unquoted integer keys (``{0:"ip:port"}``). Bad input raises
:class:`BodyError` saying which body and field.

**MessageQueue-keyed maps** (``ConsumeStats``, ``TopicStatsTable``, ``ResetOffsetBody``): Java
writes them with *JSON objects as keys* (``{{"brokerName":"b","queueId":0,"topic":"T"}:5}``),
which only fastjson can read. Decision: ``encode()`` of these classes writes that fastjson form,
because that is what Java admin tools (mqadmin, dashboard) parse, and what the tidemq broker
sends. ``to_json()`` gives a standard-JSON form (a list of ``{brokerName, queueId, topic, ...}``
entries, the shape of Java's ``ResetOffsetBodyForC``) and ``encode_standard()`` its bytes, for
tools that want plain JSON. ``decode()`` reads both forms (and ``"MessageQueue [topic=...]"``
string keys). :class:`ResetOffsetBodyForC` always encodes the list form: the only one the C++
consumer parses.
"""

from __future__ import annotations

import re
import struct
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from json import decoder as _json_decoder
from typing import Any, Final, Self, TypeVar

import orjson

from tidemq.errors import LocalProtocolError, ProtocolError
from tidemq.protocol.codes import LanguageCode
from tidemq.protocol.message import MessageQueue

EXPRESSION_TYPE_TAG: Final = "TAG"
EXPRESSION_TYPE_SQL92: Final = "SQL92"
SINGLE_TAG: Final = "SINGLE_TAG"
MULTI_TAG: Final = "MULTI_TAG"
MAX_DECOMPRESSED_SIZE: Final = 64 * 1024 * 1024
"""Cap on an inflated compressed RegisterBrokerBody, in bytes."""

_V = TypeVar("_V")


class BodyError(ProtocolError):
    """A body is not valid JSON, or lacks / mistypes a field its class needs."""


def _now_ms() -> int:
    return int(time.time() * 1000)


# --------------------------------------------------------------------------------------------
# Enums: Java names as values; ``from_wire`` also takes the C++ client's ordinals.
# --------------------------------------------------------------------------------------------


class _WireEnum(StrEnum):
    @classmethod
    def from_wire(cls, value: object) -> Self:
        """Accept a Java enum name (``"CLUSTERING"``) or an ordinal (``1`` or ``"1"``, C++).

        Raises:
            BodyError: unknown name or ordinal out of range.
        """
        if isinstance(value, cls):
            return value
        members = list(cls)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(members):
            return members[value]
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                pass
        names = ", ".join(m.value for m in members)
        raise BodyError(
            f"{cls.__name__}: unknown value {value!r}; expected one of {names} or 0..{len(members) - 1}"
        )

    @property
    def ordinal(self) -> int:
        """Java's ``ordinal()`` (what the C++ client sends)."""
        return list(type(self)).index(self)


class MessageModel(_WireEnum):
    """Mirrors ``MessageModel``: BROADCASTING (0), CLUSTERING (1)."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeType(_WireEnum):
    """Mirrors ``ConsumeType``: pull consumer ACTIVELY (0), push consumer PASSIVELY (1)."""

    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"


class ConsumeFromWhere(_WireEnum):
    """Mirrors ``ConsumeFromWhere`` (ordinals 0..5 in this order; 1-3 are deprecated)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = (
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    )
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


# --------------------------------------------------------------------------------------------
# Tolerant field readers
# --------------------------------------------------------------------------------------------


class _R:
    """Reads fields of one JSON object, raising BodyError that names ``ctx`` and the field."""

    __slots__ = ("ctx", "obj")

    def __init__(self, value: Any, ctx: str) -> None:
        if not isinstance(value, dict):
            raise BodyError(f"{ctx} must be a JSON object, got {type(value).__name__}")
        self.obj: dict[Any, Any] = value
        self.ctx = ctx

    def _bad(self, key: str, want: str) -> BodyError:
        return BodyError(f"{self.ctx}: field {key!r} must be {want}, got {self.obj.get(key)!r}")

    def i(self, key: str, default: int = 0) -> int:
        value = self.obj.get(key)
        if value is None:
            return default
        try:
            return _as_int(value)
        except (TypeError, ValueError):
            raise self._bad(key, "an integer") from None

    def f(self, key: str, default: float = 0.0) -> float:
        value = self.obj.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise self._bad(key, "a number")
        try:
            return float(value)
        except ValueError:
            raise self._bad(key, "a number") from None

    def s(self, key: str, default: str = "") -> str:
        value = self.obj.get(key)
        return default if value is None else str(value)

    def req_s(self, key: str) -> str:
        value = self.obj.get(key)
        if value is None:
            raise BodyError(f"{self.ctx}: missing required field {key!r}")
        return str(value)

    def opt_s(self, key: str) -> str | None:
        value = self.obj.get(key)
        return None if value is None else str(value)

    def b(self, key: str, default: bool = False) -> bool:
        value = self.obj.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if value in (0, 1, "0", "1"):
            return bool(int(value))
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise self._bad(key, "a boolean")

    def lst(self, key: str) -> list[Any]:
        value = self.obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            raise self._bad(key, "an array")
        return list(value)

    def dct(self, key: str) -> dict[Any, Any]:
        value = self.obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._bad(key, "an object")
        return value


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError("boolean is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        return int(value)
    raise ValueError(f"not an integer: {value!r}")


def _mq(value: Any, ctx: str) -> MessageQueue:
    r = _R(dict(value) if isinstance(value, tuple) else value, f"{ctx} message queue")
    return MessageQueue(r.req_s("topic"), r.req_s("brokerName"), r.i("queueId"))


def _mq_set(values: Iterable[Any], ctx: str) -> set[MessageQueue]:
    return {_mq(v, ctx) for v in values}


def _mq_list_json(mqs: Iterable[MessageQueue]) -> list[dict[str, Any]]:
    return [mq.to_json() for mq in sorted(mqs)]


_MQ_TO_STRING = re.compile(r"MessageQueue \[topic=(.*), brokerName=(.*), queueId=(-?\d+)\]")


def _mq_key(key: Any, ctx: str) -> MessageQueue:
    """A map key naming a MessageQueue: an object key, JSON text, or Java's ``toString()``."""
    if isinstance(key, tuple):
        return _mq(key, ctx)
    if isinstance(key, str):
        text = key.strip()
        if text.startswith("{"):
            return _mq(loads_body(text, ctx), ctx)
        match = _MQ_TO_STRING.fullmatch(text)
        if match:
            return MessageQueue(match[1], match[2], int(match[3]))
    raise BodyError(f"{ctx}: map key {key!r} does not name a message queue")


def _mq_table(value: Any, ctx: str, parse: Callable[[Any], _V]) -> dict[MessageQueue, _V]:
    """Read a MessageQueue-keyed map in fastjson form (object keys) or list form."""
    if value is None:
        return {}
    if isinstance(value, list | tuple):
        return {_mq(entry, ctx): parse(entry) for entry in value}
    if isinstance(value, dict):
        return {_mq_key(k, ctx): parse(v) for k, v in value.items()}
    raise BodyError(f"{ctx}: offsetTable must be an object or an array, got {type(value).__name__}")


def loads_body(data: bytes | bytearray | memoryview | str, ctx: str = "body") -> Any:
    """Parse a JSON body; fall back to :func:`fastjson_loads` for fastjson's extensions.

    Raises:
        BodyError: empty or not (fastjson-)JSON.
    """
    raw = bytes(data) if isinstance(data, bytearray | memoryview) else data
    if not raw or not raw.strip():
        raise BodyError(f"{ctx}: empty body")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return fastjson_loads(raw)
    except BodyError as exc:
        raise BodyError(f"{ctx}: body is not valid JSON: {exc}") from None


class JsonBody:
    """Base of the JSON bodies. Mirrors RocketMQ's ``RemotingSerializable``."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """This body as JSON-ready Python objects (Java field names)."""
        raise NotImplementedError

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        """Build from parsed JSON. Raises :class:`BodyError` on a missing or mistyped field."""
        raise NotImplementedError

    def encode(self) -> bytes:
        """UTF-8 JSON bytes, keys sorted like fastjson's bean output."""
        return orjson.dumps(self.to_json(), option=orjson.OPT_SORT_KEYS)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse wire bytes. Raises :class:`BodyError` naming the class on bad input."""
        return cls._checked(loads_body(data, cls.__name__))

    @classmethod
    def _checked(cls, obj: Any) -> Self:
        try:
            return cls.from_json(obj)
        except BodyError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BodyError(f"{cls.__name__}: malformed body: {exc!r}") from exc


# --------------------------------------------------------------------------------------------
# Topics and broker registration
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class DataVersion(JsonBody):
    """Version of a broker's topic table. Mirrors ``DataVersion``; ``timestamp`` in ms."""

    timestamp: int = field(default_factory=_now_ms)
    counter: int = 0

    def next_version(self, now_ms: int | None = None) -> None:
        """Bump the counter and set the timestamp (``DataVersion.nextVersion``)."""
        self.timestamp = _now_ms() if now_ms is None else now_ms
        self.counter += 1

    def to_json(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(timestamp=r.i("timestamp"), counter=r.i("counter"))


@dataclass(slots=True)
class TopicConfig(JsonBody):
    """One topic of a broker. Mirrors ``TopicConfig`` (defaults 16/16 queues, perm 6 = RW)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(
            topic_name=r.req_s("topicName"),
            read_queue_nums=r.i("readQueueNums", 16),
            write_queue_nums=r.i("writeQueueNums", 16),
            perm=r.i("perm", 6),
            topic_filter_type=r.s("topicFilterType", SINGLE_TAG),
            topic_sys_flag=r.i("topicSysFlag"),
            order=r.b("order"),
        )

    def encode_compact(self) -> str:
        """Java's ``TopicConfig.encode()``: ``"name read write perm filterType"`` (space-separated).

        Used inside the compressed RegisterBrokerBody; ``topicSysFlag`` and ``order`` are lost.
        """
        return f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} {self.topic_filter_type}"

    @classmethod
    def decode_compact(cls, text: str) -> Self:
        """Inverse of :meth:`encode_compact`. Raises :class:`BodyError` unless 5 valid parts."""
        parts = text.split(" ")
        if len(parts) != 5 or parts[4] not in (SINGLE_TAG, MULTI_TAG):
            raise BodyError(
                f"TopicConfig: compact form must be 'name read write perm filterType', got {text!r}"
            )
        try:
            return cls(parts[0], _as_int(parts[1]), _as_int(parts[2]), _as_int(parts[3]), parts[4])
        except ValueError:
            raise BodyError(f"TopicConfig: compact form has a non-integer field: {text!r}") from None


@dataclass(slots=True)
class TopicConfigSerializeWrapper(JsonBody):
    """A broker's topic table + version (``topics.json``). Mirrors ``TopicConfigSerializeWrapper``."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {k: v.to_json() for k, v in self.topic_config_table.items()},
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        table: dict[str, TopicConfig] = {}
        for name, value in r.dct("topicConfigTable").items():
            value = dict(value) if isinstance(value, dict) else value
            if isinstance(value, dict):
                value.setdefault("topicName", name)
            table[str(name)] = TopicConfig._checked(value)
        return cls(table, DataVersion._checked(r.obj.get("dataVersion") or {}))


_I32 = struct.Struct(">i")


@dataclass(slots=True)
class RegisterBrokerBody(JsonBody):
    """REGISTER_BROKER (103) body. Mirrors ``RegisterBrokerBody``.

    Compressed form (header ``compressed=true``): a zlib stream of ``int len + DataVersion JSON``,
    ``int topicCount``, per topic ``int len + TopicConfig compact text`` (Java's
    ``TopicConfig.encode()``, *not* JSON), then ``int len + filterServerList JSON``.
    """

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_json(),
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        wrapper = TopicConfigSerializeWrapper._checked(r.obj.get("topicConfigSerializeWrapper") or {})
        return cls(wrapper, [str(x) for x in r.lst("filterServerList")])

    def encode(self, compress: bool = False) -> bytes:
        """JSON bytes, or the zlib-compressed binary form when ``compress``."""
        if not compress:
            return JsonBody.encode(self)
        wrapper = self.topic_config_serialize_wrapper
        parts: list[bytes] = []

        def put(data: bytes) -> None:
            parts.append(_I32.pack(len(data)))
            parts.append(data)

        put(wrapper.data_version.encode())
        parts.append(_I32.pack(len(wrapper.topic_config_table)))
        for config in wrapper.topic_config_table.values():
            put(config.encode_compact().encode())
        put(orjson.dumps(list(self.filter_server_list)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str, compressed: bool = False) -> Self:
        """Parse the JSON form, or the compressed form when ``compressed``."""
        if not compressed:
            return cls._checked(loads_body(data, cls.__name__))
        raw = data.encode() if isinstance(data, str) else bytes(data)
        try:
            inflater = zlib.decompressobj()
            plain = inflater.decompress(raw, MAX_DECOMPRESSED_SIZE)
        except zlib.error as exc:
            raise BodyError(f"RegisterBrokerBody: compressed body does not inflate: {exc}") from exc
        if inflater.unconsumed_tail:
            raise BodyError(f"RegisterBrokerBody: inflated body exceeds {MAX_DECOMPRESSED_SIZE} bytes")
        pos = 0

        def take(n: int) -> bytes:
            nonlocal pos
            if n < 0 or pos + n > len(plain):
                raise BodyError(f"RegisterBrokerBody: compressed body truncated at byte {pos}")
            pos += n
            return plain[pos - n : pos]

        def take_int() -> int:
            value: int = _I32.unpack(take(4))[0]
            return value

        version = DataVersion.decode(take(take_int()))
        table: dict[str, TopicConfig] = {}
        for _ in range(take_int()):
            config = TopicConfig.decode_compact(take(take_int()).decode())
            table[config.topic_name] = config
        servers = loads_body(take(take_int()), "RegisterBrokerBody filterServerList")
        return cls(TopicConfigSerializeWrapper(table, version), [str(s) for s in servers or []])


# --------------------------------------------------------------------------------------------
# Routes (name server)
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class QueueData(JsonBody):
    """A topic's queues on one broker. Mirrors ``QueueData`` (``topicSynFlag`` read as well)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        flag = r.i("topicSysFlag") if "topicSysFlag" in r.obj else r.i("topicSynFlag")
        return cls(r.req_s("brokerName"), r.i("readQueueNums"), r.i("writeQueueNums"), r.i("perm"), flag)


@dataclass(slots=True)
class BrokerData(JsonBody):
    """A broker group: id -> address (0 = master). Mirrors ``BrokerData``.

    ``brokerAddrs`` keys are written as decimal strings (``"0"``); fastjson's unquoted form
    (``{0:"ip:port"}``) is read too.
    """

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def select_broker_addr(self) -> str | None:
        """The master's address, else any slave's (``BrokerData.selectBrokerAddr``)."""
        master = self.broker_addrs.get(0)
        if master is not None:
            return master
        return next(iter(self.broker_addrs.values()), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerAddrs": {str(k): v for k, v in self.broker_addrs.items()},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        addrs: dict[int, str] = {}
        for key, addr in r.dct("brokerAddrs").items():
            try:
                addrs[_as_int(key)] = str(addr)
            except (TypeError, ValueError):
                raise BodyError(f"BrokerData: brokerAddrs key {key!r} is not a broker id") from None
        return cls(r.s("cluster"), r.req_s("brokerName"), addrs)


@dataclass(slots=True)
class TopicRouteData(JsonBody):
    """GET_ROUTEINFO_BY_TOPIC (105) response body. Mirrors ``TopicRouteData``.

    Always written with ``queueDatas`` / ``brokerDatas`` arrays and ``filterServerTable: {}``
    (ali-ons sorts both arrays; Java iterates them); ``orderTopicConf`` omitted when ``None``.
    """

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerDatas": [bd.to_json() for bd in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
            "queueDatas": [qd.to_json() for qd in self.queue_datas],
        }
        if self.order_topic_conf is not None:
            out["orderTopicConf"] = self.order_topic_conf
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(
            [QueueData._checked(q) for q in r.lst("queueDatas")],
            [BrokerData._checked(bd) for bd in r.lst("brokerDatas")],
            {str(k): [str(x) for x in v or []] for k, v in r.dct("filterServerTable").items()},
            r.opt_s("orderTopicConf"),
        )


@dataclass(slots=True)
class ClusterInfo(JsonBody):
    """GET_BROKER_CLUSTER_INFO (106) body. Mirrors ``ClusterInfo``."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {k: v.to_json() for k, v in self.broker_addr_table.items()},
            "clusterAddrTable": {k: sorted(v) for k, v in self.cluster_addr_table.items()},
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(
            {str(k): BrokerData._checked(v) for k, v in r.dct("brokerAddrTable").items()},
            {str(k): {str(x) for x in v or []} for k, v in r.dct("clusterAddrTable").items()},
        )


@dataclass(slots=True)
class TopicList(JsonBody):
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) etc. body. Mirrors ``TopicList``."""

    topic_list: set[str] = field(default_factory=set)
    broker_addr: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topicList": sorted(self.topic_list)}
        if self.broker_addr is not None:
            out["brokerAddr"] = self.broker_addr
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls({str(t) for t in r.lst("topicList")}, r.opt_s("brokerAddr"))


@dataclass(slots=True)
class KVTable(JsonBody):
    """A KV namespace (``{"table": {...}}``). Mirrors ``KVTable``."""

    table: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"table": dict(self.table)}

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls({str(k): str(v) for k, v in r.dct("table").items()})


# --------------------------------------------------------------------------------------------
# Heartbeats, subscriptions, locks
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SubscriptionData(JsonBody):
    """A consumer's subscription to one topic. Mirrors ``SubscriptionData``.

    ``code_set`` holds the tag hashes (see ``tidemq.protocol.filter``); ``sub_version`` is a ms
    timestamp. Reading C++'s form: ``subVersion`` may be a string, sets may be absent,
    ``expressionType`` absent means TAG. For TAG subscriptions ``code_set`` is always recomputed
    from ``tags_set`` (the C++ client 1.x sends bogus ``"codeSet":[0,0]``).
    """

    topic: str
    sub_string: str = "*"
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = field(default_factory=_now_ms)
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": sorted(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        tags = {str(t) for t in r.lst("tagsSet")}
        try:
            codes = {_as_int(c) for c in r.lst("codeSet")}
        except (TypeError, ValueError):
            raise BodyError(
                f"SubscriptionData: codeSet must hold integers, got {r.obj['codeSet']!r}"
            ) from None
        expression_type = r.s("expressionType", EXPRESSION_TYPE_TAG) or EXPRESSION_TYPE_TAG
        if tags and expression_type == EXPRESSION_TYPE_TAG:
            # The hash is a pure function of the tag: recompute rather than trust the peer.
            # The C++ client 1.x sends "codeSet":[0,0] for "TagA || TagC".
            from tidemq.protocol.filter import tags_hash  # filter imports this module

            codes = {tags_hash(t) for t in tags}
        return cls(
            topic=r.req_s("topic"),
            sub_string=r.s("subString", "*"),
            tags_set=tags,
            code_set=codes,
            sub_version=r.i("subVersion"),
            expression_type=expression_type,
            class_filter_mode=r.b("classFilterMode"),
        )


def _enum_or_none(enum: type[_WireEnum], value: Any) -> Any:
    return None if value is None else enum.from_wire(value)


@dataclass(slots=True)
class ConsumerData(JsonBody):
    """One consumer group in a heartbeat. Mirrors ``ConsumerData``."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where.value,
            "consumeType": self.consume_type.value,
            "groupName": self.group_name,
            "messageModel": self.message_model.value,
            "subscriptionDataSet": [sd.to_json() for sd in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(
            group_name=r.req_s("groupName"),
            consume_type=ConsumeType.from_wire(r.obj.get("consumeType", 1)),
            message_model=MessageModel.from_wire(r.obj.get("messageModel", 1)),
            consume_from_where=ConsumeFromWhere.from_wire(r.obj.get("consumeFromWhere", 0)),
            subscription_data_set=[SubscriptionData._checked(s) for s in r.lst("subscriptionDataSet")],
            unit_mode=r.b("unitMode"),
        )


@dataclass(slots=True)
class ProducerData(JsonBody):
    """One producer group in a heartbeat. Mirrors ``ProducerData``."""

    group_name: str

    def to_json(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        return cls(_R(obj, cls.__name__).req_s("groupName"))


@dataclass(slots=True)
class HeartbeatData(JsonBody):
    """HEART_BEAT (34) body. Mirrors ``HeartbeatData`` (wire name of ``client_id``: ``clientID``)."""

    client_id: str
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json() for c in self.consumer_data_set],
            "producerDataSet": [p.to_json() for p in self.producer_data_set],
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(
            r.req_s("clientID"),
            [ProducerData._checked(p) for p in r.lst("producerDataSet")],
            [ConsumerData._checked(c) for c in r.lst("consumerDataSet")],
        )


@dataclass(slots=True)
class LockBatchRequestBody(JsonBody):
    """LOCK_BATCH_MQ (41) body. Mirrors ``LockBatchRequestBody``."""

    consumer_group: str
    client_id: str
    mq_set: set[MessageQueue] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": _mq_list_json(self.mq_set),
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(r.req_s("consumerGroup"), r.req_s("clientId"), _mq_set(r.lst("mqSet"), cls.__name__))


@dataclass(slots=True)
class UnlockBatchRequestBody(LockBatchRequestBody):
    """UNLOCK_BATCH_MQ (42) body. Mirrors ``UnlockBatchRequestBody`` (same shape as the lock body)."""


@dataclass(slots=True)
class LockBatchResponseBody(JsonBody):
    """LOCK_BATCH_MQ response body: the queues now held by the client (``lockOKMQSet``)."""

    lock_ok_mq_set: set[MessageQueue] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {"lockOKMQSet": _mq_list_json(self.lock_ok_mq_set)}

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(_mq_set(r.lst("lockOKMQSet"), cls.__name__))


@dataclass(slots=True)
class GetConsumerListByGroupResponseBody(JsonBody):
    """GET_CONSUMER_LIST_BY_GROUP (38) response body (``consumerIdList``)."""

    consumer_id_list: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"consumerIdList": list(self.consumer_id_list)}

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        return cls([str(x) for x in _R(obj, cls.__name__).lst("consumerIdList")])


@dataclass(slots=True)
class SubscriptionGroupConfig(JsonBody):
    """A consumer group's broker-side settings. Mirrors ``SubscriptionGroupConfig`` (its defaults)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls(
            group_name=r.req_s("groupName"),
            consume_enable=r.b("consumeEnable", True),
            consume_from_min_enable=r.b("consumeFromMinEnable", True),
            consume_broadcast_enable=r.b("consumeBroadcastEnable", True),
            retry_queue_nums=r.i("retryQueueNums", 1),
            retry_max_times=r.i("retryMaxTimes", 16),
            broker_id=r.i("brokerId", 0),
            which_broker_when_consume_slowly=r.i("whichBrokerWhenConsumeSlowly", 1),
            notify_consumer_ids_changed_enable=r.b("notifyConsumerIdsChangedEnable", True),
        )


# --------------------------------------------------------------------------------------------
# Admin bodies
# --------------------------------------------------------------------------------------------


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
            lang = LanguageCode(lang).name if lang in LanguageCode._value2member_map_ else "OTHER"
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
            [Connection._checked(c) for c in r.lst("connectionSet")],
            {str(k): SubscriptionData._checked(v) for k, v in r.dct("subscriptionTable").items()},
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
        table = _mq_table(r.obj.get("offsetTable"), cls.__name__, OffsetWrapper._checked)
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
        return cls(_mq_table(r.obj.get("offsetTable"), cls.__name__, TopicOffset._checked))


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


# --------------------------------------------------------------------------------------------
# fastjson's non-standard JSON
# --------------------------------------------------------------------------------------------

FrozenObject = tuple[tuple[Any, Any], ...]
"""How :func:`fastjson_loads` returns an object used as a map key: ``dict(key)`` gives it back."""


def fastjson_dumps(obj: Any) -> bytes:
    """Serialise like fastjson, which writes non-string map keys without quotes.

    Keys may be ``str`` (quoted), ``int`` (unquoted: ``{0:"a"}``), a ``MessageQueue`` or anything
    with ``to_json()`` (written as a JSON object: ``{{"brokerName":..}:5}``), or a
    :data:`FrozenObject` tuple. Values may be dicts, lists/tuples/sets, scalars, or objects with
    ``to_fastjson()`` / ``to_json()``.

    Raises:
        LocalProtocolError: an unsupported key or value type.
    """
    out: list[str] = []
    _dump(obj, out)
    return "".join(out).encode()


def _dump(obj: Any, out: list[str]) -> None:
    if isinstance(obj, dict):
        out.append("{")
        for n, (key, value) in enumerate(obj.items()):
            if n:
                out.append(",")
            _dump_key(key, out)
            out.append(":")
            _dump(value, out)
        out.append("}")
    elif isinstance(obj, list | tuple | set | frozenset):
        items = list(obj)
        if isinstance(obj, set | frozenset):
            try:
                items.sort()
            except TypeError:
                pass
        out.append("[")
        for n, item in enumerate(items):
            if n:
                out.append(",")
            _dump(item, out)
        out.append("]")
    elif obj is None or isinstance(obj, str | int | float):
        out.append(orjson.dumps(obj).decode())
    elif hasattr(obj, "to_fastjson"):
        _dump(obj.to_fastjson(), out)
    elif hasattr(obj, "to_json"):
        _dump(obj.to_json(), out)
    else:
        raise LocalProtocolError(f"fastjson_dumps: cannot serialise {type(obj).__name__}")


def _dump_key(key: Any, out: list[str]) -> None:
    if isinstance(key, bool):
        raise LocalProtocolError("fastjson_dumps: boolean map keys are not supported")
    if isinstance(key, str):
        out.append(orjson.dumps(key).decode())
    elif isinstance(key, int):
        out.append(str(key))
    elif isinstance(key, tuple):
        _dump(dict(key), out)
    elif hasattr(key, "to_json"):
        _dump(key.to_json(), out)
    else:
        raise LocalProtocolError(f"fastjson_dumps: cannot use {type(key).__name__} as a map key")


_WS = frozenset(" \t\r\n")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_BARE_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_MAX_DEPTH = 256
_scanstring: Callable[[str, int, bool], tuple[str, int]] = vars(_json_decoder)["scanstring"]


def fastjson_loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON plus fastjson's extensions, tolerantly.

    Accepts map keys that are unquoted integers (``{0:"x"}`` -> key ``0``), JSON objects or
    arrays (returned as :data:`FrozenObject` / tuples so they can be dict keys), and bare words;
    any whitespace (C++ pretty-printing). Standard JSON parses as usual.

    Raises:
        BodyError: not parseable, with the character position.
    """
    text = bytes(data).decode() if isinstance(data, bytes | bytearray | memoryview) else data
    parser = _Parser(text)
    value = parser.value(0)
    parser.ws()
    if parser.pos != len(text):
        raise parser.error("trailing data")
    return value


class _Parser:
    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, what: str) -> BodyError:
        snippet = self.text[self.pos : self.pos + 20]
        return BodyError(f"{what} at character {self.pos} ({snippet!r})")

    def ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def value(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise self.error("nesting too deep")
        self.ws()
        if self.pos >= len(self.text):
            raise self.error("unexpected end of input")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.arr(depth)
        if ch == '"':
            return self.string()
        for word, literal in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal
        return self.number()

    def string(self) -> str:
        try:
            value, self.pos = _scanstring(self.text, self.pos + 1, False)
        except ValueError as exc:
            raise self.error(f"bad string ({exc})") from None
        return value

    def number(self) -> int | float:
        match = _NUMBER.match(self.text, self.pos)
        if not match:
            raise self.error("unexpected character")
        self.pos = match.end()
        return float(match[0]) if match[1] or match[2] else int(match[0])

    def key(self, depth: int) -> Any:
        ch = self.text[self.pos]
        if ch == '"':
            return self.string()
        if ch in "{[":
            return _freeze(self.value(depth + 1))
        match = _BARE_WORD.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return match[0]
        return self.number()

    def obj(self, depth: int) -> dict[Any, Any]:
        self.pos += 1
        out: dict[Any, Any] = {}
        self.ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return out
        while True:
            self.ws()
            if self.pos >= len(self.text):
                raise self.error("unexpected end of input in object")
            key = self.key(depth)
            self.ws()
            if not self.text.startswith(":", self.pos):
                raise self.error("expected ':'")
            self.pos += 1
            out[key] = self.value(depth + 1)
            self.ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("}", self.pos):
                self.pos += 1
                return out
            else:
                raise self.error("expected ',' or '}'")

    def arr(self, depth: int) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        self.ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return out
        while True:
            out.append(self.value(depth + 1))
            self.ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("]", self.pos):
                self.pos += 1
                return out
            else:
                raise self.error("expected ',' or ']'")


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value
