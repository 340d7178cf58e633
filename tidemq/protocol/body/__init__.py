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

from tidemq.errors import BodyError
from tidemq.protocol.body.admin import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    TopicOffset,
    TopicStatsTable,
)
from tidemq.protocol.body.base import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    MAX_DECOMPRESSED_SIZE,
    MULTI_TAG,
    SINGLE_TAG,
    ConsumeFromWhere,
    ConsumeType,
    JsonBody,
    MessageModel,
    loads_body,
)
from tidemq.protocol.body.fastjson import (
    FrozenObject,
    fastjson_dumps,
    fastjson_loads,
)
from tidemq.protocol.body.heartbeat import (
    ConsumerData,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    ProducerData,
    SubscriptionData,
    SubscriptionGroupConfig,
    UnlockBatchRequestBody,
)
from tidemq.protocol.body.route import (
    BrokerData,
    ClusterInfo,
    CreateTopicListRequestBody,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "MAX_DECOMPRESSED_SIZE",
    "MULTI_TAG",
    "SINGLE_TAG",
    "BodyError",
    "BrokerData",
    "ClusterInfo",
    "Connection",
    "ConsumeFromWhere",
    "ConsumeStats",
    "ConsumeType",
    "ConsumerConnection",
    "ConsumerData",
    "CreateTopicListRequestBody",
    "DataVersion",
    "FrozenObject",
    "GetConsumerListByGroupResponseBody",
    "HeartbeatData",
    "JsonBody",
    "KVTable",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "OffsetWrapper",
    "ProducerData",
    "QueueData",
    "RegisterBrokerBody",
    "ResetOffsetBody",
    "ResetOffsetBodyForC",
    "SubscriptionData",
    "SubscriptionGroupConfig",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicList",
    "TopicOffset",
    "TopicRouteData",
    "TopicStatsTable",
    "UnlockBatchRequestBody",
    "fastjson_dumps",
    "fastjson_loads",
    "loads_body",
]
