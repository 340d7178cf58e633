"""The broker's name-server registrations stay cheap with many topics: a change sends only the
changed topics, the periodic registration sends nothing when the name server is up to date, and a
name server that lost the broker's table gets all of it (compressed when large)."""

from __future__ import annotations

import pytest

from tests.helpers import wait_for
from tidemq.broker import registration
from tidemq.protocol.body import TopicConfig
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.testing import Cluster

from .conftest import Wire


def routes(cluster: Cluster) -> set[str]:
    return set(cluster.namesrv.route_info_manager.topic_queue_table)


async def test_changes_register_incrementally_and_the_period_skips_an_up_to_date_name_server(
    wire: Wire, cluster: Cluster
) -> None:
    registrar = cluster.broker.registrar
    full_before = registrar.stats.full
    await wire.create_topic("IncA", 4)
    await wait_for(lambda: "IncA" in routes(cluster), 5, "route of IncA")
    await wait_for(lambda: registrar.stats.incremental >= 1, 5, "an incremental registration")
    assert registrar.stats.full == full_before  # the change did not send the whole table

    await registrar.register_periodic()
    assert registrar.stats.skipped == 1 and registrar.stats.full == full_before

    # a name server that lost the broker (restarted) gets the whole table at the next period
    rim = cluster.namesrv.route_info_manager
    rim.broker_live_table.clear()
    rim.topic_queue_table.clear()
    await registrar.register_periodic()
    assert registrar.stats.full == full_before + 1 and "IncA" in routes(cluster)


async def test_a_large_table_registers_compressed_and_a_batch_creates_all(
    wire: Wire, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registration, "COMPRESS_MIN_TOPICS", 20)
    configs = [TopicConfig(topic_name=f"Many{i}", read_queue_nums=2, write_queue_nums=2) for i in range(60)]
    body = b'{"topicConfigList":[' + b",".join(c.encode() for c in configs) + b"]}"
    r = await wire.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {}, body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    await wait_for(lambda: {f"Many{i}" for i in range(60)} <= routes(cluster), 5, "routes of the batch")

    rim = cluster.namesrv.route_info_manager
    rim.broker_live_table.clear()
    rim.topic_queue_table.clear()
    await cluster.broker.registrar.register_full()
    stats = cluster.broker.registrar.stats
    assert {f"Many{i}" for i in range(60)} <= routes(cluster)
    plain = len(b",".join(c.encode() for c in configs))
    assert 0 < stats.last_full_body_bytes < plain // 4  # compressed

    bad = b'{"topicConfigList":[{"topicName":"bad topic!","readQueueNums":1,"writeQueueNums":1}]}'
    r = await wire.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {}, bad)
    assert r.code == ResponseCode.INVALID_PARAMETER and "bad topic!" in (r.remark or "")
