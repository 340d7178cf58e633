"""Broker configuration: RocketMQ's ``BrokerConfig`` in snake_case, and a ``broker.conf`` loader.

Mirrors ``org.apache.rocketmq.common.BrokerConfig``. Option names are RocketMQ's (``brokerName`` ->
``broker_name``) with RocketMQ's defaults; units are in the names (``*_mills`` / ``*_ms`` are
milliseconds, as on the wire and in ``broker.conf``).

``load_broker_conf(path)`` reads a RocketMQ ``broker.conf`` (Java properties, camelCase keys) into a
``BrokerConfig`` and a ``MessageStoreConfig``; keys neither knows are logged as warnings and ignored.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidemq.errors import ClientError
from tidemq.store.config import MessageStoreConfig

log = logging.getLogger(__name__)

DEFAULT_MAX_SUSPEND_MS = 25_000
"""Longest a pull is held by long polling, whatever the client asks (its RPC timeout is 30 s)."""


def _default_broker_name() -> str:
    try:
        return socket.gethostname() or "broker-a"
    except OSError:  # pragma: no cover - exotic hosts
        return "broker-a"


@dataclass(slots=True, kw_only=True)
class BrokerConfig:
    """Broker settings. Mirrors RocketMQ's ``BrokerConfig`` (names in snake_case, same defaults).

    Attributes:
        broker_name: this broker's name (routes group masters/slaves by it); default the host name.
        broker_cluster_name: cluster the broker registers in, default ``"DefaultCluster"``.
        broker_id: 0 = master, > 0 = a slave of the group named ``broker_name``.
        broker_ip1: address clients should use; ``""`` = 127.0.0.1 when listening on loopback,
            else the first non-loopback IPv4 of this host.
        listen_host: interface to bind (not a RocketMQ option; RocketMQ binds every interface).
        listen_port: broker port, default 10911 (0 = pick a free one).
        namesrv_addr: ``"host:port;host:port"`` of the name servers; ``None`` = register nowhere.
        auto_create_topic_enable: register ``TBW102`` with perm 7 so unknown topics are created on send.
        default_topic_queue_nums: queues of ``TBW102`` (and so the cap for auto-created topics).
        auto_create_subscription_group: create a group's config on first heartbeat / pull.
        long_polling_enable: hold empty pulls up to their ``suspendTimeoutMillis``.
        short_polling_time_mills: hold time when long polling is disabled (ms).
        max_suspend_ms: cap on how long one pull is held (ms; RocketMQ has none, clients time out at 30 s).
        register_name_server_period: REGISTER_BROKER period (ms), clamped to 10-60 s like RocketMQ.
        broker_permission: perm bits of the broker itself (6 = read + write).
        trace_on: value of the ``TRACE_ON`` ext field on send responses.
        region_id: value of the ``MSG_REGION`` ext field on send responses.
        trace_topic_enable / msg_trace_topic_name: create the message-trace topic (default
            ``RMQ_SYS_TRACE_TOPIC``, 1 queue) at start, for clusters where topics are not auto-created
            (``traceTopicEnable``, off as in RocketMQ: traced clients create it through TBW102).
        store_reply_message_enable: request-reply answers (SEND_REPLY_MESSAGE 324/325) are also
            stored on ``<cluster>_REPLY_TOPIC``, besides being pushed to the requester.
        recall_message_enable: RECALL_MESSAGE (370) cancels timer messages (``broker/recall.py``; on
            by default, RocketMQ 5.3's ``recallMessageEnable`` is off).
        channel_expired_timeout: client channels silent this long are dropped (ms).
        subscription_expired_timeout: a subscription known only from a group's pops is forgotten
            this long after its last pop (ms; ``subscriptionExpiredTimeout``, 10 min).
        flush_consumer_offset_interval: consumerOffset.json persist period (ms).
        notify_consumer_ids_changed_enable: default for new subscription groups.
        cluster_topic_enable / broker_topic_enable: create the ``<cluster>`` / ``<broker>`` topics.
        max_reconsume_times: retries before a ``%RETRY%`` message goes to ``%DLQ%`` (group default 16).
        client_channel_scan_interval: how often expired client channels are scanned (ms).
        register_broker_timeout_mills: REGISTER_BROKER RPC timeout (ms).
        acl_enable: check every request against plain ACL (``aclEnable``; see docs/acl.md).
        acl_file: the ``plain_acl.yml`` to use; ``None`` = ``<store root>/config/plain_acl.yml``.
        broker_role: ``ASYNC_MASTER`` | ``SYNC_MASTER`` (SEND_OK only once a slave holds the
            bytes) | ``SLAVE`` (replicates the master's commit log, refuses sends); docs/deployment.md.
        ha_listen_port: HA (replication) port of a master; ``None`` = ``listen_port + 1`` (0 when
            ``listen_port`` is 0). ``haListenPort`` in broker.conf.
        ha_master_address: ``ip:port`` of the master's HA port for a slave; ``None`` = the address
            the name server returns on registration (``haMasterAddress``).
        slave_read_enable: masters suggest the slave to consumers far behind, slaves keep them while
            they are (``slaveReadEnable``, RocketMQ default false).
        ha_send_heartbeat_interval / ha_housekeeping_interval: HA heartbeat period and the silence
            after which an HA connection is dropped (ms; 5000 / 20000).
        ha_transfer_batch_size: most commit-log bytes per HA frame (32 KiB).
        ha_slave_fallbehind_max: a slave further behind than this (bytes) counts as unavailable.
        server_channel_max_idle_time_seconds: a connection that sends nothing for this long (s) is
            closed, as is one that has not read our responses for this long (RocketMQ's
            ``NettyServerConfig.serverChannelMaxIdleTimeSeconds``, 120).
        idle_poll_us: while requests come close together, the broker's loop keeps polling its
            connections this long (µs) after each read before it sleeps, so the next request does
            not have to wake a sleeping CPU
            (:class:`~tidemq.remoting.busy_poll.IdlePoller`; not a RocketMQ option). 0 (default)
            = off, for a broker sharing its process with clients; ``tidemq serve`` and ``tidemq
            broker`` own theirs and use 500 unless ``--idle-poll-us`` or ``idlePollUs`` says otherwise.
        reject_transaction_message: refuse half messages with NO_PERMISSION
            (``rejectTransactionMessage``).
        transaction_time_out: a half message younger than this is not checked yet (ms,
            ``transactionTimeOut``, 6000; a message's ``CHECK_IMMUNITY_TIME_IN_SECONDS`` can lengthen it).
        transaction_check_max: checks of one half message before it is discarded to
            ``TRANS_CHECK_MAX_TIME_TOPIC`` (``transactionCheckMax``, 15).
        transaction_check_interval: period of the check pass (ms, ``transactionCheckInterval``,
            RocketMQ 4.9's 60000). See docs/transactions.md.
        enable_property_filter: serve SQL92 subscriptions (``enablePropertyFilter``). **On** by
            default here; RocketMQ's default is off (then SQL92 pulls get SYSTEM_ERROR).
        filter_support_retry: evaluate a group's SQL92 filter on its ``%RETRY%`` messages too
            (``filterSupportRetry``). **On** by default here; RocketMQ's default is off.
    """

    broker_name: str = field(default_factory=_default_broker_name, metadata={"important": True})
    broker_cluster_name: str = field(default="DefaultCluster", metadata={"important": True})
    broker_id: int = 0
    broker_ip1: str = ""
    broker_ip2: str = ""
    listen_host: str = "0.0.0.0"
    listen_port: int = field(default=10911, metadata={"important": True})
    ha_listen_port: int | None = None
    namesrv_addr: str | None = field(default=None, metadata={"important": True})
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 8
    auto_create_subscription_group: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    max_suspend_ms: int = DEFAULT_MAX_SUSPEND_MS
    register_name_server_period: int = 30_000
    register_broker_timeout_mills: int = 6000
    broker_permission: int = 6
    trace_on: bool = True
    region_id: str = "DefaultRegion"
    store_reply_message_enable: bool = True
    recall_message_enable: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    channel_expired_timeout: int = 120_000
    subscription_expired_timeout: int = 600_000
    client_channel_scan_interval: int = 10_000
    flush_consumer_offset_interval: int = 5000
    notify_consumer_ids_changed_enable: bool = True
    max_reconsume_times: int = 16
    broker_role: str = "ASYNC_MASTER"
    ha_master_address: str | None = None
    slave_read_enable: bool = False
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    acl_enable: bool = False
    acl_file: str | None = None
    server_channel_max_idle_time_seconds: int = 120
    idle_poll_us: int = 0
    reject_transaction_message: bool = False
    transaction_time_out: int = 6000
    transaction_check_max: int = 15
    transaction_check_interval: int = 60_000
    # POP (RocketMQ 5, docs/rocketmq5.md "POP"): revive queues of rmq_sys_REVIVE_LOG_<cluster>, the
    # revive scan period (ms), % of pops that read the retry topic first, retry topic naming, the
    # empty pops one topic may hold; and (tidemq) the check-points the revive keeps in memory
    revive_queue_num: int = 8
    revive_interval: int = 1000
    pop_from_retry_probability: int = 20
    enable_retry_topic_v2: bool = False
    pop_polling_size: int = 1024
    pop_revive_max_pending: int = 20_000
    enable_property_filter: bool = True  # RocketMQ: false (docs/filters.md)
    filter_support_retry: bool = True  # RocketMQ: false (docs/filters.md)

    def namesrv_addr_list(self) -> list[str]:
        """``namesrv_addr`` split on ``;`` (blank entries dropped)."""
        return [a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip()]

    @property
    def is_slave(self) -> bool:
        """``broker_role == "SLAVE"``."""
        return self.broker_role.upper() == "SLAVE"

    def resolved_ha_listen_port(self) -> int:
        """The HA port to bind: ``ha_listen_port``, else ``listen_port + 1`` (0 for an ephemeral broker)."""
        if self.ha_listen_port is not None:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def is_writeable(self) -> bool:
        return bool(self.broker_permission & 2)

    @property
    def is_readable(self) -> bool:
        return bool(self.broker_permission & 4)


_CAMEL_1 = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CAMEL_2 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


def camel_to_snake(name: str) -> str:
    """``brokerName`` -> ``broker_name``, ``brokerIP1`` -> ``broker_ip1``, ``listenPort`` -> ``listen_port``."""
    return _CAMEL_2.sub("_", _CAMEL_1.sub("_", name)).lower()


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``key=value`` / ``key: value`` / ``key value``; ``#``/``!`` comments;
    a trailing backslash continues the line."""
    out: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
        else:
            out[line.strip()] = ""
    return out


def apply_properties(
    target: Any, props: dict[str, str], *, source: str = "broker.conf", sources: dict[str, str] | None = None
) -> list[str]:
    """Set every ``props`` key (camelCase) that names a field of dataclass ``target``; return the rest.

    Values are parsed by :func:`tidemq.broker.config_check.parse_value`; ``sources`` (when given)
    records ``{field: "<key> in <source>"}`` for later error messages.

    Raises:
        ConfigError: a value does not parse as its field's type (one line naming key and value).
    """
    from tidemq.broker.config_check import apply_overrides

    names = {f.name for f in dataclasses.fields(target)}
    labels = sources if sources is not None else {}
    values: dict[str, str] = {}
    rest: list[str] = []
    for key, value in props.items():
        name = camel_to_snake(key)
        if name in names:
            labels[name] = f"{key} (in {source})"
            values[name] = value
        else:
            rest.append(key)
    apply_overrides(target, values, labels)
    return rest


def load_broker_conf(
    path: str | Path,
    *,
    store_config: MessageStoreConfig | None = None,
    sources: dict[str, str] | None = None,
    check: bool = True,
) -> tuple[BrokerConfig, MessageStoreConfig]:
    """Read a RocketMQ ``broker.conf`` (camelCase keys) into ``(BrokerConfig, MessageStoreConfig)``.

    Keys known to either dataclass are applied (``brokerName``, ``listenPort``, ``namesrvAddr``,
    ``brokerIP1``, ``flushDiskType``, ``storePathRootDir``, ``fileReservedTime``, ``deleteWhen``,
    ``mappedFileSizeCommitLog``...); unknown keys are accepted (RocketMQ options tidemq does not use
    silently, others with a warning), but one within a small edit distance of a known key
    (``flushDiskTyp``) is a ConfigError naming the known key. ``sources``
    (when given) is filled with ``{field: "<key> (in <path>)"}``; with ``check`` (default) every
    value is checked by :func:`tidemq.broker.config_check.check_config`.

    Raises:
        ClientError: the file cannot be read.
        ConfigError: a value does not parse or is not allowed (one line: key, value, what is allowed).
    """
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise ClientError(f"cannot read broker config {path}: {exc}") from exc
    props = parse_properties(text)
    broker = BrokerConfig()
    store = store_config if store_config is not None else MessageStoreConfig()
    labels = sources if sources is not None else {}
    rest = apply_properties(broker, props, source=str(path), sources=labels)
    unknown = apply_properties(store, {k: props[k] for k in rest}, source=str(path), sources=labels)
    from tidemq.broker.config_check import check_unknown_keys, snake_to_camel

    known = {snake_to_camel(f.name) for t in (broker, store) for f in dataclasses.fields(t)}
    for key in check_unknown_keys(unknown, known, str(path)):  # a near miss of a known key raises
        log.warning("%s: unknown broker.conf key %r ignored", path, key)
    if check:
        from tidemq.broker.config_check import check_config

        check_config(broker, store, labels)
    return broker, store


def guess_broker_ip(listen_host: str) -> str:
    """The IPv4 address to announce: 127.0.0.1 for loopback binds, the bind address when it is a
    concrete one, else the first non-loopback IPv4 of this host (falls back to 127.0.0.1)."""
    if listen_host.startswith("127.") or listen_host in ("localhost", "::1"):
        return "127.0.0.1"
    if listen_host and listen_host not in ("0.0.0.0", "::", ""):
        return listen_host
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent; picks the outgoing interface
            ip = str(s.getsockname()[0])
            if not ip.startswith("127."):
                return ip
    except OSError:
        pass
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            ip = str(info[4][0])
            if not ip.startswith("127."):
                return ip
    except OSError:
        pass
    return "127.0.0.1"
