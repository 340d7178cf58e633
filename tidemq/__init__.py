"""tidemq: a pure-Python messaging system speaking Apache RocketMQ 4.x's wire protocol."""

from tidemq.protocol.message import Message, MessageExt, MessageQueue, SendResult

__all__ = ["Message", "MessageExt", "MessageQueue", "SendResult"]
__version__ = "0.1.0"
