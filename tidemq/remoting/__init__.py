"""tidemq.remoting: the asyncio transport (RocketMQ's ``remoting`` module).

``RemotingServer`` and ``RemotingClient`` exchange ``RemotingCommand`` frames over ``Channel``
connections; processors are registered per request code. See docs/internals.md.
"""

from tidemq.remoting.channel import Channel
from tidemq.remoting.client import RemotingClient, parse_addr
from tidemq.remoting.loop import LoopThread, new_event_loop, use_best_event_loop
from tidemq.remoting.processor import ChannelListener, RequestDispatcher, RequestProcessor, RPCHook
from tidemq.remoting.server import RemotingServer

__all__ = [
    "Channel",
    "ChannelListener",
    "LoopThread",
    "RPCHook",
    "RemotingClient",
    "RemotingServer",
    "RequestDispatcher",
    "RequestProcessor",
    "new_event_loop",
    "parse_addr",
    "use_best_event_loop",
]
