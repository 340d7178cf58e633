"""A slave copies its master's metadata every 10 s (RocketMQ 4.9 ``SlaveSynchronize``).

Copied, each with the master's admin request: topic configs (GET_ALL_TOPIC_CONFIG, 21; replaced
when the master's dataVersion differs), consumer offsets (GET_ALL_CONSUMER_OFFSET, 43; the master's
entries overwrite the slave's), delay offsets (GET_ALL_DELAY_OFFSET, 45; written to
``delayOffset.json``) and subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG, 201; replaced when
the dataVersion differs). Each table is persisted after it changed. :class:`SlaveSyncServeProcessor`
answers codes 43 and 45 on every broker (the master serves them).

Between two synchronisations a slave may hold messages of a topic it has not copied yet (a
SYNC_MASTER acknowledges a message once the slave holds it; the master may die a second after
the topic's creation). :class:`SlaveTopics` serves such a topic anyway: its consume queues prove
it exists and give its queue count (highest queue id + 1); the next sync brings the real config.
RocketMQ's slaves refuse the topic until then (TOPIC_NOT_EXIST); tidemq does not.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, ClassVar

from tidemq.protocol.body import (
    DataVersion,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from tidemq.protocol.body.fastjson import fastjson_loads
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.store.config_file import atomic_write_json

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel

log = logging.getLogger(__name__)

SYNC_INTERVAL = 10.0
"""Seconds between two synchronisations (RocketMQ: every 10 s after a 3 s delay)."""


class SlaveSynchronize:
    """Pull the master's topics, groups, consumer offsets and delay offsets into a slave.

    Args:
        broker: the slave broker (its managers are updated in place).

    Attributes:
        master_addr: the master's remoting address (``masterAddr`` of the REGISTER_BROKER answer);
            nothing is copied while it is None.
        last_sync_ok: whether the last :meth:`sync_all` copied everything.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.master_addr: str | None = None
        self.last_sync_ok = False

    async def _get(self, code: int) -> bytes:
        assert self.master_addr is not None
        request = RemotingCommand.create_request(code)
        response = await self.broker.remoting_client.invoke(self.master_addr, request, 3.0)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"master {self.master_addr} answered {response.code}: {response.remark}")
        return response.body

    async def sync_all(self) -> bool:
        """Copy the four tables (``syncAll``); failures are logged and retried next period.

        Returns True when all four were copied.
        """
        if not self.master_addr:
            return False
        ok = True
        for name, step in (
            ("topic configs", self.sync_topic_config),
            ("consumer offsets", self.sync_consumer_offset),
            ("delay offsets", self.sync_delay_offset),
            ("subscription groups", self.sync_subscription_group_config),
        ):
            try:
                await step()
            except Exception as exc:
                ok = False
                log.info("slave sync of %s from %s failed: %s", name, self.master_addr, exc)
        self.last_sync_ok = ok
        return ok

    async def sync_topic_config(self) -> None:
        """GET_ALL_TOPIC_CONFIG (21): replace the slave's topics when the master's dataVersion differs."""
        wrapper = TopicConfigSerializeWrapper.decode(await self._get(RequestCode.GET_ALL_TOPIC_CONFIG))
        tcm = self.broker.topic_config_manager
        if _same_version(tcm.data_version, wrapper.data_version):
            return
        tcm.replace_table(wrapper.topic_config_table, wrapper.data_version)  # written off the loop
        log.info("slave: %d topic configs copied from %s", len(wrapper.topic_config_table), self.master_addr)

    async def sync_consumer_offset(self) -> None:
        """GET_ALL_CONSUMER_OFFSET (43): the master's offsets overwrite the slave's, then persist."""
        obj = fastjson_loads(await self._get(RequestCode.GET_ALL_CONSUMER_OFFSET))
        table = obj.get("offsetTable", {}) if isinstance(obj, dict) else {}
        com = self.broker.consumer_offset_manager
        com.put_all(
            {str(key): {int(q): int(o) for q, o in dict(queues).items()} for key, queues in table.items()}
        )
        await asyncio.get_running_loop().run_in_executor(None, com.persist)  # fsyncs: off the loop

    async def sync_delay_offset(self) -> None:
        """GET_ALL_DELAY_OFFSET (45): write the master's ``delayOffset.json`` content."""
        body = await self._get(RequestCode.GET_ALL_DELAY_OFFSET)
        obj = fastjson_loads(body) if body else None
        if isinstance(obj, dict):
            atomic_write_json(self.broker.config_dir / "delayOffset.json", obj)

    async def sync_subscription_group_config(self) -> None:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): replace the groups when the dataVersion differs."""
        obj = fastjson_loads(await self._get(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        if not isinstance(obj, dict):
            return
        version = DataVersion.from_json(obj.get("dataVersion") or {})
        sgm = self.broker.subscription_group_manager
        if _same_version(sgm.data_version, version):
            return
        groups = {
            str(name): SubscriptionGroupConfig.from_json(cfg)
            for name, cfg in dict(obj.get("subscriptionGroupTable") or {}).items()
        }
        sgm.replace_all(groups, version)
        sgm.persist_soon()


class SlaveTopics:
    """A slave's :attr:`TopicConfigManager.fallback`: the topics its consume queues hold.

    Args:
        broker: the slave broker (its store's ``consume_queue_table`` is read, never changed).

    ``__call__(topic)`` returns a read/write ``TopicConfig`` with ``highest queue id + 1`` queues
    when the store has a consume queue of ``topic``, else None. The answer is cached until the
    store's consume-queue count changes (a new queue may raise the count).
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._cache: dict[str, tuple[int, TopicConfig | None]] = {}
        self._logged: set[str] = set()

    def __call__(self, topic: str) -> TopicConfig | None:
        table = self.broker.store.consume_queue_table
        size = len(table)
        hit = self._cache.get(topic)
        if hit is not None and hit[0] == size:
            return hit[1]
        qids = [qid for t, qid in list(table) if t == topic]
        tc = None
        if qids:
            from tidemq.broker.topic_config import make_topic_config

            tc = make_topic_config(topic, max(qids) + 1)
            if topic not in self._logged:
                self._logged.add(topic)
                log.info(
                    "slave: serving topic %s from its %d consume queues until the next sync", topic, len(qids)
                )
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[topic] = (size, tc)
        return tc


def _same_version(a: DataVersion, b: DataVersion) -> bool:
    return a.timestamp == b.timestamp and a.counter == b.counter


class SlaveSyncServeProcessor:
    """Answers GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45), which slaves call.

    Bodies: the broker's ``consumerOffset.json`` and ``delayOffset.json`` content (JSON), as
    RocketMQ's ``AdminBrokerProcessor.getAllConsumerOffset`` / ``getAllDelayOffset``.
    """

    CODES: ClassVar[tuple[int, ...]] = (RequestCode.GET_ALL_CONSUMER_OFFSET, RequestCode.GET_ALL_DELAY_OFFSET)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        import orjson

        body: Any
        if request.code == RequestCode.GET_ALL_CONSUMER_OFFSET:
            body = self.broker.consumer_offset_manager.encode()
        else:
            schedule = self.broker.schedule_message_service
            body = schedule.encode() if schedule is not None else {"offsetTable": {}}
        return RemotingCommand.create_response(ResponseCode.SUCCESS, None, None, orjson.dumps(body))
