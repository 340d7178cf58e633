"""tidemq.spark.use_filesystem_checkpoints: checkpoints written through Hadoop's FileSystem API keep a
stream exactly once across restarts; a session's own choice of checkpoint manager is kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.spark.helpers import create_topic, produce
from tidemq.spark import use_filesystem_checkpoints
from tidemq.spark.session import CHECKPOINT_FILE_MANAGER_CONF


def _available_now(spark: Any, namesrv: str, topic: str, tmp_path: Path) -> list[tuple[int, int, bytes]]:
    """One AvailableNow run into parquet (checkpoint and output kept between runs); every row written."""
    query = (
        spark.readStream.format("tidemq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("queueId", "queueOffset", "body")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    return sorted((r.queueId, r.queueOffset, bytes(r.body)) for r in rows)


def test_restart_from_a_filesystem_checkpoint_reads_only_new_messages(
    spark: Any, cluster: Any, tmp_path: Path
) -> None:
    assert spark.conf.get(CHECKPOINT_FILE_MANAGER_CONF).endswith(".FileSystemBasedCheckpointFileManager")
    topic = "SparkFsCheckpoint"
    create_topic(cluster.namesrv_addr, topic, 2)
    first = produce(cluster.namesrv_addr, topic, 30)
    rows = _available_now(spark, cluster.namesrv_addr, topic, tmp_path)
    expected = sorted((s["queueId"], s["queueOffset"], s["body"]) for s in first)
    assert rows == expected
    assert [p.name for p in (tmp_path / "chk" / "commits").iterdir() if not p.name.startswith(".")] == ["0"]

    second = produce(cluster.namesrv_addr, topic, 20, start=30)
    rows = _available_now(spark, cluster.namesrv_addr, topic, tmp_path)  # restart: only the new ones
    assert rows == sorted(expected + [(s["queueId"], s["queueOffset"], s["body"]) for s in second])


def test_a_session_s_own_checkpoint_manager_is_kept(spark: Any) -> None:
    before = spark.conf.get(CHECKPOINT_FILE_MANAGER_CONF)
    mine = "com.example.MyCheckpointFileManager"
    spark.conf.set(CHECKPOINT_FILE_MANAGER_CONF, mine)
    try:
        assert not use_filesystem_checkpoints(spark)
        assert spark.conf.get(CHECKPOINT_FILE_MANAGER_CONF) == mine
    finally:
        spark.conf.set(CHECKPOINT_FILE_MANAGER_CONF, before)
    assert use_filesystem_checkpoints(spark)  # already this class: nothing to change
