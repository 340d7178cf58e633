"""Broker runtime figures and configuration requests. Mirrors part of RocketMQ's ``AdminBrokerProcessor``.

* GET_BROKER_RUNTIME_INFO (28): ``KVTable`` with RocketMQ's keys (``putTps``, ``getTransferedTps``,
  ``msgPutTotalTodayNow``, ``commitLogDiskRatio``, ``runtime``, ...), so RocketMQ's dashboard,
  exporter and ``mqadmin brokerStatus`` read a tidemq broker.
* VIEW_BROKER_STATS_DATA (315): header ``statsName`` / ``statsKey``; body ``BrokerStatsData``
  ``{"statsMinute":{"sum","tps","avgpt"},"statsHour":...,"statsDay":...}``.
* GET_BROKER_CONFIG (26): body = every broker and store option as Java properties text
  (camelCase keys), ext field ``version`` = the topic table's ``DataVersion`` JSON.
* UPDATE_BROKER_CONFIG (25): body = properties text; known keys are applied in memory at once
  (not written back to a ``broker.conf``); an unknown key or a bad value answers SYSTEM_ERROR and
  changes nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import shutil
import time
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from tidemq.broker.config import apply_properties, parse_properties
from tidemq.broker.stats import BROKER_GET_NUMS, BROKER_PUT_NUMS, STATS_NAMES, BrokerStatsManager
from tidemq.errors import ClientError
from tidemq.protocol.body import KVTable
from tidemq.protocol.codes import TIDEMQ_VERSION, RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel

__all__ = ["BrokerRuntimeProcessor", "config_properties", "snake_to_camel"]

# Options a remote UPDATE_BROKER_CONFIG may not change: identity, ports and paths of a running broker.
_READ_ONLY = frozenset(
    {
        "broker_name",
        "broker_cluster_name",
        "broker_id",
        "listen_host",
        "listen_port",
        "ha_listen_port",
        "store_path_root_dir",
        "store_path_commit_log",
        "acl_enable",
        "acl_file",
    }
)


def _resp(
    code: int, remark: str | None = None, body: bytes = b"", ext: dict[str, Any] | None = None
) -> RemotingCommand:
    return RemotingCommand.create_response(code, remark, ext, body)


def snake_to_camel(name: str) -> str:
    """``flush_disk_type`` -> ``flushDiskType`` (RocketMQ's option names)."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _prop_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def config_properties(*configs: Any) -> dict[str, str]:
    """Every field of the given dataclass configs as ``{camelCaseName: text}``, sorted by name."""
    out: dict[str, str] = {}
    for cfg in configs:
        for f in dataclasses.fields(cfg):
            out[snake_to_camel(f.name)] = _prop_value(getattr(cfg, f.name))
    return dict(sorted(out.items()))


def _runtime_text(seconds: float) -> str:
    s = int(seconds)
    return f"[ {s // 86400} days, {s % 86400 // 3600} hours, {s % 3600 // 60} minutes, {s % 60} seconds ]"


class BrokerRuntimeProcessor:
    """GET_BROKER_RUNTIME_INFO, VIEW_BROKER_STATS_DATA, GET/UPDATE_BROKER_CONFIG."""

    CODES: ClassVar[tuple[int, ...]] = (
        RequestCode.GET_BROKER_RUNTIME_INFO,
        RequestCode.VIEW_BROKER_STATS_DATA,
        RequestCode.GET_BROKER_CONFIG,
        RequestCode.UPDATE_BROKER_CONFIG,
    )

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.start_monotonic = time.monotonic()

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Dispatch on the code."""
        code = request.code
        if code == RequestCode.GET_BROKER_RUNTIME_INFO:
            return _resp(ResponseCode.SUCCESS, None, KVTable(table=self.runtime_info()).encode())
        if code == RequestCode.VIEW_BROKER_STATS_DATA:
            return self.view_broker_stats_data(
                str(request.ext_fields.get("statsName") or ""), str(request.ext_fields.get("statsKey") or "")
            )
        if code == RequestCode.GET_BROKER_CONFIG:
            return self.get_broker_config()
        if code == RequestCode.UPDATE_BROKER_CONFIG:
            return self.update_broker_config(request.body)
        return _resp(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")

    # -- runtime info ------------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        """The runtime KVTable. Mirrors ``prepareRuntimeInfo`` + ``DefaultMessageStore.getRuntimeInfo``
        (same keys, in the same order)."""
        broker = self.broker
        stats = broker.broker_stats
        hold = broker.pull_request_hold_service
        held = str(hold.held_count if hold is not None else 0)
        return {
            "brokerVersionDesc": "V4_9_4 (tidemq)",
            "brokerVersion": str(TIDEMQ_VERSION),
            "brokerAddr": broker.addr,
            "bootTimestamp": str(stats.boot_timestamp),
            "runtime": _runtime_text(time.monotonic() - self.start_monotonic),
            **_traffic_rows(stats),
            **_thread_pool_rows(held),
            "earliestMessageTimeStamp": str(self._earliest_store_time()),
            "startAcceptSendRequestTimeStamp": "0",
            **_commit_log_rows(broker),
            "brokerRole": str(broker.config.broker_role),
            "topicCount": str(len(broker.topic_config_manager.topic_config_table)),
            "heldPullRequests": held,
            **_tidemq_rows(broker),
        }

    def _earliest_store_time(self) -> int:
        store = self.broker.store
        min_phy = store.get_min_phy_offset()
        if store.get_max_phy_offset() <= min_phy:
            return 0
        record = store.lookup.select_one_message_by_offset(min_phy)
        if not record:
            return 0
        from tidemq.protocol.message_codec import decode_message

        try:
            return decode_message(record)[0].store_timestamp
        except Exception:
            return 0

    # -- stats data --------------------------------------------------------------------------------

    def view_broker_stats_data(self, name: str, key: str) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA (315). Unknown name or key: SYSTEM_ERROR (RocketMQ's remark)."""
        if name not in STATS_NAMES:
            return _resp(
                ResponseCode.SYSTEM_ERROR, f"statsName {name!r} is unknown; one of {', '.join(STATS_NAMES)}"
            )
        data = self.broker.broker_stats.stats_data(name, key)
        if data is None:
            return _resp(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        return _resp(ResponseCode.SUCCESS, None, orjson.dumps(data))

    # -- config ------------------------------------------------------------------------------------

    def get_broker_config(self) -> RemotingCommand:
        """GET_BROKER_CONFIG (26): properties text body, ``version`` ext field."""
        props = config_properties(self.broker.config, self.broker.store_config)
        text = "\n".join(f"{k}={v}" for k, v in props.items()) + "\n"
        version = orjson.dumps(self.broker.topic_config_manager.data_version.to_json()).decode()
        return _resp(ResponseCode.SUCCESS, None, text.encode(), {"version": version})

    def update_broker_config(self, body: bytes) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG (25): apply every key or none."""
        try:
            props = parse_properties(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return _resp(ResponseCode.SYSTEM_ERROR, f"the body is not UTF-8 properties text: {exc}")
        if not props:
            return _resp(ResponseCode.SYSTEM_ERROR, "no key=value in the body")
        from tidemq.broker.config import camel_to_snake

        locked = sorted(k for k in props if camel_to_snake(k) in _READ_ONLY)
        if locked:
            return _resp(ResponseCode.NO_PERMISSION, f"cannot change {', '.join(locked)} on a running broker")
        bc, sc = copy.copy(self.broker.config), copy.copy(self.broker.store_config)
        try:
            rest = apply_properties(bc, props, source="UPDATE_BROKER_CONFIG")
            unknown = apply_properties(sc, {k: props[k] for k in rest}, source="UPDATE_BROKER_CONFIG")
        except ClientError as exc:
            return _resp(ResponseCode.SYSTEM_ERROR, str(exc))
        if unknown:
            return _resp(ResponseCode.SYSTEM_ERROR, f"unknown broker config key(s): {', '.join(unknown)}")
        for target, source in ((self.broker.config, bc), (self.broker.store_config, sc)):
            for f in dataclasses.fields(target):
                setattr(target, f.name, getattr(source, f.name))
        return _resp(ResponseCode.SUCCESS)


def _traffic_rows(stats: BrokerStatsManager) -> dict[str, str]:
    """Messages in and out (yesterday, today, now), TPS triplets and put sizes of ``BrokerStatsManager``."""
    put_item = stats.get(BROKER_PUT_NUMS, stats.cluster_name)
    put_size = sum(i.value for i in stats.tables["TOPIC_PUT_SIZE"].values())
    get_tps = stats.tps_triplet(BROKER_GET_NUMS)
    return {
        "msgPutTotalYesterdayMorning": str(stats.put_total_yesterday_morning),
        "msgPutTotalTodayMorning": str(stats.put_total_today_morning),
        "msgPutTotalTodayNow": str(stats.put_total),
        "msgGetTotalYesterdayMorning": str(stats.get_total_yesterday_morning),
        "msgGetTotalTodayMorning": str(stats.get_total_today_morning),
        "msgGetTotalTodayNow": str(stats.get_total),
        "putTps": stats.tps_triplet(BROKER_PUT_NUMS),
        "getTransferedTps": get_tps,
        "getTotalTps": get_tps,
        "getFoundTps": get_tps,
        "getMissTps": "0.00 0.00 0.00",
        "putMessageTimesTotal": str(put_item.times if put_item else 0),
        "putMessageSizeTotal": str(put_size),
        "putMessageAverageSize": f"{put_size / stats.put_total:.2f}" if stats.put_total else "0.00",
        "putMessageEntireTimeMax": "0",
        "getMessageEntireTimeMax": "0",
        "putMessageFailedTimes": "0",
    }


def _thread_pool_rows(held: str) -> dict[str, str]:
    """RocketMQ's thread-pool queue rows: tidemq has no such pools (one event loop), so all are 0
    but the pull queue, which is the long-polling pulls held now (``held``)."""
    return {
        "sendThreadPoolQueueSize": "0",
        "sendThreadPoolQueueCapacity": "10000",
        "pullThreadPoolQueueSize": held,
        "pullThreadPoolQueueCapacity": "100000",
        "queryThreadPoolQueueSize": "0",
        "queryThreadPoolQueueCapacity": "20000",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "queryThreadPoolQueueHeadWaitTimeMills": "0",
        "pageCacheLockTimeMills": "0",
        "dispatchBehindBytes": "0",
    }


def _commit_log_rows(broker: Broker) -> dict[str, str]:
    """The commit log's offsets, its directory's capacity, the disk ratio and the flush type."""
    store = broker.store
    sc = broker.store_config
    commit_dir = sc.commit_log_dir if os.path.isdir(sc.commit_log_dir) else sc.store_path_root_dir
    try:
        usage = shutil.disk_usage(commit_dir)
        capacity = f"Total : {usage.total / 2**30:.2f} GiB, Free : {usage.free / 2**30:.2f} GiB."
    except OSError:
        capacity = "Total : 0, Free : 0."
    disk_ratio = f"{store.retention.disk_used_ratio() / 100.0:.4f}"
    return {
        "commitLogMaxOffset": str(store.get_max_phy_offset()),
        "commitLogMinOffset": str(store.get_min_phy_offset()),
        "remainHowManyDataToFlush": "0 B",
        "commitLogDirCapacity": capacity,
        "commitLogDiskRatio": disk_ratio,
        "consumeQueueDiskRatio": disk_ratio,
        "flushDiskType": str(sc.flush_disk_type),
    }


def _tidemq_rows(broker: Broker) -> dict[str, str]:
    """tidemq's own rows: name-server registrations (registration.py), pending half messages
    (transaction/visibility.py), POP groups (pop/runtime.py), RocketMQ 5's timer rows (timer_service.py)."""
    from tidemq.broker.pop import runtime as pop_runtime
    from tidemq.broker.timer_service import runtime_info as timer_runtime_info
    from tidemq.broker.transaction.visibility import RUNTIME_KEY, runtime_value

    reg = broker.registrar.stats
    return {
        "registerFull": str(reg.full),
        "registerIncremental": str(reg.incremental),
        "registerSkipped": str(reg.skipped),
        "registerBodyBytes": str(reg.last_full_body_bytes),
        "registerFullMs": str(reg.last_full_ms),
        RUNTIME_KEY: runtime_value(broker),
        pop_runtime.RUNTIME_KEY: pop_runtime.runtime_value(broker),
        **timer_runtime_info(broker),
    }
