"""Client-side Prometheus metrics: send latency, consume latency and process-queue size.

A helper around ``prometheus_client`` that wraps the public client API (nothing in the client core
depends on it):

* :meth:`ClientMetrics.timed_send` sends through a :class:`~tidemq.client.producer.producer.Producer`
  (or awaits an ``AsyncProducer``'s send) and records the latency and the outcome;
* :meth:`ClientMetrics.wrap_listener` returns a listener that times each consume call;
* :meth:`ClientMetrics.watch_consumer` exposes the messages cached in a push consumer's process
  queues (its flow-control figure), read at scrape time.

Metrics (labels in braces)::

    tidemq_client_send_latency_seconds{topic}            histogram
    tidemq_client_send_total{topic, result}              counter (result: ok / error)
    tidemq_client_consume_latency_seconds{group, topic}  histogram (one observation per listener call)
    tidemq_client_consume_messages_total{group, topic}   counter
    tidemq_client_process_queue_messages{group}          gauge

Example::

    metrics = ClientMetrics()
    metrics.start_http_server(9400)
    consumer.register_message_listener(metrics.wrap_listener("billing", listener))
    metrics.watch_consumer("billing", consumer)
    metrics.timed_send(producer, Message("Orders", b"..."))
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from tidemq.client.facade import BlockingFacade
from tidemq.protocol.message import Message, MessageExt

__all__ = ["ClientMetrics"]

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ClientMetrics:
    """Client metrics on a ``prometheus_client`` registry.

    Args:
        registry: where to register (default: a new private registry; pass
            ``prometheus_client.REGISTRY`` to join the process-wide one).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.send_latency = Histogram(
            "tidemq_client_send_latency_seconds",
            "Send latency (s)",
            ["topic"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.sends = Counter(
            "tidemq_client_send", "Sends by result", ["topic", "result"], registry=self.registry
        )
        self.consume_latency = Histogram(
            "tidemq_client_consume_latency_seconds",
            "Listener time per consume call (s)",
            ["group", "topic"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.consumed = Counter(
            "tidemq_client_consume_messages",
            "Messages handed to the listener",
            ["group", "topic"],
            registry=self.registry,
        )
        self.process_queue = Gauge(
            "tidemq_client_process_queue_messages",
            "Messages pulled but not yet consumed (process queues)",
            ["group"],
            registry=self.registry,
        )

    def start_http_server(self, port: int, addr: str = "0.0.0.0") -> int:
        """Serve ``/metrics`` of this registry on a background thread; returns the bound port (0 = free)."""
        server, _ = start_http_server(port, addr=addr, registry=self.registry)
        return int(server.server_port)

    def timed_send(self, producer: Any, msg: Message, **kwargs: Any) -> Any:
        """``producer.send(msg, **kwargs)`` timed; errors are counted and re-raised.

        Returns the ``SendResult``, or (for an ``AsyncProducer``) an awaitable of it.
        """
        start = time.perf_counter()
        try:
            result = producer.send(msg, **kwargs)
        except Exception:
            self.sends.labels(msg.topic, "error").inc()
            raise
        if inspect.isawaitable(result):
            return self._await_send(result, msg.topic, start)
        self._sent(msg.topic, start)
        return result

    async def _await_send(self, pending: Any, topic: str, start: float) -> Any:
        try:
            result = await pending
        except Exception:
            self.sends.labels(topic, "error").inc()
            raise
        self._sent(topic, start)
        return result

    def _sent(self, topic: str, start: float) -> None:
        self.send_latency.labels(topic).observe(time.perf_counter() - start)
        self.sends.labels(topic, "ok").inc()

    def wrap_listener(self, group: str, listener: Callable[..., Any]) -> Callable[..., Any]:
        """A listener that calls ``listener(msgs, context)`` and records its time and message count
        (a coroutine function stays one)."""

        def record(msgs: Sequence[MessageExt], start: float) -> None:
            topic = msgs[0].topic if msgs else ""
            self.consume_latency.labels(group, topic).observe(time.perf_counter() - start)
            self.consumed.labels(group, topic).inc(len(msgs))

        if inspect.iscoroutinefunction(listener):

            async def timed_async(msgs: Sequence[MessageExt], context: Any) -> Any:
                start = time.perf_counter()
                try:
                    return await listener(msgs, context)
                finally:
                    record(msgs, start)

            return timed_async

        def timed(msgs: Sequence[MessageExt], context: Any) -> Any:
            start = time.perf_counter()
            try:
                return listener(msgs, context)
            finally:
                record(msgs, start)

        return timed

    def watch_consumer(self, group: str, consumer: Any) -> None:
        """Report the messages cached in ``consumer``'s process queues (a ``PushConsumer`` or
        ``AsyncPushConsumer``), read at each scrape."""
        core = consumer.core if isinstance(consumer, BlockingFacade) else consumer

        def cached() -> float:
            try:
                queues = list(core.owned_process_queues().values())
            except Exception:  # not started / shut down
                return 0.0
            return float(sum(pq.msg_count for pq in queues))

        self.process_queue.labels(group).set_function(cached)
