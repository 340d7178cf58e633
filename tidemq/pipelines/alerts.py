"""Long-delay alerts: a PushConsumer in its own group republishing flights more than 3 h late.

The consumer group ``flights-alerts`` reads the ``flights`` topic independently of the Spark
job's group (each group has its own offsets on the broker) and republishes every flight with
``dep_delay > 180`` to the ``flights-alerts`` topic, key ``flight-<id>`` (deterministic).

**Exactly one alert per flight across restarts.** Consumption is at-least-once: after a kill the
group resumes from its last persisted offset and sees some messages again. Before it starts, the
service reads the whole alert topic and remembers the flight ids already alerted; the listener
checks and reserves an id under a lock before sending, so neither a redelivery nor two threads
holding the same message can publish an alert twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

import orjson

from tidemq.admin.client import AdminClient, AsyncAdminClient
from tidemq.client.api import PullStatus
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.errors import NoRouteError, TideMQError
from tidemq.pipelines.flights_data import alert_key, is_alert
from tidemq.protocol.headers import PullSysFlag
from tidemq.protocol.message import Message, MessageExt
from tidemq.protocol.message_codec import decode_messages

__all__ = ["ALERTS_GROUP", "ALERTS_TOPIC", "AlertService", "scan_topic"]

log = logging.getLogger(__name__)

ALERTS_GROUP = "flights-alerts"
ALERTS_TOPIC = "flights-alerts"
_SCAN_GROUP = "flights-alerts-scan"


async def scan_topic(admin: AsyncAdminClient, topic: str, *, batch: int = 256) -> list[MessageExt]:
    """Every message of ``topic`` (queue by queue, min to max offset), without moving any group offset.

    Returns an empty list when the topic does not exist. Uses PULL_MESSAGE with the
    "commit offset" flag off under the throw-away group ``flights-alerts-scan``.
    """
    try:
        mqs = await admin.fetch_subscribe_message_queues(topic)
    except NoRouteError:
        return []
    flag = PullSysFlag.build_sys_flag(False, False, True, False)
    found: list[MessageExt] = []
    for mq in mqs:
        addr = await admin.broker_addr(mq.broker_name, topic=topic)
        offset = await admin.min_offset(mq)
        end = await admin.max_offset(mq)
        while offset < end:
            result = await admin.api.pull_message(
                addr,
                consumer_group=_SCAN_GROUP,
                mq=mq,
                queue_offset=offset,
                max_msg_nums=batch,
                sys_flag=flag,
                commit_offset=0,
                suspend_timeout_millis=0,
                subscription="*",
                sub_version=0,
                timeout=admin.timeout,
            )
            if result.pull_status is PullStatus.FOUND and result.body:
                found.extend(m for m in decode_messages(result.body) if m.queue_offset < end)
            if result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
    return found


class AlertService:
    """The ``flights-alerts`` consumer + republisher.

    Args:
        namesrv_addr: the cluster's name server.
        source_topic: topic to consume (``flights``).
        alerts_topic: topic to publish alerts to (``flights-alerts``; create it first).
        group: consumer group (``flights-alerts``).

    Attributes:
        alerted: flight ids alerted so far (read from the topic at start, then added to).
        sent: alerts this run published.
        skipped_duplicates: alerts not sent again because the flight already had one.
    """

    def __init__(
        self,
        namesrv_addr: str,
        *,
        source_topic: str = "flights",
        alerts_topic: str = ALERTS_TOPIC,
        group: str = ALERTS_GROUP,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.source_topic = source_topic
        self.alerts_topic = alerts_topic
        self.group = group
        self.alerted: set[int] = set()
        self.sent = 0
        self.skipped_duplicates = 0
        self._lock = threading.Lock()
        self._producer: Producer | None = None
        self._consumer: PushConsumer | None = None

    def start(self, admin: AdminClient) -> None:
        """Read the alert topic's existing alerts, then start the producer and the push consumer."""
        existing = admin.loop_thread.run(scan_topic(admin.core, self.alerts_topic), 120.0)
        self.alerted = set(_alert_ids(existing))
        log.info("alerts: %d flights already alerted in %s", len(self.alerted), self.alerts_topic)
        self._producer = Producer(namesrv_addr=self.namesrv_addr, producer_group=f"{self.group}-producer")
        self._producer.start()
        consumer = PushConsumer(
            namesrv_addr=self.namesrv_addr,
            consumer_group=self.group,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            consume_message_batch_max_size=64,
            pull_batch_size=256,
            consume_thread_min=4,
            consume_thread_max=4,
            persist_consumer_offset_interval=1.0,
        )
        consumer.subscribe(self.source_topic, "*")
        consumer.register_message_listener(self.on_messages)
        consumer.start()
        self._consumer = consumer

    def on_messages(
        self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        """The listener: republish the alerts among ``msgs``; RECONSUME_LATER when a send fails."""
        assert self._producer is not None
        for msg in msgs:
            flight = orjson.loads(msg.body)
            if not is_alert(flight):
                continue
            fid = int(flight["id"])
            with self._lock:
                if fid in self.alerted:
                    self.skipped_duplicates += 1
                    continue
                self.alerted.add(fid)
            try:
                self._producer.send(
                    Message(self.alerts_topic, msg.body, tags=flight["origin"], keys=alert_key(fid))
                )
            except TideMQError as exc:
                with self._lock:
                    self.alerted.discard(fid)
                log.warning("alert for flight %d not sent (%s); will retry", fid, exc)
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            with self._lock:
                self.sent += 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def wait_caught_up(self, admin: AdminClient, timeout: float = 300.0, poll: float = 0.5) -> bool:
        """Block until the group's committed offsets reach every queue's max offset; False on timeout.

        The committed offset only passes a message after the listener finished it, so lag 0
        means every flight published so far has been checked (and alerted if late).
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                rows = admin.consumer_progress(self.group, self.source_topic)
            except TideMQError as exc:
                log.debug("consumer progress not available yet: %s", exc)
                rows = []
            if rows and all(r.lag == 0 for r in rows):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)

    def shutdown(self) -> None:
        """Stop consuming (persisting offsets) and stop the producer. Idempotent."""
        consumer, self._consumer = self._consumer, None
        producer, self._producer = self._producer, None
        try:
            if consumer is not None:
                consumer.shutdown()
        finally:
            if producer is not None:
                producer.shutdown()


def _alert_ids(msgs: Iterable[MessageExt]) -> Iterable[int]:
    for m in msgs:
        key = m.keys or ""
        if key.startswith("flight-") and key[7:].isdigit():
            yield int(key[7:])
