"""Client configuration dataclasses (RocketMQ's option names in snake_case, its defaults).

Mirrors ``ClientConfig``, ``DefaultMQProducer``'s and ``DefaultMQPushConsumer``'s /
``DefaultLitePullConsumer``'s settings. Units: seconds for timeouts and intervals in the
Python API (``*_ms`` where RocketMQ's wire value is meant), bytes for sizes unless the name
says MiB. Constructors of producers/consumers take ``config=`` plus ``**overrides``.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from tidemq.errors import ClientError

__all__ = [
    "ClientConfig",
    "ProducerConfig",
    "PullConsumerConfig",
    "PushConsumerConfig",
    "apply_overrides",
    "default_instance_name",
    "local_ip",
]

_IMPORTANT = {"important": True}


def local_ip() -> str:
    """The client IP RocketMQ would pick: first non-loopback IPv4, preferring non-192.168 (``RemotingUtil.getLocalAddress``)."""
    candidates: list[str] = []
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            candidates.append(str(info[4][0]))
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            candidates.append(str(s.getsockname()[0]))
    except OSError:
        pass
    usable = [ip for ip in candidates if not ip.startswith("127.")]
    preferred = [ip for ip in usable if not ip.startswith("192.168")]
    if preferred:
        return preferred[0]
    return usable[-1] if usable else "127.0.0.1"


def default_instance_name() -> str:
    """``<pid>#<random>``: unique across processes and containers on one host (``changeInstanceNameToPID``)."""
    return f"{os.getpid()}#{secrets.randbelow(2**53)}"


@dataclass(slots=True, kw_only=True)
class ClientConfig:
    """Settings shared by every client. Mirrors ``ClientConfig``.

    Attributes:
        namesrv_addr: ``"host:port"`` or several separated by ``;``.
        client_ip: IP part of the client id (default: :func:`local_ip`).
        instance_name: instance part of the client id; default ``<pid>#<random>``.
        poll_name_server_interval: route refresh period, s (30).
        heartbeat_broker_interval: heartbeat period, s (30).
        persist_consumer_offset_interval: offset persist period, s (5).
        mq_client_api_timeout: default RPC timeout, s (3).
        pull_time_delay_when_exception: retry delay after a failed pull, s (1).
        language: LanguageCode name sent in request headers (``"PYTHON"``).
        access_key / secret_key: ACL credentials; when both are set every request is signed
            (``AclClientRPCHook``, docs/acl.md). ``security_token``: optional, sent as ``SecurityToken``.
        enable_msg_trace: record message traces (producers: sends; push consumers: consumes) on
            ``customized_trace_topic`` (default ``RMQ_SYS_TRACE_TOPIC``), as the Java client's
            ``enableMsgTrace`` does (:mod:`tidemq.client.trace`). False.
    """

    namesrv_addr: str = field(default="127.0.0.1:9876", metadata=_IMPORTANT)
    client_ip: str = ""
    instance_name: str = ""
    unit_name: str | None = None
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    persist_consumer_offset_interval: float = 5.0
    mq_client_api_timeout: float = 3.0
    pull_time_delay_when_exception: float = 1.0
    language: str = "PYTHON"
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    security_token: str | None = field(default=None, repr=False)
    enable_msg_trace: bool = False
    customized_trace_topic: str | None = None

    def build_client_id(self) -> str:
        """``ip@instance[@unit]`` (``ClientConfig.buildMQClientId``); fills defaults on first use."""
        if not self.client_ip:
            self.client_ip = local_ip()
        if not self.instance_name:
            self.instance_name = default_instance_name()
        cid = f"{self.client_ip}@{self.instance_name}"
        return f"{cid}@{self.unit_name}" if self.unit_name else cid

    def namesrv_addrs(self) -> list[str]:
        """The name server list (``;``-separated in ``namesrv_addr``).

        Raises:
            ClientError: the list is empty.
        """
        addrs = [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]
        if not addrs:
            raise ClientError("namesrv_addr is empty: set it to 'host:port'")
        return addrs


