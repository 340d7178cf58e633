"""The blocking face of :class:`~tidemq.admin.client.AsyncAdminClient`, grouped as its asyncio mixins are.

:class:`~tidemq.admin.client.AdminClient` inherits these; each method runs the same-named coroutine of
``self.core`` on the client's :class:`~tidemq.remoting.loop.LoopThread` (same arguments, same result,
same errors) and says so with "See ...".
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from tidemq.admin.core import QueueProgress
from tidemq.admin.ops_broker import BrokerRow
from tidemq.admin.pop_status import PopGroupRow
from tidemq.protocol.body import (
    ClusterInfo,
    ConsumerConnection,
    ConsumeStats,
    TopicRouteData,
    TopicStatsTable,
)
from tidemq.protocol.message import MessageExt, MessageQueue
from tidemq.remoting.loop import LoopThread

if TYPE_CHECKING:
    from tidemq.admin.client import AsyncAdminClient

__all__ = ["BlockingFace", "BlockingMessages", "BlockingOffsets", "BlockingTopics"]

T = TypeVar("T")


class BlockingFace:
    """What every group needs: the asyncio client (``core``) and the loop thread it runs on.

    Attributes:
        core: the :class:`~tidemq.admin.client.AsyncAdminClient` doing the work.
        loop_thread: the thread whose event loop runs ``core``.
    """

    core: AsyncAdminClient
    loop_thread: LoopThread
    _run_timeout: float

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop_thread.run(coro, self._run_timeout)


class BlockingTopics(BlockingFace):
    """Routes, topics and brokers (:class:`~tidemq.admin.core.AdminCore`'s name-server and topic requests, :class:`~tidemq.admin.ops_broker.BrokerOps`'s cluster list)."""

    def examine_broker_cluster_info(self) -> ClusterInfo:
        """See :meth:`AsyncAdminClient.examine_broker_cluster_info`."""
        return self._run(self.core.examine_broker_cluster_info())

    def examine_topic_route_info(self, topic: str) -> TopicRouteData:
        """See :meth:`AsyncAdminClient.examine_topic_route_info`."""
        return self._run(self.core.examine_topic_route_info(topic))

    def broker_addr(self, broker_name: str, *, topic: str | None = None) -> str:
        """See :meth:`AsyncAdminClient.broker_addr`."""
        return self._run(self.core.broker_addr(broker_name, topic=topic))

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """See :meth:`AsyncAdminClient.fetch_subscribe_message_queues`."""
        return self._run(self.core.fetch_subscribe_message_queues(topic))

    def wait_for_route(self, topic: str, timeout: float = 10.0) -> TopicRouteData:
        """See :meth:`AsyncAdminClient.wait_for_route`."""
        return self._run(self.core.wait_for_route(topic, timeout))

    def create_topic(self, topic: str, queue_nums: int = 8, **kwargs: Any) -> list[str]:
        """See :meth:`AsyncAdminClient.create_topic`."""
        return self._run(self.core.create_topic(topic, queue_nums, **kwargs))

    def create_topic_list(self, topics: list[str], queue_nums: int = 8, **kwargs: Any) -> list[str]:
        """See :meth:`AsyncAdminClient.create_topic_list`."""
        return self._run(self.core.create_topic_list(topics, queue_nums, **kwargs))

    def examine_topic_stats(self, topic: str) -> TopicStatsTable:
        """See :meth:`AsyncAdminClient.examine_topic_stats`."""
        return self._run(self.core.examine_topic_stats(topic))

    def fetch_all_topic_list(self) -> list[str]:
        """See :meth:`AsyncAdminClient.fetch_all_topic_list`."""
        return self._run(self.core.fetch_all_topic_list())

    def delete_topic(self, topic: str, cluster: str | None = None) -> list[str]:
        """See :meth:`AsyncAdminClient.delete_topic`."""
        return self._run(self.core.delete_topic(topic, cluster))

    def cluster_list(self) -> list[BrokerRow]:
        """See :meth:`AsyncAdminClient.cluster_list`."""
        return self._run(self.core.cluster_list())

    def delete_expired_commitlog(self, broker_addr: str | None = None, *, force: bool = False) -> list[str]:
        """See :meth:`AsyncAdminClient.delete_expired_commitlog`."""
        return self._run(self.core.delete_expired_commitlog(broker_addr, force=force))

    def clean_expired_consume_queue(self, broker_addr: str | None = None) -> list[str]:
        """See :meth:`AsyncAdminClient.clean_expired_consume_queue`."""
        return self._run(self.core.clean_expired_consume_queue(broker_addr))


class BlockingOffsets(BlockingFace):
    """Queue offsets and consumer groups' offsets, progress and connections."""

    def min_offset(self, mq: MessageQueue) -> int:
        """See :meth:`AsyncAdminClient.min_offset`."""
        return self._run(self.core.min_offset(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        """See :meth:`AsyncAdminClient.max_offset`."""
        return self._run(self.core.max_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """See :meth:`AsyncAdminClient.search_offset`."""
        return self._run(self.core.search_offset(mq, timestamp_ms))

    def fetch_min_offsets(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """See :meth:`AsyncAdminClient.fetch_min_offsets`."""
        return self._run(self.core.fetch_min_offsets(mqs))

    def fetch_max_offsets(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """See :meth:`AsyncAdminClient.fetch_max_offsets`."""
        return self._run(self.core.fetch_max_offsets(mqs))

    def search_offsets(self, mqs: Iterable[MessageQueue], timestamp_ms: int) -> dict[MessageQueue, int]:
        """See :meth:`AsyncAdminClient.search_offsets`."""
        return self._run(self.core.search_offsets(mqs, timestamp_ms))

    def query_consumer_offset(self, group: str, mq: MessageQueue) -> int:
        """See :meth:`AsyncAdminClient.query_consumer_offset`."""
        return self._run(self.core.query_consumer_offset(group, mq))

    def query_consumer_offsets(self, group: str, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """See :meth:`AsyncAdminClient.query_consumer_offsets`."""
        return self._run(self.core.query_consumer_offsets(group, mqs))

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        """See :meth:`AsyncAdminClient.update_consumer_offset`."""
        self._run(self.core.update_consumer_offset(group, mq, offset))

    def update_consumer_offsets(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        """See :meth:`AsyncAdminClient.update_consumer_offsets`."""
        self._run(self.core.update_consumer_offsets(group, offsets))

    def reset_offset_by_timestamp(
        self, topic: str, group: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """See :meth:`AsyncAdminClient.reset_offset_by_timestamp`."""
        return self._run(self.core.reset_offset_by_timestamp(topic, group, timestamp_ms, force=force))

    def examine_consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """See :meth:`AsyncAdminClient.examine_consume_stats`."""
        return self._run(self.core.examine_consume_stats(group, topic))

    def consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        """See :meth:`AsyncAdminClient.consumer_progress`."""
        return self._run(self.core.consumer_progress(group, topic))

    def consumer_progress_report(
        self, group: str, topic: str | None = None
    ) -> tuple[list[QueueProgress], dict[str, str]]:
        """See :meth:`AsyncAdminClient.consumer_progress_report` (rows, brokers that could not be asked)."""
        return self._run(self.core.consumer_progress_report(group, topic))

    def examine_consumer_connection_info(self, group: str) -> ConsumerConnection:
        """See :meth:`AsyncAdminClient.examine_consumer_connection_info`."""
        return self._run(self.core.examine_consumer_connection_info(group))

    def pop_status(
        self, group: str | None = None, topic: str | None = None, broker_addrs: list[str] | None = None
    ) -> list[PopGroupRow]:
        """See :meth:`AsyncAdminClient.pop_status`."""
        return self._run(self.core.pop_status(group, topic, broker_addrs))


class BlockingMessages(BlockingFace):
    """Messages (:class:`~tidemq.admin.ops_message.MessageOps`): send a test message, look one up."""

    def send_message(self, topic: str, body: bytes, **kwargs: Any) -> Any:
        """See :meth:`AsyncAdminClient.send_message`."""
        return self._run(self.core.send_message(topic, body, **kwargs))

    def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """See :meth:`AsyncAdminClient.view_message`."""
        return self._run(self.core.view_message(msg_id, topic))

    def query_message_by_key(self, topic: str, key: str, max_num: int = 64) -> list[MessageExt]:
        """See :meth:`AsyncAdminClient.query_message_by_key`."""
        return self._run(self.core.query_message_by_key(topic, key, max_num))

    def query_message_by_offset(self, mq: MessageQueue, offset: int) -> MessageExt:
        """See :meth:`AsyncAdminClient.query_message_by_offset`."""
        return self._run(self.core.query_message_by_offset(mq, offset))
