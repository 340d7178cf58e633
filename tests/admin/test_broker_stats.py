"""BrokerStatsManager windows, and the runtime / stats / config requests RocketMQ's tools read."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tidemq.admin import AdminClient
from tidemq.broker.stats import DAY, HOUR, MINUTE, BrokerStatsManager, StatsItem
from tidemq.errors import BrokerError, NoPermissionError
from tidemq.testing import ClusterThread


def test_stats_item_windows() -> None:
    """A minute window forgets what is older than a minute; hour and day windows keep it."""
    item = StatsItem(now=0.0)
    item.add(100, 2)
    for t in range(10, 130, 10):  # samples every 10 s for two minutes
        item.sample(float(t))
    item.add(30, 1)
    minute = item.snapshot(MINUTE, 125.0)
    assert minute.sum == 30 and minute.avgpt == 30.0
    assert item.snapshot(HOUR, 125.0).sum == 130
    day = item.snapshot(DAY, 125.0)
    assert day.sum == 130 and day.tps == pytest.approx(130 / 125.0)
    assert item.rate(600.0, 125.0) == pytest.approx(130 / 125.0)


def test_manager_counts_and_rolls_the_day() -> None:
    """inc_put / inc_get feed topic, group and broker items; midnight rolls the day totals."""
    stats = BrokerStatsManager("C1")
    stats.inc_put("T", 3, 300)
    stats.inc_get("g", "T", 2, 200)
    assert stats.snapshot("TOPIC_PUT_NUMS", "T").sum == 3
    assert stats.snapshot("GROUP_GET_SIZE", "T@g").sum == 200
    assert stats.snapshot("BROKER_PUT_NUMS", "C1").sum == 3
    assert stats.stats_data("TOPIC_PUT_NUMS", "nope") is None
    stats.sample(today=dt.date.today() + dt.timedelta(days=1))
    assert (stats.put_total_today_morning, stats.get_total_today_morning) == (3, 2)
    stats.inc_put("T", 1, 10)
    assert stats.put_total - stats.put_total_today_morning == 1


def test_runtime_info_stats_data_and_config(tmp_path: Path) -> None:
    """GET_BROKER_RUNTIME_INFO has RocketMQ's keys; VIEW_BROKER_STATS_DATA and broker config work."""
    with ClusterThread(tmp_path) as cluster, AdminClient(cluster.namesrv_addr) as admin:
        admin.create_topic("StatsT", 1)
        admin.wait_for_route("StatsT")
        for _ in range(4):
            admin.send_message("StatsT", b"x" * 10)
        rt = admin.call("fetch_broker_runtime_stats", cluster.broker_addr)
        for key in (
            "putTps",
            "getTransferedTps",
            "msgPutTotalTodayNow",
            "msgGetTotalTodayNow",
            "commitLogDiskRatio",
            "runtime",
            "bootTimestamp",
        ):
            assert key in rt
        assert rt["msgPutTotalTodayNow"] == "4" and len(rt["putTps"].split()) == 3
        data = admin.call("view_broker_stats_data", cluster.broker_addr, "TOPIC_PUT_NUMS", "StatsT")
        assert data["statsMinute"]["sum"] == 4 and data["statsDay"]["sum"] == 4
        with pytest.raises(BrokerError, match="not exist"):
            admin.call("view_broker_stats_data", cluster.broker_addr, "TOPIC_PUT_NUMS", "Other")
        config = admin.call("get_broker_config", cluster.broker_addr)
        assert config["brokerName"] == "broker-a" and config["maxReconsumeTimes"] == "16"
        admin.call("update_broker_config", {"maxReconsumeTimes": "3"})
        assert cluster.broker.config.max_reconsume_times == 3
        with pytest.raises(BrokerError, match="must be an integer"):
            admin.call("update_broker_config", {"maxReconsumeTimes": "many"})
        with pytest.raises(NoPermissionError, match="brokerName"):
            admin.call("update_broker_config", {"brokerName": "other"})
        assert cluster.broker.config.max_reconsume_times == 3
        assert admin.send_message("StatsT", b"still serving").send_status is not None
