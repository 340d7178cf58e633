"""ali-ons 3.12 (npm) ``setStartDeliverTime(now + 3 s)`` against ``tidemq serve``: an ali-ons push
consumer receives the message no earlier than its time and within a second after it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tidemq.client import Producer
from tidemq.protocol.message import Message
from tidemq.testing import ServeProcess

pytestmark = pytest.mark.interop

HERE = Path(__file__).parent
SCRIPT = HERE / "ali_ons_timer.js"
DELAY_MS = 3000


def test_ali_ons_start_deliver_time(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (make node-check installs it)")
    if not (HERE / "node" / "node_modules" / "ali-ons").is_dir():
        pytest.skip("ali-ons is not installed (make node-check installs it)")
    with ServeProcess(tmp_path / "store") as serve:
        producer = Producer(namesrv_addr=serve.namesrv_addr, producer_group="ons-timer-setup")
        producer.start()
        try:
            producer.send(Message("OnsTimer", b"warm"))  # ali-ons does not auto-create topics
        finally:
            producer.shutdown()
        run = subprocess.run(
            [node, str(SCRIPT), serve.namesrv_addr, "OnsTimer", str(DELAY_MS)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    late = got["received"] - got["deliver"]
    assert 0 <= late <= 1000, f"received {late} ms after its start deliver time"
    props = got["props"]
    assert props["__STARTDELIVERTIME"] == str(got["deliver"]) == props["TIMER_OUT_MS"]
    assert "REAL_TOPIC" not in props
