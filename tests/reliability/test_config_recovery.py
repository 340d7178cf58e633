"""topics.json, its .bak and its journal gone: the broker says which topics came back from consume
queues, and that a topic that never stored a message cannot."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from tidemq.broker.broker import Broker
from tidemq.broker.topic_config import make_topic_config
from tidemq.store.results import MessageExtBrokerInner
from tidemq.testing import run_cluster


async def test_topics_recovered_from_consume_queues_are_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with run_cluster(tmp_path) as cluster:
        broker = cluster.broker
        broker.topic_config_manager.update_topic_config(make_topic_config("Kept", 2, 6))
        broker.topic_config_manager.update_topic_config(make_topic_config("NeverWritten", 2, 6))
        msg = MessageExtBrokerInner("Kept", b"m", queue_id=1, born_host="127.0.0.1:1", born_timestamp=1)
        assert broker.store.put_message(msg).is_ok
        await broker.shutdown()
        path = broker.topic_config_manager.path
        for p in (path, path.with_name(path.name + ".bak"), broker.topic_config_manager.journal.path):
            p.unlink(missing_ok=True)
        caplog.set_level(logging.WARNING)
        cluster.broker = Broker(
            dataclasses.replace(broker.config, listen_port=broker.port), broker.store_config
        )
        await cluster.broker.start()
        tcm = cluster.broker.topic_config_manager
        assert "Kept" in tcm.topics() and "NeverWritten" not in tcm.topics()
        (line,) = [r.getMessage() for r in caplog.records if "and its .bak are missing" in r.getMessage()]
        assert "recovered 1 topic(s) from their consume queues: Kept" in line
        assert "never stored a message has no consume queue and cannot be recovered" in line
