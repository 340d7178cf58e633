"""RocketMQ 5's official clients (PyPI rocketmq-python-client 5.1.2, npm rocketmq-client-nodejs 1.0.8)
against ``tidemq serve --grpc-port 0`` and ``tidemq proxy``: what each produces arrives with its body
and properties."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.v5_harness import LANGS, missing, require, run_v5
from tidemq.serve_process import spawn_serve, stop_serve, wait_ready
from tidemq.testing import ServeProcess

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    if all(missing(lang) for lang in LANGS):
        pytest.skip("; ".join(str(missing(lang)) for lang in LANGS))
    store = tmp_path_factory.mktemp("v5") / "store"
    with ServeProcess(store, extra_args=["--grpc-port", "0"]) as proc:
        yield proc


def messages(lang: str) -> list[dict[str, Any]]:
    return [
        {
            "body": f"{lang}-normal",
            "tag": "TagA",
            "keys": ["k1", f"{lang}-k"],
            "props": {"color": "red", "n": "1"},
        },
        {"body": f"{lang}-fifo-0", "tag": "TagA", "group": f"{lang}-g", "props": {"seq": "0"}},
        {"body": f"{lang}-fifo-1", "tag": "TagA", "group": f"{lang}-g", "props": {"seq": "1"}},
    ]


def pull_all(namesrv: str, topic: str, n: int, timeout: float = 15.0, group: str = "") -> list[Any]:
    from tidemq.client import PullConsumer

    consumer = PullConsumer(
        namesrv_addr=namesrv,
        consumer_group=group or f"check-{topic}",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )
    consumer.subscribe(topic)
    consumer.start()
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout=1.0))
    finally:
        consumer.shutdown()
    return got


@pytest.mark.parametrize("lang", ["node"])  # the Python client's messages: test_tidemq_proxy_...
def test_v5_producer_messages_reach_a_4x_consumer_exactly(serve: ServeProcess, lang: str) -> None:
    """Normal and FIFO sends over gRPC land in the store with RocketMQ's properties: a 4.x consumer
    sees the body, tag, keys and user properties; a message group's messages share one queue, in order."""
    require(lang)
    topic = f"V5Cross{lang.title()}"
    sent = run_v5(
        lang,
        {"action": "produce", "endpoint": serve.fields["grpc"], "topic": topic, "messages": messages(lang)},
    )
    assert len(sent["sent"]) == 3
    got = {m.body.decode(): m for m in pull_all(serve.namesrv_addr, topic, 3)}
    assert sorted(got) == sorted(m["body"] for m in messages(lang))
    normal = got[f"{lang}-normal"]
    assert normal.tags == "TagA" and sorted(normal.keys.split(" ")) == sorted(["k1", f"{lang}-k"])
    assert normal.properties["color"] == "red" and normal.properties["n"] == "1"
    assert normal.properties["UNIQ_KEY"] == sent["sent"][0]["message_id"]
    f0, f1 = got[f"{lang}-fifo-0"], got[f"{lang}-fifo-1"]
    assert f0.properties["__SHARDINGKEY"] == f"{lang}-g" and f0.queue_id == f1.queue_id
    assert f0.queue_offset < f1.queue_offset


def test_python_v5_client_recalls_a_delay_message(serve: ServeProcess) -> None:
    """RocketMQ 5.3's RecallMessage from the official Python client: the send receipt's recall handle
    cancels a delay message before its time; after its time the recall is refused, saying so."""
    require("python")
    topic = "V5Recall"
    msgs = [
        {"body": "recalled", "delay_ms": 2500, "recall": "now"},  # (whole seconds: see the harness)
        {"body": "kept", "delay_ms": 2500},
        {"body": "late", "delay_ms": 1000, "recall": "late"},
    ]
    spec = {"action": "produce", "endpoint": serve.fields["grpc"], "topic": topic, "messages": msgs}
    sent = run_v5("python", spec)["sent"]
    assert sent[0]["recalled"] == sent[0]["message_id"] and "recalled" not in sent[1]
    assert "has been delivered" in sent[2]["recall_error"]
    got = sorted(m.body for m in pull_all(serve.namesrv_addr, topic, 2))
    assert got == [b"kept", b"late"]
    again = pull_all(serve.namesrv_addr, topic, 3, timeout=1.5, group="again")  # never "recalled"
    assert sorted(m.body for m in again) == [b"kept", b"late"]


def test_node_v5_client_recalls_a_delay_message(serve: ServeProcess) -> None:
    """The Node client's Producer.recallMessage (RocketMQ 5.3's RecallMessage) with the send
    receipt's recall handle cancels a delay message before its time: it is never delivered, while
    one due later than it is."""
    require("node")
    topic = "V5RecallNode"
    msgs = [{"body": "recalled", "delay_ms": 1500, "recall": "now"}, {"body": "kept", "delay_ms": 2500}]
    spec = {"action": "produce", "endpoint": serve.fields["grpc"], "topic": topic, "messages": msgs}
    sent = run_v5("node", spec)["sent"]
    assert sent[0]["recalled"] == sent[0]["message_id"] and "recalled" not in sent[1]
    assert [m.body for m in pull_all(serve.namesrv_addr, topic, 1)] == [b"kept"]
    again = pull_all(serve.namesrv_addr, topic, 2, timeout=1.0, group="again")  # "recalled" was due 1 s ago
    assert [m.body for m in again] == [b"kept"]


def test_tidemq_proxy_in_front_of_the_cluster(serve: ServeProcess, tmp_path: Path) -> None:
    """``tidemq proxy --namesrv ADDR --grpc-port 0`` (cluster mode): a v5 producer and SimpleConsumer
    through it; the messages are in the broker for a 4.x consumer too."""
    lang = "python"
    require(lang)
    command = [sys.executable, "-m", "tidemq", "proxy", "--namesrv", serve.namesrv_addr]
    proc = spawn_serve([*command, "--grpc-port", "0", "--host", "127.0.0.1"], tmp_path / "proxy.log")
    try:
        fields, out = wait_ready(proc, 30)
        assert fields is not None, out
        endpoint = fields["grpc"]
        msgs = [{"body": "via-proxy", "tag": "TagP", "props": {"p": "1"}}]
        run_v5(lang, {"action": "produce", "endpoint": endpoint, "topic": "V5Proxy", "messages": msgs})
        got = run_v5(
            lang,
            {
                "action": "consume",
                "endpoint": endpoint,
                "topic": "V5Proxy",
                "group": "GProxy",
                "expect": 1,
                "await_s": 2,
            },
        )
        assert [(m["body"], m["tag"], m["props"]) for m in got["received"]] == [
            ("via-proxy", "TagP", {"p": "1"})
        ]
        (pulled,) = pull_all(serve.namesrv_addr, "V5Proxy", 1)
        assert (pulled.body, pulled.tags, pulled.properties["p"]) == (b"via-proxy", "TagP", "1")
    finally:
        assert stop_serve(proc, 30) == 0
