"""Pending half messages as an operator sees them on a real ``tidemq serve``: ``tidemq admin
transaction-pending``, /metrics and the dashboard's /transactions page."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

from tidemq.admin.cli import admin_group
from tidemq.client import LocalTransactionState, TransactionListener, TransactionProducer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ServeProcess

from .test_metrics import scrape, value


class Undecided(TransactionListener):
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW


def test_pending_half_messages_in_admin_metrics_and_dashboard(tmp_path: Path) -> None:
    args = ["--metrics-port", "0", "--dashboard-port", "0"]
    with ServeProcess(tmp_path / "store", extra_args=args) as proc:
        producer = TransactionProducer(Undecided(), namesrv_addr=proc.namesrv_addr, producer_group="VisPG")
        producer.start()
        try:
            for i in range(2):
                producer.send_message_in_transaction(Message("VisTopic", f"v{i}".encode()))
        finally:
            producer.shutdown()
        result = CliRunner().invoke(admin_group, ["transaction-pending", "-n", proc.namesrv_addr, "--json"])
        assert result.exit_code == 0, result.output
        (row,) = orjson.loads(result.output)
        assert (row["producerGroup"], row["topic"], row["count"]) == ("VisPG", "VisTopic", 2)
        assert row["oldestAgeMs"] >= 0
        samples = scrape(proc.fields["metrics"])
        assert value(samples, "tidemq_transaction_half_pending", group="VisPG", topic="VisTopic") == 2
        assert (
            value(samples, "tidemq_transaction_half_oldest_age_seconds", group="VisPG", topic="VisTopic") >= 0
        )
        with urllib.request.urlopen(f"http://{proc.fields['dashboard']}/transactions", timeout=10) as resp:
            page = resp.read().decode()
    assert "VisPG" in page and "VisTopic" in page
