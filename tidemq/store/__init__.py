"""tidemq.store: commit log, consume queues and the message store (RocketMQ's ``store`` module).

Plain synchronous Python over files; thread-safe; no asyncio.
"""

from tidemq.store.config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig
from tidemq.store.message_store import SCHEDULE_TOPIC, MessageStore, tags_string_to_tags_code
from tidemq.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
)

__all__ = [
    "ASYNC_FLUSH",
    "SCHEDULE_TOPIC",
    "SYNC_FLUSH",
    "AppendMessageResult",
    "AppendMessageStatus",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageExtBrokerInner",
    "MessageStore",
    "MessageStoreConfig",
    "PutMessageResult",
    "PutMessageStatus",
    "tags_string_to_tags_code",
]
