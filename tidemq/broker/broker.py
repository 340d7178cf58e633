"""The broker: wiring of store, managers, processors, transport and periodic tasks.

Mirrors RocketMQ's ``BrokerController``.

Start order: config files (refuse to start on corrupt offsets, before binding anything) -> bind the
remoting server (answers SYSTEM_BUSY "starting" until ready) -> store load (recovery) -> processors ->
register with every name server -> periodic tasks (register every 30 s, offsets persist every 5 s,
retention check, client channel expiry scan every 10 s, and the ASYNC_FLUSH flush task).

Shutdown: stop accepting and close connections -> unregister from the name servers -> persist
offsets and configs -> ``store.shutdown()`` (flush, checkpoint, remove the abort file).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidemq.broker.config import BrokerConfig, guess_broker_ip
from tidemq.broker.config_check import check_config
from tidemq.broker.config_persist import ConfigPersister
from tidemq.broker.config_recovery import config_files_missing, recreate_missing_topics, warn_lost_offsets
from tidemq.broker.consumer_filter import ConsumerFilterManager
from tidemq.broker.flush import INLINE_FSYNC_MAX, FlushRealTimeService, GroupCommitService
from tidemq.broker.longpolling import PullRequestHoldService
from tidemq.broker.offset_manager import ConsumerOffsetManager
from tidemq.broker.registration import BrokerRegistrar
from tidemq.broker.stats import BrokerStatsManager
from tidemq.broker.subscription_group import SubscriptionGroupManager
from tidemq.broker.topic_config import TopicConfigManager
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import UnRegisterBrokerRequestHeader
from tidemq.protocol.topic import TIMER_TOPIC
from tidemq.remoting import RemotingClient, RemotingServer
from tidemq.remoting.channel import call_after_write
from tidemq.store.config import MessageStoreConfig
from tidemq.store.dispatcher import PutRecords
from tidemq.store.lock import StoreLock
from tidemq.store.message_store import MessageStore

if TYPE_CHECKING:
    from tidemq.broker.broker_to_client import Broker2Client
    from tidemq.broker.consumer_manager import ClientHousekeepingService, ConsumerManager
    from tidemq.broker.ha_role import BrokerHA
    from tidemq.broker.pop.service import PopService
    from tidemq.broker.processor.pull import PullMessageProcessor
    from tidemq.broker.processor.send import SendMessageProcessor
    from tidemq.broker.producer_manager import ProducerManager
    from tidemq.broker.rebalance_lock import RebalanceLockManager
    from tidemq.broker.schedule import ScheduleMessageService
    from tidemq.broker.timer_service import TimerMessageService
    from tidemq.broker.transaction.service import TransactionalMessageService
    from tidemq.remoting import Channel

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class _StartingProcessor:
    """Default processor while the store is loading: SYSTEM_BUSY, so clients retry."""

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        return RemotingCommand.create_response(
            ResponseCode.SYSTEM_BUSY, "[STARTING] broker is starting, try later"
        )


class _NotSupportedProcessor:
    """Default processor once started: REQUEST_CODE_NOT_SUPPORTED with RocketMQ's remark."""

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        return RemotingCommand.create_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
        )


