"""Fixtures for message-store tests: small segments so rolls happen after a few messages."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tidemq.store import MessageExtBrokerInner, MessageStore, MessageStoreConfig
from tidemq.store.results import GetMessageResult

STORE_HOST = "127.0.0.1:10911"
StoreFactory = Callable[..., MessageStore]


def make_config(root: Path, **overrides: Any) -> MessageStoreConfig:
    opts: dict[str, Any] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": 4096,
        "mapped_file_size_consume_queue": 20 * 10,
    }
    opts.update(overrides)
    return MessageStoreConfig(**opts)


def inner(
    topic: str = "T", body: bytes = b"hello", queue_id: int = 0, tags: str | None = None, **kw: Any
) -> MessageExtBrokerInner:
    props = dict(kw.pop("properties", {}))
    if tags:
        props["TAGS"] = tags
    return MessageExtBrokerInner(
        topic, body, queue_id=queue_id, properties=props, born_host="127.0.0.1:50000", born_timestamp=1, **kw
    )


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[StoreFactory]:
    """``open_store(**config_overrides)`` -> a loaded store in ``tmp_path/store``; shut down at the end."""
    opened: list[MessageStore] = []

    def factory(**overrides: Any) -> MessageStore:
        store = MessageStore(make_config(tmp_path / "store", **overrides), store_host=STORE_HOST)
        store.retention.disk_used_ratio = lambda: 0.0  # type: ignore[method-assign]
        store.load()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.shutdown()


def result_fields(result: GetMessageResult) -> tuple[object, ...]:
    """Everything a GET answer tells a consumer, for comparing two scans' answers."""
    return (
        result.status,
        result.next_begin_offset,
        result.min_offset,
        result.max_offset,
        result.message_buffers,
        result.message_queue_offsets,
        result.buffer_total_size,
        result.message_count,
        result.suggest_pulling_from_slave,
    )
