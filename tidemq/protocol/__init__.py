"""tidemq.protocol: RocketMQ 4.x remoting protocol, sans-I/O (no sockets, no asyncio, no files).

Modules:
    codes: RequestCode, ResponseCode, LanguageCode, SerializeType.
    command: RemotingCommand, encode_command, FrameDecoder (the frame codec).
    headers: typed custom headers (``extFields`` <-> dataclasses), PullSysFlag, HeaderError.
    body: JSON bodies (TopicRouteData, HeartbeatData, ...), enums, fastjson_dumps / fastjson_loads.
    message: Message, MessageExt, MessageQueue, SendResult, properties strings.
    message_codec: the stored-message (commit-log record) codec.
    filter: tags_hash, build_subscription_data, tag matching.
    topic: topic/group validation, retry / DLQ topics, PermName, well-known names.

The most used names are re-exported here.
"""

from tidemq.protocol.body import BodyError, HeartbeatData, SubscriptionData, TopicRouteData
from tidemq.protocol.codes import TIDEMQ_VERSION, LanguageCode, RequestCode, ResponseCode, SerializeType
from tidemq.protocol.command import MAX_FRAME_SIZE, FrameDecoder, RemotingCommand, encode_command
from tidemq.protocol.filter import SUB_ALL, build_subscription_data, tags_hash
from tidemq.protocol.headers import CommandHeader, HeaderError, PullSysFlag
from tidemq.protocol.message import Message, MessageExt, MessageQueue, SendResult
from tidemq.protocol.topic import PermName, dlq_topic, retry_topic, validate_topic

__all__ = [
    "MAX_FRAME_SIZE",
    "SUB_ALL",
    "TIDEMQ_VERSION",
    "BodyError",
    "CommandHeader",
    "FrameDecoder",
    "HeaderError",
    "HeartbeatData",
    "LanguageCode",
    "Message",
    "MessageExt",
    "MessageQueue",
    "PermName",
    "PullSysFlag",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SendResult",
    "SerializeType",
    "SubscriptionData",
    "TopicRouteData",
    "build_subscription_data",
    "dlq_topic",
    "encode_command",
    "retry_topic",
    "tags_hash",
    "validate_topic",
]
