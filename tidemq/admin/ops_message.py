"""Messages: look up by id, key, unique key or queue offset; read queue ranges; send a test message.

Part of :class:`~tidemq.admin.client.AsyncAdminClient`. Lookups by id / key go through a tools
producer's client instance (VIEW_MESSAGE_BY_ID 33, QUERY_MESSAGE 12); reads by offset are plain
PULL_MESSAGE (11) requests under the group ``TOOLS_CONSUMER`` that commit nothing. The tools
producer (group ``TOOLS_PRODUCER``) is created on first use, signs with the admin's ACL keys, and
is shut down by :meth:`MessageOps.close`.
"""

from __future__ import annotations

import time
from typing import Any

from tidemq.admin.ops_group import GroupOps
from tidemq.client.consumer.pull_service import process_pull_result
from tidemq.errors import ClientError, ProtocolError, TideMQError
from tidemq.protocol.headers.pull import PullSysFlag
from tidemq.protocol.message import Message, MessageExt, MessageQueue
from tidemq.protocol.message_codec import decode_offset_msg_id

__all__ = ["TOOLS_CONSUMER_GROUP", "TOOLS_PRODUCER_GROUP", "MessageOps"]

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
"""Group name of the admin's pulls (RocketMQ's ``MixAll.TOOLS_CONSUMER_GROUP``); nothing is committed."""
TOOLS_PRODUCER_GROUP = "TOOLS_PRODUCER"
"""Group name of the admin's sends and message queries."""


