"""The README's Spark quick start runs as written against a real broker and the shared session."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tidemq.testing import ClusterThread

from .helpers import create_topic, produce

README = Path(__file__).resolve().parents[2] / "README.md"


def _spark_block() -> str:
    found: list[str] = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    blocks = [b for b in found if "pyspark" in b]
    assert len(blocks) == 1, "the README should have exactly one Spark example"
    return blocks[0]


def test_readme_spark_example(spark: Any, cluster: ClusterThread, tmp_path: Path) -> None:
    """Batch read, streaming with group offsets to Parquet, and the sink, exactly as the README shows."""
    code = _spark_block()
    names = {
        '"orders"': '"readme_orders"',
        '"orders-copy"': '"readme_orders_copy"',
        '"orders-etl"': '"readme_etl"',
    }
    for old, new in names.items():
        code = code.replace(old, new)
    code = code.replace("/tmp/orders", str(tmp_path / "orders")).replace(
        "/tmp/chk-orders", str(tmp_path / "chk")
    )
    code = code.replace("127.0.0.1:9876", cluster.namesrv_addr)
    create_topic(cluster.namesrv_addr, "readme_orders")
    sent = produce(cluster.namesrv_addr, "readme_orders", 50)

    exec(compile(code, "README.md (Spark quick start)", "exec"), {})

    written = spark.read.parquet(str(tmp_path / "orders"))
    assert sorted(r.json for r in written.collect()) == sorted(m["body"].decode() for m in sent)
    copied = (
        spark.read.format("tidemq")
        .option("namesrv", cluster.namesrv_addr)
        .option("topic", "readme_orders_copy")
        .load()
    )
    assert sorted(bytes(r.body) for r in copied.collect()) == sorted(m["body"] for m in sent)
