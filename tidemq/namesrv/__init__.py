"""tidemq.namesrv: the name server (RocketMQ's ``namesrv`` module).

``NameServer`` wires ``RouteInfoManager`` (routing state), ``KVConfigManager`` and
``DefaultRequestProcessor`` onto a ``RemotingServer``.
"""

from tidemq.namesrv.config import NamesrvConfig
from tidemq.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from tidemq.namesrv.processor import DefaultRequestProcessor
from tidemq.namesrv.route_info import BrokerLiveInfo, RegisterBrokerResult, RouteInfoManager
from tidemq.namesrv.server import NameServer

__all__ = [
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "BrokerLiveInfo",
    "DefaultRequestProcessor",
    "KVConfigManager",
    "NameServer",
    "NamesrvConfig",
    "RegisterBrokerResult",
    "RouteInfoManager",
]
