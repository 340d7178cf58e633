"""A Spark standalone cluster on this machine (a master and N workers), for tests, benches and demos.

The pip package of PySpark has no ``sbin/start-master.sh``; its ``bin/spark-class`` starts the
daemons directly::

    spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 0 --webui-port 0
    spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:PORT --host 127.0.0.1 \\
        --port 0 --webui-port 0 --cores 1 --memory 1g --work-dir DIR

:class:`StandaloneCluster` does exactly that on loopback with ephemeral ports, reads the master's
URL from its log, waits until every worker has registered, and stops each daemon by its pid
(``spark-class`` execs the JVM, so the pid is the JVM's). ``python -m tidemq.spark.standalone``
starts one and prints its URL until interrupted.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = ["StandaloneCluster", "spark_home"]

_MASTER_URL = re.compile(r"Starting Spark master at (spark://[\w.\-]+:\d+)")
_REGISTERED = "Successfully registered with master"


def spark_home() -> Path:
    """PySpark's installation directory, which holds ``bin/spark-class`` and ``jars/``.

    Raises:
        FileNotFoundError: pyspark is not installed or has no ``bin/spark-class``.
    """
    import pyspark

    home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    if not (home / "bin" / "spark-class").exists():
        raise FileNotFoundError(f"{home}/bin/spark-class not found: is pyspark installed?")
    return home


@dataclass
class StandaloneCluster:
    """A standalone master plus ``workers`` workers on 127.0.0.1 (context manager).

    Args:
        workdir: logs (``master.log``, ``worker-N.log``) and the workers' work directories.
        workers: number of workers (default 2).
        cores: cores offered by each worker (default 1).
        memory: memory offered by each worker, Spark syntax (default ``1g``).
        timeout: seconds to wait for the master's URL and the workers' registration (default 120).
        env: environment of the daemons (default this process's); ``JAVA_HOME`` there picks the
            JVM of the master, the workers and the executors they launch, ``PYSPARK_PYTHON`` the
            executors' Python (default this interpreter).

    Attributes:
        master_url: ``spark://127.0.0.1:PORT`` once started.

    Raises (from :meth:`start`):
        TimeoutError: a daemon did not come up in time (its log tail is in the message).
        RuntimeError: a daemon exited early.
    """

    workdir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    timeout: float = 120.0
    env: dict[str, str] | None = None
    master_url: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def _env(self) -> dict[str, str]:
        home = spark_home()
        env = dict(os.environ if self.env is None else self.env)
        env.update(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1")
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env["SPARK_NO_DAEMONIZE"] = "1"
        return env

    def _spawn(self, log: Path, *args: str) -> subprocess.Popen[bytes]:
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self._env())
        self.procs.append(proc)
        return proc

    def _wait_log(self, proc: subprocess.Popen[bytes], log: Path, pattern: re.Pattern[str]) -> re.Match[str]:
        deadline = time.monotonic() + self.timeout
        while True:
            text = log.read_text(errors="replace") if log.exists() else ""
            m = pattern.search(text)
            if m is not None:
                return m
            if proc.poll() is not None:
                raise RuntimeError(f"{log.stem} exited with {proc.returncode}: {text[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{log.stem} not ready after {self.timeout:g} s: {text[-2000:]}")
            time.sleep(0.1)

    def start(self) -> StandaloneCluster:
        """Start the master, then the workers; return once every worker has registered."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            log = self.workdir / "master.log"
            master = self._spawn(
                log,
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
            )  # fmt: skip
            self.master_url = self._wait_log(master, log, _MASTER_URL).group(1)
            started = []
            for i in range(self.workers):
                wlog = self.workdir / f"worker-{i}.log"
                work = self.workdir / f"work-{i}"
                work.mkdir(exist_ok=True)
                proc = self._spawn(
                    wlog,
                    "org.apache.spark.deploy.worker.Worker", self.master_url,
                    "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                    "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
                )  # fmt: skip
                started.append((proc, wlog))
            for proc, wlog in started:
                self._wait_log(proc, wlog, re.compile(re.escape(_REGISTERED)))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every daemon by pid: SIGTERM, then SIGKILL after 20 s. Idempotent."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """``python -m tidemq.spark.standalone [WORKDIR] [--workers N]``: run a cluster until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("workdir", nargs="?", default=".tidemq/spark-standalone", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory", default="1g")
    args = parser.parse_args(argv)
    with StandaloneCluster(args.workdir.resolve(), workers=args.workers, memory=args.memory) as cluster:
        print(f"master: {cluster.master_url} (logs in {args.workdir}); Ctrl-C stops it", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
