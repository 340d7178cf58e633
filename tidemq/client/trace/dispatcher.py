"""AsyncTraceDispatcher: trace contexts batched off the hot path into trace-topic messages.

Mirrors the Java client's ``AsyncTraceDispatcher``. :meth:`AsyncTraceDispatcher.append` is all a
send or a consume pays: a deque append (any thread; contexts beyond 1024 waiting are dropped and
counted, as Java's bounded queue does). A worker on the client's event loop wakes every 100 ms
(``pollingTimeMil``), encodes what arrived (:func:`~tidemq.client.trace.encoder.encode_trace_context`)
into one segment per trace topic, and sends a segment as one message when it reaches
``max_msg_size - 10000`` bytes (128,000 - 10,000) or its first record is 500 ms old
(``waitTimeThresholdMil``), or when its keys reach 24,000 bytes (properties are capped at 32,767
bytes). The message's keys are the traced message ids and keys, its body the
records. Sends go through a producer of its own (group ``_INNER_TRACE_PRODUCER-<group>-<type>-<n>``,
instance ``<host instance>_TRACE``, send timeout 5 s); a failed send is logged (the first, then
every 100th), never retried or raised into the host. :meth:`shutdown` flushes what is left and
waits (up to ``flush_timeout``) for the sends.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

from tidemq.client.trace.encoder import TraceContext, TraceTransferBean, encode_trace_context
from tidemq.errors import TideMQError
from tidemq.protocol.message import Message
from tidemq.protocol.topic import TRACE_TOPIC

if TYPE_CHECKING:
    from tidemq.client.config import ClientConfig
    from tidemq.client.producer.producer import AsyncProducer

__all__ = ["GROUP_NAME_PREFIX", "AsyncTraceDispatcher"]

log = logging.getLogger(__name__)

GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"
"""``TraceConstants.GROUP_NAME_PREFIX``."""
_COUNTER = itertools.count(1)
_MAX_KEY_BYTES = 24_000
"""A segment is also sent once its keys (the ``KEYS`` property) reach this many bytes: a message's
properties may not exceed 32,767 bytes, which a full 118 KB segment of short records would."""


class _Segment:
    """``TraceDataSegment``: encoded records waiting for one trace topic."""

    __slots__ = ("beans", "first_add", "key_bytes", "size")

    def __init__(self) -> None:
        self.beans: list[TraceTransferBean] = []
        self.first_add = 0.0
        self.size = 0
        self.key_bytes = 0

    def add(self, bean: TraceTransferBean, now: float) -> None:
        if not self.beans:
            self.first_add = now
        self.beans.append(bean)
        self.size += len(bean.trans_data)
        self.key_bytes += sum(len(k) + 1 for k in bean.trans_key)

    def take(self) -> list[TraceTransferBean]:
        beans, self.beans, self.size, self.key_bytes = self.beans, [], 0, 0
        return beans


class AsyncTraceDispatcher:
    """Batches trace contexts into messages on ``trace_topic``. Mirrors ``AsyncTraceDispatcher``.

    Args:
        host_config: the traced client's config (name servers, ACL keys, client ip, instance).
        group: the traced producer or consumer group.
        kind: ``"PRODUCER"`` or ``"CONSUMER"`` (part of the trace producer's group name).
        trace_topic: default ``RMQ_SYS_TRACE_TOPIC`` (auto-created through TBW102 on first send).
        queue_size: contexts that may wait before new ones are dropped (1024).
        max_msg_size: largest trace message body, bytes (128,000).
        polling_s / wait_threshold_s: worker period (0.1 s) and the age at which a segment is sent (0.5 s).
    """

    def __init__(
        self,
        host_config: ClientConfig,
        group: str,
        kind: str,
        trace_topic: str | None = None,
        *,
        queue_size: int = 1024,
        max_msg_size: int = 128_000,
        polling_s: float = 0.1,
        wait_threshold_s: float = 0.5,
    ) -> None:
        self.trace_topic = trace_topic or TRACE_TOPIC
        self.group = group
        self.queue_size = queue_size
        self.max_msg_size = max_msg_size
        self.polling_s = polling_s
        self.wait_threshold_s = wait_threshold_s
        self.discard_count = 0
        self.sent_messages = 0
        self.sent_records = 0
        self.failed_messages = 0
        self._host_config = host_config
        self._producer_group = f"{GROUP_NAME_PREFIX}-{group}-{kind}-{next(_COUNTER)}"
        self._queue: collections.deque[TraceContext] = collections.deque()
        self._segments: dict[str, _Segment] = {}
        self._sends: set[asyncio.Task[None]] = set()
        self._producer: AsyncProducer | None = None
        self._worker: asyncio.Task[None] | None = None

    def append(self, ctx: TraceContext) -> bool:
        """Queue ``ctx`` (any thread; cheap). False when the queue is full and it was dropped."""
        if len(self._queue) >= self.queue_size:
            self.discard_count += 1
            if self.discard_count % 1000 == 1:
                log.info("trace buffer full, %d context(s) discarded so far", self.discard_count)
            return False
        self._queue.append(ctx)
        return True

    async def start(self) -> None:
        """Start the trace producer and the worker, on the running (the host client's) loop."""
        if self._worker is not None:
            return
        from tidemq.client.producer.producer import AsyncProducer

        cfg = self._host_config
        self._producer = AsyncProducer(
            namesrv_addr=cfg.namesrv_addr,
            producer_group=self._producer_group,
            client_ip=cfg.client_ip,
            instance_name=f"{cfg.instance_name}_TRACE",
            unit_name=cfg.unit_name,
            access_key=cfg.access_key,
            secret_key=cfg.secret_key,
            security_token=cfg.security_token,
            send_msg_timeout=5.0,
            max_message_size=self.max_msg_size,
        )
        await self._producer.start()
        self._worker = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.polling_s)
            try:
                self._drain(force=False)
            except Exception:  # never let a bad context stop tracing
                log.exception("message trace worker failed")

    def _drain(self, *, force: bool) -> None:
        """Encode the queued contexts into segments; send the full, old (or, ``force``, all) ones."""
        now = time.monotonic()
        queue = self._queue
        limit = self.max_msg_size - 10_000
        while queue:
            ctx = queue.popleft()
            if not ctx.trace_beans:
                continue
            seg = self._segments.setdefault(self.trace_topic, _Segment())
            seg.add(encode_trace_context(ctx), now)
            if seg.size >= limit or seg.key_bytes >= _MAX_KEY_BYTES:
                self._send(self.trace_topic, seg.take())
        for topic, seg in self._segments.items():
            if seg.beans and (force or now - seg.first_add >= self.wait_threshold_s):
                self._send(topic, seg.take())

    def _send(self, topic: str, beans: list[TraceTransferBean]) -> None:
        """``AsyncDataSendTask``: one message of ``beans``, sent in the background."""
        keys = dict.fromkeys(k for b in beans for k in b.trans_key)
        msg = Message(topic, "".join(b.trans_data for b in beans).encode(), keys=list(keys))
        task = asyncio.ensure_future(self._send_one(msg, len(beans)))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send_one(self, msg: Message, records: int) -> None:
        assert self._producer is not None
        try:
            await self._producer.send(msg)
        except TideMQError as exc:
            self.failed_messages += 1
            if self.failed_messages % 100 == 1:  # the first failure, then every 100th: no log flood
                log.error(
                    "send trace data to %s failed (%d record(s); %d trace message(s) lost so far): %s",
                    msg.topic,
                    records,
                    self.failed_messages,
                    exc,
                )
            return
        self.sent_messages += 1
        self.sent_records += records

    async def flush(self, timeout: float = 5.0) -> None:
        """Send everything queued now and wait (up to ``timeout`` s) for the sends under way."""
        self._drain(force=True)
        if self._sends:
            await asyncio.wait(set(self._sends), timeout=timeout)

    async def shutdown(self, flush_timeout: float = 5.0) -> None:
        """Flush, stop the worker and the trace producer (idempotent)."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        worker.cancel()
        try:
            await self.flush(flush_timeout)
        finally:
            producer, self._producer = self._producer, None
            if producer is not None:
                await producer.shutdown()

    def stats(self) -> dict[str, Any]:
        """Counters: ``queued``, ``discarded``, ``sent_messages``, ``sent_records``, ``failed_messages``."""
        return {
            "queued": len(self._queue),
            "discarded": self.discard_count,
            "failed_messages": self.failed_messages,
            "sent_messages": self.sent_messages,
            "sent_records": self.sent_records,
        }
