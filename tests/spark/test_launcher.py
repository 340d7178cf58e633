"""tidemq.spark.python_launcher: Spark's Python processes import the installed PySpark when it is the
same as ``pyspark.zip``, keep the zip when it differs, and run modules and commands as ``python`` does."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import available_now_into_memory, create_topic, produce, tidemq_stream
from tidemq.spark.launcher import prefer_installed, python_launcher, same_pyspark
from tidemq.testing import child_pids, zygote_pids

pyspark = pytest.importorskip("pyspark")
INSTALLED = Path(pyspark.__file__).parent
REAL_ZIP = INSTALLED / "python" / "lib" / "pyspark.zip"
needs_zip = pytest.mark.skipif(
    not REAL_ZIP.exists(), reason="this PySpark install has no python/lib/pyspark.zip"
)

PROBE = """
import sys
import pyspark
print(repr((pyspark.__file__, __name__, sys.argv[1:], sys.path[0])))
"""


def _fake_zip(path: Path, version: str, extra: dict[str, str] | None = None) -> Path:
    """A ``pyspark.zip`` holding a stand-in ``pyspark`` package of ``version``."""
    files = {"pyspark/__init__.py": "from pyspark.version import __version__\n", **(extra or {})}
    files["pyspark/version.py"] = f'__version__: str = "{version}"\n'
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def _installed_copy(tmp_path: Path, version_py: bytes, files: dict[str, str]) -> Path:
    """A directory laid out as an installed ``pyspark`` package."""
    pkg = tmp_path / "site" / "pyspark"
    pkg.mkdir(parents=True)
    (pkg / "version.py").write_bytes(version_py)
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return pkg


def _run(launcher: str, args: list[str], pythonpath: list[Path], cwd: Path) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in pythonpath))
    done = subprocess.run([launcher, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@needs_zip
def test_the_zip_of_the_installed_pyspark_is_the_same_pyspark() -> None:
    assert same_pyspark(str(REAL_ZIP), str(INSTALLED))


def test_a_different_version_or_module_is_not_the_same(tmp_path: Path) -> None:
    version_py = b'__version__: str = "4.3.0"\n'
    files = {"__init__.py": "", "worker.py": "x = 1\n", "tests/test_a.py": "pass\n"}
    installed = _installed_copy(tmp_path, version_py, files)
    zip_files = {f"pyspark/{name}": text for name, text in files.items()}

    same = _fake_zip(tmp_path / "same.zip", "4.3.0", zip_files)
    assert same_pyspark(str(same), str(installed))

    other_version = _fake_zip(tmp_path / "version.zip", "4.2.1", zip_files)
    assert not same_pyspark(str(other_version), str(installed))

    other_module = _fake_zip(tmp_path / "module.zip", "4.3.0", {**zip_files, "pyspark/worker.py": "x = 22\n"})
    assert not same_pyspark(str(other_module), str(installed))

    more_modules = _fake_zip(tmp_path / "more.zip", "4.3.0", {**zip_files, "pyspark/new.py": "pass\n"})
    assert not same_pyspark(str(more_modules), str(installed))

    other_data = _fake_zip(tmp_path / "data.zip", "4.3.0", {**zip_files, "pyspark/tests/test_a.py": "x\n"})
    assert not same_pyspark(str(other_data), str(installed))  # present in both: compared, even tests

    # the PyPI package leaves tests out: a test module missing from the install does not count
    more_tests = _fake_zip(tmp_path / "tests.zip", "4.3.0", {**zip_files, "pyspark/tests/test_b.py": "\n"})
    assert same_pyspark(str(more_tests), str(installed))

    assert not same_pyspark(str(tmp_path / "missing.zip"), str(installed))


def test_prefer_installed_moves_only_a_matching_zip(tmp_path: Path) -> None:
    files = {"__init__.py": "", "worker.py": "x = 1\n"}
    installed = _installed_copy(tmp_path, b'__version__: str = "9.9.9"\n', files)
    site = str(installed.parent)
    zip_files = {f"pyspark/{name}": text for name, text in files.items()}
    match = tmp_path / "a" / "pyspark.zip"
    match.parent.mkdir()
    _fake_zip(match, "9.9.9", zip_files)
    differ = tmp_path / "b" / "pyspark.zip"
    differ.parent.mkdir()
    _fake_zip(differ, "9.9.8", zip_files)

    # prefer_installed declines while pyspark is imported (as in this process): check the decision
    # on its own terms by hiding the module for the call
    saved = sys.modules.pop("pyspark")
    try:
        path = [str(match), "/x", site]
        assert prefer_installed(path)
        assert path == ["/x", site, str(match)]
        path = [str(differ), "/x", site]
        assert not prefer_installed(path)
        assert path == [str(differ), "/x", site]
        path = [str(match), "/x"]  # no installed pyspark at all
        assert not prefer_installed(path)
    finally:
        sys.modules["pyspark"] = saved


@needs_zip
def test_launched_module_imports_the_installed_pyspark(tmp_path: Path) -> None:
    (tmp_path / "probe_mod.py").write_text(PROBE)
    launcher = python_launcher(sys.executable)
    assert launcher != sys.executable, "no launcher could be made on this machine"
    py4j = next(REAL_ZIP.parent.glob("py4j-*.zip"))
    # the PYTHONPATH Spark gives its Python processes: the zips first
    out = _run(launcher, ["-m", "probe_mod", "a", "b"], [REAL_ZIP, py4j, tmp_path], tmp_path)
    file, name, argv, path0 = eval(out)
    assert Path(file) == INSTALLED / "__init__.py"
    assert (name, argv, path0) == ("__main__", ["a", "b"], str(tmp_path))

    plain = subprocess.run(
        [sys.executable, "-m", "probe_mod", "a", "b"],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, [REAL_ZIP, py4j, tmp_path]))),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert eval(plain.stdout)[0].startswith(str(REAL_ZIP))  # what Spark's processes do without it


def test_launched_module_keeps_a_zip_of_another_pyspark(tmp_path: Path) -> None:
    (tmp_path / "probe_mod.py").write_text(PROBE)
    other = _fake_zip(tmp_path / "pyspark.zip", "0.0.1")
    out = _run(python_launcher(sys.executable), ["-m", "probe_mod"], [other, tmp_path], tmp_path)
    assert eval(out)[0] == str(other / "pyspark" / "__init__.py")


def test_other_command_lines_run_as_python(tmp_path: Path) -> None:
    launcher = python_launcher(sys.executable)
    out = _run(launcher, ["-c", "import sys; print(sys.argv[1:], sys.executable)", "x"], [], tmp_path)
    assert out.split() == ["['x']", sys.executable]
    assert _run(launcher, ["-VV"], [], tmp_path).startswith("Python 3.")


def test_launcher_is_one_file_per_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    launcher = python_launcher(sys.executable)
    assert python_launcher(sys.executable) == launcher
    text = Path(launcher).read_text()
    assert sys.executable in text and "launcher.py" in text
    # PYSPARK_PYTHON already a launcher (set by an earlier call): not wrapped a second time
    monkeypatch.setenv("PYSPARK_PYTHON", launcher)
    assert python_launcher() == launcher
    assert python_launcher(launcher) == launcher


def test_stream_through_the_launcher_reads_every_message(spark: Any, cluster: Any, tmp_path: Path) -> None:
    """The suite's session runs Spark's Python processes through the launcher (conftest), as
    tidemq's session builders do: the stream's rows are the messages sent, and the executors'
    workers run the installed PySpark."""
    assert spark.sparkContext.pythonExec == python_launcher(sys.executable)
    topic = "SparkLauncherStream"
    create_topic(cluster.namesrv_addr, topic, 2)
    sent = produce(cluster.namesrv_addr, topic, 60)
    df = tidemq_stream(spark, cluster.namesrv_addr, topic=topic, startingOffsets="earliest")
    available_now_into_memory(df, "launcher_stream", tmp_path / "chk")
    rows = spark.sql("select queueId, queueOffset, body from launcher_stream").collect()
    assert sorted((r.queueId, r.queueOffset, bytes(r.body)) for r in rows) == sorted(
        (s["queueId"], s["queueOffset"], s["body"]) for s in sent
    )

    def pyspark_file(_: Any) -> str:
        import pyspark

        return str(pyspark.__file__)

    files = spark.sparkContext.parallelize(range(2), 2).map(pyspark_file).distinct().collect()
    if REAL_ZIP.exists():
        assert files == [str(INSTALLED / "__init__.py")]


BYTECODE_PROBE = """
import sys
from tidemq.spark.launcher import install_bytecode_cache
print(install_bytecode_cache(sys.argv[1], ("fakepkg",)))
import fakepkg.mod
print(fakepkg.mod.X)
print(fakepkg.mod.__cached__)
"""


def _probe_bytecode(cache: Path, src: Path, *, dont_write: bool = True) -> list[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), *sys.path]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if dont_write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", BYTECODE_PROBE, str(cache)],
        env=env,
        cwd=src,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bytecode_cache_keeps_bytecode_of_the_packages_out_of_the_sources(tmp_path: Path) -> None:
    from importlib.util import MAGIC_NUMBER

    src = tmp_path / "src"
    (src / "fakepkg").mkdir(parents=True)
    (src / "fakepkg" / "__init__.py").write_text("")
    module = src / "fakepkg" / "mod.py"
    module.write_text("X = 'source'\n")
    cache = tmp_path / "cache"

    installed, value, cached = _probe_bytecode(cache, src)
    assert (installed, value) == ("True", "source")
    pyc = Path(cached)
    assert pyc.is_relative_to(cache) and pyc.exists()
    assert pyc.name == f"mod.{sys.implementation.cache_tag}.pyc"
    assert not list(src.rglob("*.pyc")), "bytecode written next to the sources"
    assert oct(cache.stat().st_mode & 0o777) == oct(0o700)

    # the next process reads the cached bytecode instead of compiling: plant other code under the
    # same header (the header names the source's modification time and size) and it runs
    header = pyc.read_bytes()[:16]
    assert header[:4] == MAGIC_NUMBER
    import marshal

    pyc.write_bytes(header + marshal.dumps(compile("X = 'cached'\n", str(module), "exec")))
    assert _probe_bytecode(cache, src)[1] == "cached"

    # a changed source (another size) is compiled again and its new bytecode cached
    module.write_text("X = 'changed'\n")
    assert _probe_bytecode(cache, src)[1] == "changed"
    assert pyc.read_bytes()[:16] != header


def test_bytecode_cache_only_under_dont_write_bytecode_and_in_a_private_dir(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "fakepkg").mkdir(parents=True)
    (src / "fakepkg" / "__init__.py").write_text("")
    (src / "fakepkg" / "mod.py").write_text("X = 'source'\n")

    # Python caches bytecode itself: nothing to do
    installed, _, cached = _probe_bytecode(tmp_path / "cache", src, dont_write=False)
    assert installed == "False"
    assert not Path(cached).is_relative_to(tmp_path / "cache")

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # others may write there: its bytecode is not trusted
    installed, value, cached = _probe_bytecode(shared, src)
    assert (installed, value) == ("False", "source")
    assert not list(shared.rglob("*.pyc"))


def test_launched_process_gets_one_omp_thread_and_tidemq_bytecode_cache(tmp_path: Path) -> None:
    (tmp_path / "probe_env.py").write_text(
        "import os, tidemq.spark.source as s\nprint(os.environ['OMP_NUM_THREADS'], s.__cached__)\n"
    )
    launcher = python_launcher(sys.executable)
    assert launcher != sys.executable, "no launcher could be made on this machine"
    pycache = Path(launcher).parent / "pycache"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]), PYTHONDONTWRITEBYTECODE="1"
    )
    env.pop("OMP_NUM_THREADS", None)

    def run(**extra: str) -> list[str]:
        done = subprocess.run(
            [launcher, "-m", "probe_env"],
            env={**env, **extra},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    threads, cached = run()
    assert threads == "1"  # as Spark sets it for its task workers
    assert Path(cached).is_relative_to(pycache) and Path(cached).exists()
    assert run(OMP_NUM_THREADS="3")[0] == "3"  # a setting of the user's own stays


ZYGOTE_PROBE = """
import os, sys