class Broker:
    """A RocketMQ-compatible broker (master or slave, see ``broker_role``). Mirrors ``BrokerController``.

    Args:
        config: broker settings (``listen_port=0`` picks a free port).
        store_config: message store settings (``store_path_root_dir``, ``flush_disk_type``...).
        store_lock: the lock on the store directory when the caller took it already (the CLI does,
            before anything starts); else :meth:`start` takes it. Released by :meth:`shutdown`.

    Attributes (for processors and the client-manage services):
        config, store_config, store, topic_config_manager, subscription_group_manager,
        consumer_offset_manager, consumer_manager, producer_manager, rebalance_lock_manager,
        broker2client, remoting_server, pull_request_hold_service, addr, loop.

    Example::

        broker = Broker(BrokerConfig(broker_name="b", listen_port=0, namesrv_addr="127.0.0.1:9876"),
                        MessageStoreConfig(store_path_root_dir="/tmp/store"))
        await broker.start()
        print(broker.addr)
        await broker.shutdown()
    """

    def __init__(
        self, config: BrokerConfig, store_config: MessageStoreConfig, *, store_lock: StoreLock | None = None
    ) -> None:
        from tidemq.broker.broker_to_client import Broker2Client
        from tidemq.broker.consumer_manager import ClientHousekeepingService, ConsumerManager
        from tidemq.broker.producer_manager import ProducerManager
        from tidemq.broker.rebalance_lock import RebalanceLockManager

        self.config = config
        self.store_config = store_config
        root = Path(store_config.store_path_root_dir).expanduser()
        self.config_dir = root / "config"
        self.config_persister = ConfigPersister()
        """Writes ``topics.json`` and ``subscriptionGroup.json`` off the loop (``config_persist.py``)."""
        self.topic_config_manager = TopicConfigManager(config, self.config_dir / "topics.json")
        self.subscription_group_manager = SubscriptionGroupManager(
            config, self.config_dir / "subscriptionGroup.json"
        )
        self.consumer_offset_manager = ConsumerOffsetManager(self.config_dir / "consumerOffset.json")
        self.consumer_manager: ConsumerManager = ConsumerManager(self)
        self.consumer_filter_manager = ConsumerFilterManager(self.config)
        self.producer_manager: ProducerManager = ProducerManager()
        self.rebalance_lock_manager: RebalanceLockManager = RebalanceLockManager()
        self.broker2client: Broker2Client = Broker2Client(self)
        self.client_housekeeping_service: ClientHousekeepingService = ClientHousekeepingService(self)
        self.remoting_server = RemotingServer(
            config.listen_host,
            config.listen_port,
            idle_timeout=config.server_channel_max_idle_time_seconds,
            idle_poll_us=config.idle_poll_us,
        )
        self._offsets_file_missing = False
        self._topics_file_missing = False
        self._store_lock = store_lock if store_lock is not None else StoreLock(root)
        self.remoting_client = RemotingClient()
        self.broker_stats = BrokerStatsManager(config.broker_cluster_name)
        self.store: MessageStore = None  # type: ignore[assignment]  # set in start()
        self.pull_request_hold_service: PullRequestHoldService = None  # type: ignore[assignment]
        self.group_commit_service: GroupCommitService | None = None
        self.flush_service: FlushRealTimeService | None = None
        self.send_processor: SendMessageProcessor | None = None
        self.pull_processor: PullMessageProcessor | None = None
        self.schedule_message_service: ScheduleMessageService | None = None
        self.transaction_service: TransactionalMessageService | None = None
        self.pop_service: PopService = None  # type: ignore[assignment]  # set in start()
        self.timer_message_service: TimerMessageService | None = None
        self.ha: BrokerHA | None = None
        self.addr = ""
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.started = False
        self._shut_down = False
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self.registrar = BrokerRegistrar(self)
        self._register_pending: asyncio.Task[None] | None = None
        self._register_dirty = False
        self._loop_thread_id = 0

    # -- properties ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the broker listens on (the real one after start)."""
        return self.remoting_server.port

    @property
    def is_sync_flush(self) -> bool:
        return str(self.store_config.flush_disk_type).upper() == "SYNC_FLUSH"

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load configs and store, start serving, register with the name servers.

        Raises:
            StoreError: a config file and its ``.bak`` are both corrupt, or the store cannot load.
            OSError: the port cannot be bound.
        """
        self.loop = asyncio.get_running_loop()
        self._loop_thread_id = threading.get_ident()
        self._stop.clear()
        # 0. every value checked once (docs/reliability.md), then one process per store: the lock
        #    is taken before any file is read and handed to the MessageStore, which releases it.
        check_config(self.config, self.store_config)
        self._store_lock.acquire()
        try:
            await self._start_locked()
        except BaseException:
            if self.store is None or not self.store.running:
                self._store_lock.release()
            raise

    async def _start_locked(self) -> None:
        # 1. config files first: refuse to start (before binding) if offsets would be lost.
        self._offsets_file_missing = config_files_missing(self.consumer_offset_manager.path)
        tcm = self.topic_config_manager
        self._topics_file_missing = config_files_missing(tcm.path) and not tcm.journal.path.exists()
        self.consumer_offset_manager.load()
        self.topic_config_manager.load()
        self.subscription_group_manager.load()
        if self.config.acl_enable:  # plain ACL (docs/acl.md); refuse to start on a bad plain_acl.yml
            from tidemq.acl.plain import PlainAccessValidator

            acl_file = self.config.acl_file or self.config_dir / "plain_acl.yml"
            self.remoting_server.register_rpc_hook(PlainAccessValidator(acl_file))
        # 2. bind, answering "starting" meanwhile, so the real port (port 0) is known for storeHost.
        self.remoting_server.register_default_processor(_StartingProcessor())
        self.remoting_server.add_channel_listener(self.client_housekeeping_service)
        await self.remoting_server.start()
        try:
            await self._start_after_bind()
        except BaseException:
            await self.remoting_server.shutdown()
            raise

    def _schedule_dispatch(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the broker's loop soon (from any thread): right after the current
        request read's responses are written, else at the next loop turn."""
        if threading.get_ident() != self._loop_thread_id:
            self.loop.call_soon_threadsafe(callback)
        elif not call_after_write(callback):  # a put outside a request read (schedule service...)
            self.loop.call_soon(callback)

    async def _start_after_bind(self) -> None:
        """Once the port is bound: 3. the store, 4. services and processors, 5. name servers and
        periodic tasks."""
        await self._open_store()
        self._start_flush_service()
        await self._start_services()
        self.started = True
        await self._start_periodic_tasks()

    async def _open_store(self) -> None:
        """3. The store, loaded and recovered (in a thread: recovery may take a while), its lost
        topics and offsets dealt with, its put and dispatch hooks set."""
        ip = self.config.broker_ip1 or guess_broker_ip(self.config.listen_host)
        self.addr = f"{ip}:{self.port}"
        self.store = MessageStore(self.store_config, store_host=self.addr)
        self.store.lock = self._store_lock
        await self.loop.run_in_executor(None, self.store.load)
        recreate_missing_topics(self, files_missing=self._topics_file_missing)  # config_recovery.py
        if self._offsets_file_missing:
            warn_lost_offsets(self, self.consumer_offset_manager.path)
        self.store.message_arriving_listener = self._on_message_arriving
        self.store.message_put_listener = self._on_message_put
        # consume-queue + index dispatch runs just after each put, so a send's answer does not wait
        # for it (ReputMessageService); every read of the store drains what is pending first
        self.store.dispatcher.schedule = self._schedule_dispatch

    def _start_flush_service(self) -> None:
        """The commit log's flushing: group commit for SYNC_FLUSH, then the periodic flush."""
        sync_timeout = getattr(self.store_config, "sync_flush_timeout", 5000) / 1000.0
        if self.is_sync_flush:
            # sends wait for the commit log's fsync only; consume queues and the checkpoint are
            # flushed on their own timer (RocketMQ's FlushConsumeQueueService), never in a send's way
            self.group_commit_service = GroupCommitService(
                self.store.flush_commit_log,
                sync_flush_timeout=sync_timeout,
                inline_fsync_max=INLINE_FSYNC_MAX,
            )
            self.group_commit_service.idle_poller = self.remoting_server.idle_poller
            interval = getattr(self.store_config, "flush_interval_consume_queue", 1000) / 1000.0
        else:
            interval = getattr(self.store_config, "flush_interval_commit_log", 500) / 1000.0
        self.flush_service = FlushRealTimeService(
            self.store.flush, interval=interval, needed=self.store.flush_needed
        )
        self.flush_service.start()

    async def _start_services(self) -> None:
        """4. HA, transactions, the processors, long polling, delays, POP, timers, retention, and the
        config managers' hooks."""
        from tidemq.broker.ha_role import BrokerHA

        self.ha = BrokerHA(self)  # master: HA port; slave: replication + metadata sync
        await self.ha.start()
        from tidemq.broker.transaction.service import TransactionalMessageService

        self.transaction_service = TransactionalMessageService(self)  # half/op state from the store
        await self.transaction_service.start()
        self._register_processors()
        check = 5.0 if self.config.long_polling_enable else self.config.short_polling_time_mills / 1000.0
        assert self.pull_processor is not None
        self.pull_request_hold_service = PullRequestHoldService(
            self.store.get_max_offset_in_queue,
            self.pull_processor.execute_request_when_wakeup,
            answer_from_put=self.pull_processor.answer_from_put,
            check_interval=check,
        )
        self.pull_request_hold_service.start()
        self.store.message_put_waiters = self.pull_request_hold_service.held  # no pull held: no PutRecords
        from tidemq.broker.schedule import ScheduleMessageService

        self.schedule_message_service = ScheduleMessageService(
            self.store, self.store_config.delay_level_table(), self.config_dir / "delayOffset.json"
        )
        if not self.config.is_slave:  # a slave copies delay progress, it never delivers
            await self.schedule_message_service.start()
        await self.pop_service.start()  # POP: recovery from the revive log, then the revive task
        if not self.config.is_slave and self.store_config.timer_wheel_enable:  # timer_service.py
            from tidemq.broker.timer_service import TimerMessageService

            self.timer_message_service = TimerMessageService(self.store)
            await self.timer_message_service.start()
        from tidemq.broker.disk_retention import install as install_disk_retention

        install_disk_retention(self)  # retention keeps what consumers still need (disk_retention.py)
        self.topic_config_manager.on_change = self._on_topic_change
        for manager in (self.topic_config_manager, self.subscription_group_manager):
            manager.persist_later = self.config_persister.request  # no fsync on the loop
        self.remoting_server.register_default_processor(_NotSupportedProcessor())

    async def _start_periodic_tasks(self) -> None:
        """5. The first registration with the name servers, then the periodic tasks."""
        await self.register_broker_all()
        period = min(60_000, max(10_000, self.config.register_name_server_period)) / 1000.0
        self.every(period, self.registrar.register_periodic, "register-broker")
        self.every(
            self.config.flush_consumer_offset_interval / 1000.0, self._persist_offsets, "persist-offsets"
        )
        self.every(self.config.client_channel_scan_interval / 1000.0, self._scan_channels, "scan-channels")
        self.every(10.0, self._retention_check, "clean-expired")
        self.every(10.0, self._sample_stats, "stats-sample")
        log.info(
            "broker %s (%s) started at %s",
            self.config.broker_name,
            self.config.broker_cluster_name,
            self.addr,
        )

    def _register_processors(self) -> None:
        """Register every processor for each request code in its ``CODES``."""
        from tidemq.broker.pop.service import PopService
        from tidemq.broker.processor.admin import AdminBrokerProcessor
        from tidemq.broker.processor.admin_runtime import BrokerRuntimeProcessor
        from tidemq.broker.processor.client_manage import ClientManageProcessor
        from tidemq.broker.processor.offsets import ConsumerManageProcessor
        from tidemq.broker.processor.pop import (
            AckMessageProcessor,
            ChangeInvisibleTimeProcessor,
            PopMessageProcessor,
        )
        from tidemq.broker.processor.pull import PullMessageProcessor
        from tidemq.broker.processor.query import QueryMessageProcessor
        from tidemq.broker.processor.relay import AdminRelayProcessor
        from tidemq.broker.processor.reply import ReplyMessageProcessor
        from tidemq.broker.processor.send import SendMessageProcessor
        from tidemq.broker.processor.send_back import SendMessageBackProcessor
        from tidemq.broker.recall import RecallMessageProcessor
        from tidemq.broker.slave_sync import SlaveSyncServeProcessor
        from tidemq.broker.transaction.processor import EndTransactionProcessor

        self.pop_service = PopService(self)
        self.send_processor = SendMessageProcessor(self)
        self.pull_processor = PullMessageProcessor(self)
        self.admin_relay_processor = AdminRelayProcessor(self)
        processors: list[Any] = [
            self.send_processor,
            self.pull_processor,
            ConsumerManageProcessor(self),
            QueryMessageProcessor(self),
            AdminBrokerProcessor(self),
            BrokerRuntimeProcessor(self),
            ClientManageProcessor(self),
            SendMessageBackProcessor(self),
            self.admin_relay_processor,
            SlaveSyncServeProcessor(self),
            ReplyMessageProcessor(self),
            EndTransactionProcessor(self),
            PopMessageProcessor(self),
            AckMessageProcessor(self),
            ChangeInvisibleTimeProcessor(self),
            RecallMessageProcessor(self),
        ]
        for processor in processors:
            for code in processor.CODES:
                self.remoting_server.register_processor(code, processor)
        from tidemq.broker.processor.send_fast import FastSend

        self.remoting_server.register_fast_path(RequestCode.SEND_MESSAGE_V2, FastSend(self.send_processor))

    async def shutdown(self) -> None:
        """Stop cleanly: close connections, unregister, persist offsets/configs, shut the store down.

        Idempotent.
        """
        if self._shut_down:
            return
        self._shut_down = True
        if not self.started and self.store is None:
            await self.remoting_server.shutdown()
            self._store_lock.release()
            return
        self.started = False
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks.clear()
        if self._register_pending is not None:
            self._register_pending.cancel()
        if self.pull_request_hold_service is not None:
            await self.pull_request_hold_service.shutdown()
        await self.remoting_server.shutdown()
        if self.ha is not None:
            await self.ha.shutdown()
        with contextlib.suppress(Exception):
            await self.unregister_broker_all()
        await self.remoting_client.close()
        if self.group_commit_service is not None:
            await self.group_commit_service.shutdown()
        if self.flush_service is not None:
            await self.flush_service.shutdown()
        if self.schedule_message_service is not None:
            await self.schedule_message_service.shutdown()
        if self.transaction_service is not None:
            await self.transaction_service.shutdown()
        if self.pop_service is not None:
            await self.pop_service.shutdown()
        if self.timer_message_service is not None:
            await self.timer_message_service.shutdown()
        await self.loop.run_in_executor(None, self.config_persister.shutdown)  # writes still queued
        for persist in (
            self.consumer_offset_manager.persist,
            self.topic_config_manager.persist,
            self.subscription_group_manager.persist,
        ):
            try:
                persist()
            except Exception:
                log.exception("persist at shutdown failed")
        if self.store is not None:
            await self.loop.run_in_executor(None, self.store.shutdown)
        self._store_lock.release()
        log.info("broker %s at %s stopped", self.config.broker_name, self.addr)

    async def config_files_written(self) -> None:
        """Wait until ``topics.json`` and ``subscriptionGroup.json`` hold every change made so far
        (admin requests answer after it).

        Raises:
            StoreError: a file could not be written.
        """
        for manager in (self.topic_config_manager, self.subscription_group_manager):
            pending = manager.pending_write
            if pending is not None:
                await asyncio.wrap_future(pending)

    # -- name server registration ---------------------------------------------------------------

    async def register_broker_all(self) -> None:
        """REGISTER_BROKER (103) of the whole topic table with every name server, concurrently.
        Mirrors ``registerBrokerAll``; incremental and periodic registrations: ``registration.py``.

        Failures are logged (the next period retries); never raises.
        """
        await self.registrar.register_full()

    async def unregister_broker_all(self) -> None:
        """UNREGISTER_BROKER (104) to every name server (at shutdown)."""
        header = UnRegisterBrokerRequestHeader(
            broker_name=self.config.broker_name,
            broker_addr=self.addr,
            cluster_name=self.config.broker_cluster_name,
            broker_id=self.config.broker_id,
        )

        async def one(addr: str) -> None:
            request = RemotingCommand.create_request(RequestCode.UNREGISTER_BROKER, header.to_ext_fields())
            try:
                await self.remoting_client.invoke(addr, request, 3.0)
            except Exception as exc:
                log.warning("unregister broker from %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in self.config.namesrv_addr_list()))

    async def _register_while_dirty(self) -> None:
        while self._register_dirty:
            self._register_dirty = False
            await self.registrar.register_increment()

    def _on_topic_change(self) -> None:
        """Topic created/updated/deleted: re-register at once (coalescing bursts into one call)."""
        if self.loop is None or not self.started:
            return

        def schedule() -> None:
            # A change during an in-flight registration must not be lost: mark it dirty and let the
            # running task register once more (a burst still coalesces into at most two calls).
            self._register_dirty = True
            if self._register_pending is None or self._register_pending.done():
                self._register_pending = self.loop.create_task(self._register_while_dirty())

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            schedule()
        else:
            self.loop.call_soon_threadsafe(schedule)

    # -- periodic tasks ---------------------------------------------------------------------------

    def every(self, period: float, fn: Callable[[], Awaitable[Any]], name: str) -> None:
        """Run ``await fn()`` every ``period`` s (first after one period) on the broker's loop until
        shutdown, as task ``name``; an exception it raises is logged and the next run goes on
        (the ``scheduledExecutorService.scheduleAtFixedRate`` jobs of ``BrokerController``)."""

        async def run() -> None:
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), period)
                if self._stop.is_set():
                    return
                try:
                    await fn()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("periodic task %s failed", name)

        self._tasks.append(self.loop.create_task(run(), name=name))

    async def _persist_offsets(self) -> None:
        await self.loop.run_in_executor(None, lambda: self.consumer_offset_manager.persist(force=False))

    async def _sample_stats(self) -> None:
        self.broker_stats.sample()

    async def _scan_channels(self) -> None:
        self.client_housekeeping_service.scan_exception_channel(now_ms())

    def is_time_to_delete(self, now: datetime.datetime | None = None) -> bool:
        """True during a ``delete_when`` hour (``"04"`` or ``"04;05"``), as RocketMQ's ``isTimeToDelete``."""
        hours = {int(h) for h in str(self.store_config.delete_when).split(";") if h.strip().isdigit()}
        return (now or datetime.datetime.now()).hour in hours

    async def _retention_check(self) -> None:
        """Retention (``CleanCommitLogService``): expired, consumed segments go at the ``delete_when``
        hour, or at once when the disk is above ``disk_max_used_space_ratio``
        (``tidemq/store/retention.py``); the disk-full state is re-read too."""
        store = self.store

        def work() -> None:
            store.retention.delete_expired_files(scheduled=self.is_time_to_delete())
            store.retention.clean_expired_consume_queue()
            store.disk_guard.check(store.get_max_phy_offset())

        await self.loop.run_in_executor(None, work)

    def _on_message_put(self, put: PutRecords) -> None:
        """Store listener right after each put: a pull held at exactly the new records' offset is
        answered from them now (puts made off the loop are left to the dispatch's arrival)."""
        hold = self.pull_request_hold_service
        if hold is not None and threading.get_ident() == self._loop_thread_id:
            hold.notify_message_put(put)

    def _on_message_arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_timestamp: int
    ) -> None:
        """Store listener after each put: wake held pulls (thread-safe; the store may run in a thread)."""
        ha = self.ha
        if ha is not None and ha.service is not None and ha.service.connections:  # a slave to wake
            ha.notify_new_data()
        if topic == "SCHEDULE_TOPIC_XXXX" and self.schedule_message_service is not None:
            self.schedule_message_service.notify_message_arriving(queue_id)
        elif topic == TIMER_TOPIC and self.timer_message_service is not None:
            self.timer_message_service.notify_message_arriving()
        pop = self.pop_service
        hold = self.pull_request_hold_service
        if hold is None:
            return
        if threading.get_ident() == self._loop_thread_id:
            if pop is not None:
                pop.notify_arriving(topic)
            hold.notify_message_arriving(topic, queue_id, max_offset, tags_code)
        else:
            if pop is not None:
                self.loop.call_soon_threadsafe(pop.notify_arriving, topic)
            self.loop.call_soon_threadsafe(
                hold.notify_message_arriving, topic, queue_id, max_offset, tags_code
            )

    # -- hooks for processors ---------------------------------------------------------------------

    async def wait_for_flush(self, end_offset: int) -> bool:
        """SYNC_FLUSH: wait until the commit log is fsynced past ``end_offset``; True if durable.

        ASYNC_FLUSH: returns True at once.
        """
        if self.group_commit_service is None:
            return True
        return await self.group_commit_service.wait_for_flush(end_offset)

    async def handle_ha(self, end_offset: int) -> ResponseCode:
        """SYNC_MASTER: SUCCESS once a slave holds bytes below ``end_offset``, else
        SLAVE_NOT_AVAILABLE / FLUSH_SLAVE_TIMEOUT (``CommitLog.handleHA``); SUCCESS for other roles."""
        return ResponseCode.SUCCESS if self.ha is None else await self.ha.handle_ha(end_offset)