@dataclass(slots=True, kw_only=True)
class ProducerConfig(ClientConfig):
    """Producer settings. Mirrors ``DefaultMQProducer``.

    Attributes:
        producer_group: group name (default ``DEFAULT_PRODUCER``).
        create_topic_key: template topic for auto-creation (``TBW102``).
        default_topic_queue_nums: queues of an auto-created topic (4).
        send_msg_timeout: per-attempt send timeout, s (3).
        compress_msg_body_over_howmuch: zlib-compress bodies of at least this many bytes (4096).
        retry_times_when_send_failed: extra attempts for sync sends (2).
        retry_times_when_send_async_failed: extra attempts for async sends (2).
        retry_another_broker_when_not_store_ok: retry on FLUSH_*/SLAVE_* statuses (False).
        max_message_size: largest body accepted, bytes (4 MiB).
        compress_level: zlib level (5, as Java).
        send_latency_fault_enable: avoid brokers that failed or answered slowly for a while
            (``MQFaultStrategy``; False, as Java).
        latency_max: latency thresholds, ms (Java's ``latencyMax``).
        not_available_duration: how long a broker with that latency is avoided, ms (Java's
            ``notAvailableDuration``).
        sync_send_direct: the blocking ``Producer`` sends on the caller's thread over its own
            blocking connection instead of hopping to the client loop (True; see
            :mod:`tidemq.client.direct`). Off when ACL keys are set.
    """

    producer_group: str = field(default="DEFAULT_PRODUCER", metadata=_IMPORTANT)
    create_topic_key: str = "TBW102"
    default_topic_queue_nums: int = 4
    send_msg_timeout: float = 3.0
    compress_msg_body_over_howmuch: int = 4096
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = 4 * 1024 * 1024
    compress_level: int = 5
    send_latency_fault_enable: bool = False
    latency_max: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
    not_available_duration: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
    sync_send_direct: bool = True