import numpy.random  # imported by the zygote: a child must not draw its siblings' numbers

def main():
    line = sys.stdin.readline().strip()
    got = (os.getpid(), os.getppid(), __name__, sys.argv[1:], os.getcwd(), os.environ.get("PROBE_VAR"), line,
           float(numpy.random.random()))
    print(repr(got))
    sys.stdout.flush()
    if sys.argv[1:2] == ["sleep"]:
        import time
        time.sleep(60)
    sys.exit(int(os.environ.get("PROBE_EXIT", "0")))

if __name__ == "__main__":  # as PySpark's runner: importing it runs nothing
    main()
"""

CLIENT = """
import sys
from tidemq.spark.launcher import run_forked
status = run_forked(sys.argv[1], sys.argv[2], sys.argv[3:])
print("status", status, flush=True)
"""


def _wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _zygote(tmp_path: Path, module: str, owner: int) -> tuple[subprocess.Popen[bytes], str, dict[str, str]]:
    """A zygote for ``module`` (a probe in ``tmp_path``) started as main() starts one, and its socket."""
    import tidemq.spark.launcher as launcher

    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    address = str(run / "z.sock")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    proc = subprocess.Popen(
        [sys.executable, launcher.__file__, "--zygote", address, str(owner), module],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    return proc, address, env


def test_zygote_child_runs_the_module_with_the_clients_env_cwd_args_and_stdio(tmp_path: Path) -> None:
    (tmp_path / "probe_zyg.py").write_text(ZYGOTE_PROBE)
    zygote, address, env = _zygote(tmp_path, "probe_zyg", os.getpid())
    try:
        other = tmp_path / "other"
        other.mkdir()
        draws = set()
        for round_ in range(2):  # one zygote, a child per request
            done = subprocess.run(
                [sys.executable, "-c", CLIENT, address, "probe_zyg", "a", str(round_)],
                input=f"line {round_}\n",
                env=dict(env, PROBE_VAR=f"var {round_}", PROBE_EXIT="3"),
                cwd=other,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            child, status = done.stdout.splitlines()
            pid, ppid, name, argv, cwd, var, line, draw = eval(child)
            draws.add(draw)
            assert ppid == zygote.pid and pid != zygote.pid
            assert (name, argv, cwd, var, line) == (
                "__main__",
                ["a", str(round_)],
                str(other),
                f"var {round_}",
                f"line {round_}",
            )
            assert status == "status 3"
            assert "Warning" not in done.stderr
        assert len(draws) == 2
    finally:
        zygote.terminate()
        zygote.wait(30)


def test_a_signal_to_the_client_reaches_the_child(tmp_path: Path) -> None:
    import signal

    (tmp_path / "probe_zyg.py").write_text(ZYGOTE_PROBE)
    zygote, address, env = _zygote(tmp_path, "probe_zyg", os.getpid())
    try:
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, address, "probe_zyg", "sleep"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=tmp_path,
            text=True,
        )
        assert client.stdin is not None and client.stdout is not None
        client.stdin.write("x\n")
        client.stdin.flush()
        pid = eval(client.stdout.readline())[0]
        client.send_signal(signal.SIGTERM)  # what Spark's JVM does to stop the process it started
        assert client.stdout.readline().strip() == f"status {-signal.SIGTERM}"
        assert client.wait(30) == 0
        _wait_for(lambda: not Path(f"/proc/{pid}").exists(), "the child to end")
    finally:
        zygote.terminate()
        zygote.wait(30)


def test_zygote_ends_with_its_owner_and_a_module_it_cannot_import(tmp_path: Path) -> None:
    (tmp_path / "probe_zyg.py").write_text(ZYGOTE_PROBE)
    owner = subprocess.Popen(["sleep", "60"])
    zygote, address, env = _zygote(tmp_path, "probe_zyg", owner.pid)
    try:
        _wait_for(lambda: Path(address).exists(), "the zygote's socket")
        owner.kill()
        owner.wait()
        assert zygote.wait(30) == 0
        assert not Path(address).exists()
    finally:
        owner.kill()
        zygote.kill()

    (tmp_path / "run").rmdir()
    zygote, address, env = _zygote(tmp_path, "no_such_module_here", os.getpid())
    try:
        done = subprocess.run(
            [sys.executable, "-c", CLIENT, address, "no_such_module_here"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        # nothing ran: the launcher then runs the module itself
        assert done.stdout.strip() == "status None", done.stderr
        assert zygote.wait(30) == 0
    finally:
        zygote.kill()


def test_streams_after_the_first_run_their_source_in_a_zygote_child(
    spark: Any, cluster: Any, tmp_path: Path
) -> None:
    """The suite's session runs Spark's Python processes through the launcher: each streaming query's
    source runner after the first is forked from a zygote of Spark's JVM, and reads as before."""
    topic = "SparkLauncherZygote"
    create_topic(cluster.namesrv_addr, topic, 2)
    sent = sorted(
        (s["queueId"], s["queueOffset"], s["body"]) for s in produce(cluster.namesrv_addr, topic, 40)
    )
    for run in range(3):
        df = tidemq_stream(spark, cluster.namesrv_addr, topic=topic, startingOffsets="earliest")
        query = available_now_into_memory(df, f"zygote_stream_{run}", tmp_path / f"chk{run}")
        assert query.exception() is None
        rows = spark.sql(f"select queueId, queueOffset, body from zygote_stream_{run}").collect()
        assert sorted((r.queueId, r.queueOffset, bytes(r.body)) for r in rows) == sent
    jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    # one zygote per interpreter, environment and working directory: earlier tests of the session may
    # have left others (they exit after 10 idle minutes), so the runner is looked for under each
    _wait_for(lambda: bool(zygote_pids({jvm})), "a zygote of the session's JVM")

    def children() -> list[int]:
        table = child_pids()
        return [pid for zygote in zygote_pids({jvm}) for pid in table.get(zygote, [])]

    _wait_for(lambda: not children(), "the runners of the finished queries to end")

    query = (
        spark.readStream.format("tidemq")
        .option("namesrv", cluster.namesrv_addr)
        .option("topic", topic)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "chk-running"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        _wait_for(lambda: query.lastProgress is not None, "the running query's first batch")
        assert len(children()) == 1  # the running query's source runner
    finally:
        query.stop()
    _wait_for(lambda: not children(), "the runner of the stopped query to end")
