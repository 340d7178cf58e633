"""Fixtures for broker integration tests: an in-process cluster and a small wire-level client."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    PullMessageRequestHeader,
    PullSysFlag,
    SendMessageRequestHeader,
)
from tidemq.protocol.message import Message, properties_to_string
from tidemq.protocol.message_codec import encode_batch_body
from tidemq.remoting import RemotingClient
from tidemq.testing import Cluster, run_cluster

TIMEOUT = 5.0


class Wire:
    """Raw RocketMQ requests to one broker over a real :class:`RemotingClient`."""

    def __init__(self, client: RemotingClient, cluster: Cluster) -> None:
        self.client = client
        self.cluster = cluster

    @property
    def addr(self) -> str:
        return self.cluster.broker_addr

    async def invoke(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b"", rpc_timeout: float = TIMEOUT
    ) -> RemotingCommand:
        request = RemotingCommand.create_request(code, ext or {}, body)
        return await self.client.invoke(self.addr, request, rpc_timeout)

    def send_header(
        self,
        topic: str,
        *,
        queue_id: int = 0,
        properties: dict[str, str] | str | None = None,
        batch: bool = False,
        **kw: Any,
    ) -> SendMessageRequestHeader:
        props = (
            properties
            if isinstance(properties, str) or properties is None
            else properties_to_string(properties)
        )
        return SendMessageRequestHeader(
            producer_group=kw.pop("producer_group", "PG"),
            topic=topic,
            default_topic=kw.pop("default_topic", "TBW102"),
            default_topic_queue_nums=kw.pop("default_topic_queue_nums", 4),
            queue_id=queue_id,
            sys_flag=kw.pop("sys_flag", 0),
            born_timestamp=kw.pop("born_timestamp", int(time.time() * 1000)),
            flag=kw.pop("flag", 0),
            properties=props,
            batch=batch,
            **kw,
        )

    async def send(
        self,
        topic: str,
        body: bytes,
        *,
        code: int = RequestCode.SEND_MESSAGE_V2,
        queue_id: int = 0,
        properties: dict[str, str] | str | None = None,
        rpc_timeout: float = TIMEOUT,
        **kw: Any,
    ) -> RemotingCommand:
        """SEND_MESSAGE_V2 (or ``code``) of one message."""
        header = self.send_header(topic, queue_id=queue_id, properties=properties, **kw)
        ext = header.to_ext_fields() if code == RequestCode.SEND_MESSAGE else header.to_v2_ext_fields()
        return await self.invoke(code, ext, body, rpc_timeout=rpc_timeout)

    async def send_batch(
        self,
        topic: str,
        msgs: list[Message],
        *,
        code: int = RequestCode.SEND_BATCH_MESSAGE,
        queue_id: int = 0,
    ) -> RemotingCommand:
        header = self.send_header(topic, queue_id=queue_id, batch=True)
        ext = header.to_ext_fields() if code == RequestCode.SEND_MESSAGE else header.to_v2_ext_fields()
        return await self.invoke(code, ext, encode_batch_body(msgs))

    def pull_header(
        self,
        topic: str,
        offset: int,
        *,
        group: str = "G",
        queue_id: int = 0,
        subscription: str | None = "*",
        suspend_ms: int | None = None,
        commit_offset: int | None = None,
        max_msg_nums: int = 32,
        sub_version: int = 0,
    ) -> PullMessageRequestHeader:
        sys_flag = PullSysFlag.build_sys_flag(
            commit_offset is not None, suspend_ms is not None, subscription is not None, False
        )
        return PullMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=max_msg_nums,
            sys_flag=sys_flag,
            commit_offset=commit_offset or 0,
            suspend_timeout_millis=suspend_ms or 0,
            subscription=subscription,
            sub_version=sub_version,
        )

    async def pull(
        self, topic: str, offset: int, *, rpc_timeout: float = TIMEOUT, **kw: Any
    ) -> RemotingCommand:
        """PULL_MESSAGE; ``suspend_ms`` sets FLAG_SUSPEND, ``subscription=None`` clears FLAG_SUBSCRIPTION."""
        header = self.pull_header(topic, offset, **kw)
        return await self.invoke(RequestCode.PULL_MESSAGE, header.to_ext_fields(), rpc_timeout=rpc_timeout)

    async def create_topic(self, topic: str, queues: int = 4, perm: int = 6) -> None:
        from tidemq.protocol.headers import CreateTopicRequestHeader

        h = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=perm,
            topic_filter_type="SINGLE_TAG",
        )
        r = await self.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext_fields())
        assert r.code == ResponseCode.SUCCESS, r.remark


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """Name server + broker on 127.0.0.1 ephemeral ports, store under ``tmp_path``."""
    async with run_cluster(tmp_path) as c:
        yield c


@pytest.fixture
async def wire(cluster: Cluster) -> AsyncIterator[Wire]:
    """A :class:`Wire` client to the cluster's broker."""
    client = RemotingClient()
    try:
        yield Wire(client, cluster)
    finally:
        await client.close()
