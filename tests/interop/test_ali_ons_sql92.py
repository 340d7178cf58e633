"""ali-ons 3.12 (npm) subscribing with SQL92 to ``tidemq serve`` with its defaults: it receives exactly
the messages that match ``a > 5 AND b = 'x'`` (transactions.md §2.3's vectors: non-numeric, decimal,
int-overflowing and missing ``a``, wrong-case ``b``, another tag), and a bad expression reaches the
consumer as an error, not as silence (ali-ons sends the expression in every pull and never checks it
first, so the pull's SUBSCRIPTION_PARSE_FAILED is what it sees)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import SQL92_VECTORS, sql92_props
from tidemq.admin import AdminClient
from tidemq.testing import ServeProcess

pytestmark = pytest.mark.interop

HERE = Path(__file__).parent
SCRIPT = HERE / "ali_ons_sql92.js"
# (a, b, tag, matches a > 5 AND b = 'x')
VECTORS = [
    *SQL92_VECTORS,
    ("100", "x", None, True),  # the end marker: the last message, and a match
]


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.skip("node is not installed (make node-check installs it)")
    if not (HERE / "node" / "node_modules" / "ali-ons").is_dir():
        pytest.skip("ali-ons is not installed (make node-check installs it)")
    return found


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with ServeProcess(tmp_path_factory.mktemp("ons-sql") / "store") as process:
        yield process


def _run(node: str, serve: ServeProcess, tmp_path: Path, topic: str, expression: str) -> dict[str, object]:
    with AdminClient(namesrv_addr=serve.namesrv_addr) as admin:
        admin.create_topic(topic, 1)  # one queue: ali-ons then consumes in send order
    messages = [
        {"body": f"m{i}", "tag": tag, "props": sql92_props(a, b)} for i, (a, b, tag, _) in enumerate(VECTORS)
    ]
    (tmp_path / "messages.json").write_text(json.dumps(messages))
    run = subprocess.run(
        [node, str(SCRIPT), serve.namesrv_addr, topic, expression, str(tmp_path / "messages.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def test_ali_ons_receives_exactly_the_matching_messages(
    node: str, serve: ServeProcess, tmp_path: Path
) -> None:
    got = _run(node, serve, tmp_path, "OnsSql", "a > 5 AND b = 'x'")
    assert got == {"received": [f"m{i}" for i, v in enumerate(VECTORS) if v[3]]}


def test_ali_ons_gets_the_refusal_of_a_bad_expression(node: str, serve: ServeProcess, tmp_path: Path) -> None:
    got = _run(node, serve, tmp_path, "OnsSqlBad", "a > 5 AND")
    error = str(got.get("error"))
    assert "parse the consumer's subscription failed" in error and "column 10" in error, got
