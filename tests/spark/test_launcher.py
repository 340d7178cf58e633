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

from tests.spark.helpers import create_topic, produce
from tidemq.spark.launcher import prefer_installed, python_launcher, same_pyspark

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
    query = (
        spark.readStream.format("tidemq")
        .option("namesrv", cluster.namesrv_addr)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName("launcher_stream")
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
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