@dataclass(slots=True, kw_only=True)
class PushConsumerConfig(ClientConfig):
    """Push consumer settings. Mirrors ``DefaultMQPushConsumer``.

    Attributes:
        consumer_group: group name (required).
        message_model: ``"CLUSTERING"`` or ``"BROADCASTING"``.
        consume_from_where: ``CONSUME_FROM_LAST_OFFSET`` / ``_FIRST_OFFSET`` / ``_TIMESTAMP``.
        consume_timestamp: ``yyyyMMddHHmmss`` for CONSUME_FROM_TIMESTAMP (default: 30 min ago).
        allocate_message_queue_strategy: an ``AllocateMessageQueueStrategy`` (default Averagely).
        consume_thread_min / consume_thread_max: sync-listener thread pool (20 / 20).
        consume_concurrently_max_span: max cached offset span per queue (2000).
        pull_threshold_for_queue: max cached messages per queue (1000).
        pull_threshold_size_for_queue: max cached MiB per queue (100).
        pull_interval: pause between pulls of one queue, s (0).
        consume_message_batch_max_size: messages per listener call (1).
        pull_batch_size: messages per pull (32).
        max_reconsume_times: retries before the DLQ (-1 = 16).
        suspend_current_queue_time_millis: orderly pause after SUSPEND, ms (1000).
        consume_timeout: minutes before a stuck message is sent back (15).
        broker_suspend_max_time: long-polling hold the broker may use, s (15).
        consumer_pull_timeout: pull RPC timeout, s (30).
        rebalance_interval: rebalance period, s (20).
        offset_store_dir: LocalFileOffsetStore root (``~/.tidemq_offsets``).
        post_subscription_when_pull: send the expression with each pull (False).
        queue_lanes: with a plain-function listener and concurrent consumption, each owned queue
            (up to ``consume_thread_max``) is pulled by a thread of its own over a blocking
            connection, which also runs the listener on the first messages of each pulled batch:
            no hop through the client loop between the broker's answer and the listener (True;
            tidemq only, see ``tidemq.client.consumer.queue_lane``; off with ACL keys, as its
            connection does not sign requests). False: the loop pulls and the pool consumes, as
            RocketMQ's client does.
        clean_handoff: CLUSTERING: hand a queue over cleanly when rebalance moves it between live
            members (the old owner drains running listener calls, commits synchronously, then
            releases the queue's broker lock; the new owner waits for that release before it
            reads the committed offset; see ``tidemq.client.consumer.handoff``). True; tidemq
            only. False: RocketMQ's behaviour (asynchronous commit, no wait).
        handoff_timeout: seconds the old owner waits for running listener calls and the new
            owner waits for the release before it goes on as RocketMQ does (5).
        unit_mode / vip_channel_enabled: accepted for compatibility, unused.
    """

    consumer_group: str = field(default="", metadata=_IMPORTANT)
    message_model: str = field(default="CLUSTERING", metadata=_IMPORTANT)
    consume_from_where: str = field(default="CONSUME_FROM_LAST_OFFSET", metadata=_IMPORTANT)
    consume_timestamp: str | None = None
    allocate_message_queue_strategy: Any = None
    consume_thread_min: int = 20
    consume_thread_max: int = 20
    consume_concurrently_max_span: int = 2000
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100
    pull_interval: float = 0.0
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    max_reconsume_times: int = -1
    suspend_current_queue_time_millis: int = 1000
    consume_timeout: float = 15.0
    broker_suspend_max_time: float = 15.0
    consumer_pull_timeout: float = 30.0
    rebalance_interval: float = 20.0
    offset_store_dir: Path = field(default_factory=lambda: Path.home() / ".tidemq_offsets")
    post_subscription_when_pull: bool = False
    queue_lanes: bool = True
    clean_handoff: bool = True
    handoff_timeout: float = 5.0
    unit_mode: bool = False

    def validate(self) -> None:
        """Check the settings a user can get wrong.

        Raises:
            ClientError: naming the bad setting.
        """
        if not self.consumer_group:
            raise ClientError("consumer_group is required")
        if self.consumer_group == "DEFAULT_CONSUMER":
            raise ClientError("consumer_group DEFAULT_CONSUMER is reserved; choose another name")
        if self.message_model not in ("CLUSTERING", "BROADCASTING"):
            raise ClientError(f"message_model must be CLUSTERING or BROADCASTING, got {self.message_model!r}")
        if not 1 <= self.consume_message_batch_max_size <= 1024:
            raise ClientError("consume_message_batch_max_size must be in [1, 1024]")
        if not 1 <= self.pull_batch_size <= 1024:
            raise ClientError("pull_batch_size must be in [1, 1024]")
        if self.consume_thread_max < 1 or self.consume_thread_min > self.consume_thread_max:
            raise ClientError("need 1 <= consume_thread_min <= consume_thread_max")
        if self.handoff_timeout < 0:
            raise ClientError(f"handoff_timeout must be >= 0 seconds, got {self.handoff_timeout}")

    @property
    def effective_max_reconsume_times(self) -> int:
        """``max_reconsume_times`` with -1 meaning 16 (concurrent consumption)."""
        return 16 if self.max_reconsume_times == -1 else self.max_reconsume_times


@dataclass(slots=True, kw_only=True)
class PullConsumerConfig(PushConsumerConfig):
    """Lite pull consumer settings. Mirrors ``DefaultLitePullConsumer``.

    Attributes:
        auto_commit: commit consumed offsets in the background (True).
        auto_commit_interval: seconds between auto commits (5).
        pull_threshold_for_all: cap on messages buffered for poll() (10000).
        poll_timeout: default poll timeout, s (5).
    """

    auto_commit: bool = True
    auto_commit_interval: float = 5.0
    pull_threshold_for_all: int = 10000
    poll_timeout: float = 5.0


C = TypeVar("C", bound=ClientConfig)


def apply_overrides(config: C | None, cls: type[C], overrides: dict[str, Any]) -> C:
    """``config`` (or ``cls()``) with ``overrides`` applied.

    Raises:
        ClientError: an override names no field of ``cls``.
    """
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ClientError(f"unknown {cls.__name__} option(s): {', '.join(unknown)}")
    base = config if config is not None else cls()
    return replace(base, **overrides) if overrides else replace(base)
