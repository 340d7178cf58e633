"""NamesrvConfig: name server options. Mirrors RocketMQ's ``NamesrvConfig`` (snake_case names).

Times in this Python API are seconds (float); RocketMQ's Java constants are given alongside.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True, kw_only=True)
class NamesrvConfig:
    """Options of a :class:`~tidemq.namesrv.server.NameServer`. Mirrors ``NamesrvConfig``.

    Attributes:
        kv_config_path: file where KV config (``PUT_KV_CONFIG``) is persisted as RocketMQ's
            ``kvConfig.json`` (``{"configTable": {namespace: {key: value}}}``); ``None`` (the
            default here, unlike Java's ``~/namesrv/kvConfig.json``) keeps it in memory only.
        order_message_enable: put the ``ORDER_TOPIC_CONFIG`` KV entry of a topic into its route
            as ``orderTopicConf`` (RocketMQ default false).
        product_env_name: informational, RocketMQ's ``productEnvName`` ("center").
        cluster_test: informational, RocketMQ's ``clusterTest``.
        scan_not_active_broker_interval: seconds between scans for silent brokers (10 s).
        scan_not_active_broker_delay: seconds before the first scan (5 s).
        broker_channel_expired_time: seconds without REGISTER_BROKER after which a broker is
            dropped (RocketMQ's ``BROKER_CHANNEL_EXPIRED_TIME`` = 120 s).
    """

    kv_config_path: str | None = None
    order_message_enable: bool = False
    product_env_name: str = "center"
    cluster_test: bool = False
    scan_not_active_broker_interval: float = field(default=10.0, metadata={"important": True})
    scan_not_active_broker_delay: float = 5.0
    broker_channel_expired_time: float = field(default=120.0, metadata={"important": True})

    def __post_init__(self) -> None:
        if self.scan_not_active_broker_interval <= 0:
            raise ValueError(
                f"scan_not_active_broker_interval must be > 0 seconds, got {self.scan_not_active_broker_interval}"
            )
        if self.broker_channel_expired_time <= 0:
            raise ValueError(
                f"broker_channel_expired_time must be > 0 seconds, got {self.broker_channel_expired_time}"
            )
