"""One local SparkSession (local[2]) and one real tidemq cluster for the whole Spark suite."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.testing import ClusterThread

# Large pulls: the Spark reader asks for thousands of messages per pull (RocketMQ's default is 32).
SPARK_BROKER = {
    "max_transfer_count_on_message_in_memory": 8192,
    "max_transfer_bytes_on_message_in_memory": 8 * 1024 * 1024,
    "max_transfer_count_on_message_in_disk": 8192,
    "max_transfer_bytes_on_message_in_disk": 8 * 1024 * 1024,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    pytest.importorskip("pyspark")
    import tidemq.spark

    # as tidemq's own session builders do: Spark's Python processes through the launcher
    os.environ["PYSPARK_PYTHON"] = tidemq.spark.python_launcher(sys.executable)
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tidemq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    tidemq.spark.register(session)
    assert tidemq.spark.use_filesystem_checkpoints(session)  # as the local session builders do
    yield session
    session.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterThread]:
    with ClusterThread(tmp_path_factory.mktemp("spark-cluster"), **SPARK_BROKER) as c:
        yield c
