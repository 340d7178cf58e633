"""Master -> slave replication of the commit log (RocketMQ 4.9's ``HAService``), wire-compatible.

The HA link is a plain TCP connection to the master's ``haListenPort`` (not the remoting protocol):

* slave -> master: 8 bytes, the slave's max commit-log offset (big-endian int64), sent on connect,
  after every append and every ``haSendHeartbeatInterval`` (5 s);
* master -> slave: a 12-byte header ``[phyOffset int64][bodySize int32]`` followed by ``bodySize``
  bytes of the master's commit log starting at ``phyOffset`` (at most ``haTransferBatchSize``, never
  across a segment); ``bodySize`` 0 is a heartbeat.

The slave writes those bytes at the same physical offsets and builds its own consume queues and
index from them (:class:`SlaveCommitLogAppender`). Unlike the rest of ``tidemq.store`` this package
is asyncio (it owns sockets); its store access is the store's own synchronous API.

Modules: :mod:`.wire` (frame layout), :mod:`.service` (``HAService``, ``GroupTransferService``),
:mod:`.connection` (``HAConnection``, master side), :mod:`.client` (``HAClient``, slave side),
:mod:`.appender` (byte-for-byte append + dispatch on the slave).
"""

from tidemq.store.ha.appender import SlaveCommitLogAppender
from tidemq.store.ha.client import HAClient
from tidemq.store.ha.service import GroupTransferService, HAService

__all__ = ["GroupTransferService", "HAClient", "HAService", "SlaveCommitLogAppender"]
