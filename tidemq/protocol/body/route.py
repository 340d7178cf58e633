"""Topic configs, broker registration and routes. Mirrors ``TopicConfig``, ``DataVersion``,
``RegisterBrokerBody``, ``TopicRouteData``, ``QueueData``, ``BrokerData``, ``ClusterInfo``, ``KVTable``."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Self

import orjson

from tidemq.errors import BodyError
from tidemq.protocol.body.base import (
    _R,
    MAX_DECOMPRESSED_SIZE,
    MULTI_TAG,
    SINGLE_TAG,
    JsonBody,
    _as_int,
    _now_ms,
    loads_body,
)


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
    attributes: dict[str, str] = field(default_factory=dict)
    """RocketMQ 5's topic attributes (``message.type``...); in the JSON only when not empty."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"attributes": dict(self.attributes)} if self.attributes else {}
        return out | {
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
            attributes={str(k): str(v) for k, v in r.dct("attributes").items()},
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
            table[str(name)] = TopicConfig.from_json_checked(value)
        return cls(table, DataVersion.from_json_checked(r.obj.get("dataVersion") or {}))


@dataclass(slots=True)
class CreateTopicListRequestBody(JsonBody):
    """UPDATE_AND_CREATE_TOPIC_LIST (18) body. Mirrors RocketMQ 5's ``CreateTopicListRequestBody``:
    ``{"topicConfigList": [TopicConfig JSON, ...]}``."""

    topic_config_list: list[TopicConfig] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"topicConfigList": [tc.to_json() for tc in self.topic_config_list]}

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        r = _R(obj, cls.__name__)
        return cls([TopicConfig.from_json_checked(item) for item in r.lst("topicConfigList")])


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
        wrapper = TopicConfigSerializeWrapper.from_json_checked(
            r.obj.get("topicConfigSerializeWrapper") or {}
        )
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
            return cls.from_json_checked(loads_body(data, cls.__name__))
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
            [QueueData.from_json_checked(q) for q in r.lst("queueDatas")],
            [BrokerData.from_json_checked(bd) for bd in r.lst("brokerDatas")],
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
            {str(k): BrokerData.from_json_checked(v) for k, v in r.dct("brokerAddrTable").items()},
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