class MessageOps(GroupOps):
    """Message lookups, reads and test sends (``DefaultMQAdminExt.viewMessage`` / ``queryMessage``...)."""

    _producer: Any = None

    async def _tools_producer(self) -> Any:
        if self._producer is None:
            from tidemq.client.producer.producer import AsyncProducer

            creds: dict[str, Any] = {}
            if self.access_key and self.secret_key:
                creds = {"access_key": self.access_key, "secret_key": self.secret_key}
            producer = AsyncProducer(
                namesrv_addr=";".join(self.namesrv_addrs),
                producer_group=TOOLS_PRODUCER_GROUP,
                instance_name=f"tidemq-admin-{id(self)}",
                **creds,
            )
            await producer.start()
            self._producer = producer
        return self._producer

    async def close(self) -> None:
        """Shut the tools producer down (if any), then close the transport."""
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.shutdown()
        await super().close()

    async def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | None = None,
        broker_name: str | None = None,
        queue_id: int | None = None,
    ) -> Any:
        """Send one message (``mqadmin sendMessage``); to ``broker_name``/``queue_id`` when given.

        Returns:
            The ``SendResult`` (``msg_id``, ``offset_msg_id``, ``message_queue``, ``queue_offset``).

        Raises:
            ClientError: only one of broker_name / queue_id given. NoRouteError: unknown topic
            (unless the broker auto-creates topics).
        """
        if (broker_name is None) != (queue_id is None):
            raise ClientError("give both broker_name and queue_id, or neither")
        producer = await self._tools_producer()
        msg = Message(topic, body, tags=tags, keys=keys)
        if broker_name is not None and queue_id is not None:
            return await producer.send(msg, queue=MessageQueue(topic, broker_name, queue_id))
        return await producer.send(msg)

    async def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """The message of an offset msg id, or of a unique key (``topic`` needed then).

        Mirrors ``mqadmin queryMsgById`` / ``queryMsgByUniqueKey``. Raises ClientError when not found.
        """
        try:
            host, offset = decode_offset_msg_id(msg_id)
        except ProtocolError:
            host, offset = "", -1
        if host and host in set((await self.all_broker_addrs()).values()):
            try:
                msg: MessageExt = await self.api.view_message(host, offset, self.timeout)
            except TideMQError:
                pass
            else:
                if msg_id.upper() in (msg.offset_msg_id.upper(), msg.msg_id.upper()):
                    return (await self._with_broker_names([msg]))[0]
        if topic is None:
            raise ClientError(
                f"message {msg_id} not found: not an offset msg id of a known broker (give the topic)"
            )
        producer = await self._tools_producer()
        msg = await producer.view_message(msg_id, topic)
        return (await self._with_broker_names([msg]))[0]

    async def query_message_by_key(
        self, topic: str, key: str, max_num: int = 64, begin_ms: int = 0, end_ms: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS hold ``key`` (``mqadmin queryMsgByKey``), oldest first.

        Raises:
            ClientError: nothing found. NoRouteError: unknown topic.
        """
        producer = await self._tools_producer()
        end = end_ms if end_ms is not None else time.time_ns() // 1_000_000 + 60_000
        result = await producer.query_message(topic, key, max_num, begin_ms, end)
        await self._with_broker_names(result.message_list)
        return sorted(result.message_list, key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))

    async def _with_broker_names(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """Fill ``broker_name`` (lookups return messages without it) from the store host's address."""
        if any(not m.broker_name for m in msgs):
            names = {addr: name for name, addr in (await self.all_broker_addrs()).items()}
            for m in msgs:
                if not m.broker_name:
                    m.broker_name = names.get(m.store_host, "")
        return msgs

    async def pull_messages(
        self, mq: MessageQueue, offset: int, max_nums: int = 32
    ) -> tuple[list[MessageExt], int]:
        """Up to ``max_nums`` messages of ``mq`` from ``offset`` (PULL_MESSAGE, nothing committed).

        Returns:
            ``(messages, next_offset)``; an empty list at the end of the queue.
        """
        if offset < 0 or max_nums <= 0:
            raise ClientError(f"offset must be >= 0 and max_nums > 0, got {offset} / {max_nums}")
        addr = await self.broker_addr(mq.broker_name, topic=mq.topic)
        result = await self.api.pull_message(
            addr,
            consumer_group=TOOLS_CONSUMER_GROUP,
            mq=mq,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=PullSysFlag.FLAG_SUBSCRIPTION,  # the broker builds the subscription from '*'
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription="*",
            sub_version=0,
            timeout=self.timeout * 3,
        )
        result = process_pull_result(mq, result, None)
        return list(result.msg_found_list or []), result.next_begin_offset

    async def query_message_by_offset(self, mq: MessageQueue, offset: int) -> MessageExt:
        """The message at ``offset`` of ``mq`` (``mqadmin queryMsgByOffset``).

        Raises:
            ClientError: no message there (say which offsets the queue holds).
        """
        msgs, _ = await self.pull_messages(mq, offset, 1)
        if not msgs or msgs[0].queue_offset != offset:
            lo, hi = await self.min_offset(mq), await self.max_offset(mq)
            raise ClientError(
                f"no message at offset {offset} of {mq.topic}/{mq.broker_name}/{mq.queue_id}; it holds [{lo}, {hi})"
            )
        return msgs[0]

    async def read_range(self, mq: MessageQueue, begin: int, end: int, limit: int = 1000) -> list[MessageExt]:
        """Messages of ``mq`` with ``begin <= offset < end``, at most ``limit`` (``printMsg`` per queue)."""
        out: list[MessageExt] = []
        offset = max(begin, await self.min_offset(mq))
        while offset < end and len(out) < limit:
            msgs, nxt = await self.pull_messages(mq, offset, min(32, end - offset, limit - len(out)))
            if not msgs or nxt <= offset:
                break
            out.extend(m for m in msgs if m.queue_offset < end)
            offset = nxt
        return out[:limit]

    async def print_msg(
        self, topic: str, begin_ms: int | None = None, end_ms: int | None = None, limit: int = 1000
    ) -> list[MessageExt]:
        """Every message of ``topic`` stored within ``[begin_ms, end_ms)`` (default: all), queue by
        queue, at most ``limit``. Mirrors ``mqadmin printMsg``."""
        out: list[MessageExt] = []
        for mq in await self.fetch_subscribe_message_queues(topic):
            lo = await self.search_offset(mq, begin_ms) if begin_ms is not None else await self.min_offset(mq)
            hi = await self.search_offset(mq, end_ms) if end_ms is not None else await self.max_offset(mq)
            out.extend(await self.read_range(mq, lo, hi, limit - len(out)))
            if len(out) >= limit:
                break
        return out
