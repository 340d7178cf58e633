"""RocketMQ 5's official clients consuming through tidemq's gRPC endpoint (POP): across languages,
every body and property exact; an un-acked message comes again after its invisible time with its
delivery attempt + 1; a changed invisible duration holds and the new receipt handle acks.

The endpoint runs in-process (``GrpcProxy.local``) with a 1 s minimum invisible time (RocketMQ's is
10 s), so a redelivery takes a second instead of ten.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.interop.v5_harness import LANGS, missing, require, run_v5
from tidemq.testing import ClusterThread

pytestmark = pytest.mark.interop


class Endpoint:
    def __init__(self, cluster: ClusterThread, address: str) -> None:
        self.cluster = cluster
        self.address = address


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    if all(missing(lang) for lang in LANGS):
        pytest.skip("; ".join(str(missing(lang)) for lang in LANGS))
    from tidemq.proxy.consumer import ConsumerConfig
    from tidemq.proxy.server import GrpcProxy

    with ClusterThread(tmp_path_factory.mktemp("v5c")) as cluster:

        async def start() -> GrpcProxy:
            proxy = GrpcProxy.local(
                cluster.broker, "127.0.0.1", 0, consumer_config=ConsumerConfig(min_invisible_ms=1000)
            )
            await proxy.start()
            return proxy

        proxy = cluster.run(start())
        try:
            yield Endpoint(cluster, f"127.0.0.1:{proxy.port}")
        finally:
            cluster.run(proxy.stop())


def spec(endpoint: Endpoint, action: str, topic: str, **kw: Any) -> dict[str, Any]:
    return {"action": action, "endpoint": endpoint.address, "topic": topic, **kw}


def sent_messages(lang: str) -> list[dict[str, Any]]:
    return [
        {
            "body": f"{lang}-n0",
            "tag": "TagA",
            "keys": ["a", f"{lang}-k"],
            "props": {"color": "red", "size": "L"},
        },
        {"body": f"{lang}-f0", "tag": "TagA", "keys": ["f"], "group": "order-1", "props": {"seq": "0"}},
        {"body": f"{lang}-f1", "tag": "TagA", "keys": ["f"], "group": "order-1", "props": {"seq": "1"}},
    ]


@pytest.mark.parametrize(("producer", "consumer"), [("python", "node"), ("node", "python")])
def test_cross_language_every_body_and_property_exact(
    endpoint: Endpoint, producer: str, consumer: str
) -> None:
    require(producer, consumer)
    topic = f"V5X{producer.title()}{consumer.title()}"
    msgs = sent_messages(producer)
    sent = run_v5(producer, spec(endpoint, "produce", topic, messages=msgs))["sent"]
    got = run_v5(
        consumer, spec(endpoint, "consume", topic, group=f"G{topic}", expect=3, await_s=2, timeout_s=15)
    )
    by_body = {m["body"]: m for m in got["received"]}
    assert sorted(by_body) == sorted(m["body"] for m in msgs)
    for m, receipt in zip(msgs, sent, strict=True):
        r = by_body[m["body"]]
        assert r["props"] == m["props"], r
        assert (r["tag"], r["keys"], r["message_id"], r["attempt"]) == (
            "TagA",
            sorted(m["keys"]),
            receipt["message_id"],
            1,
        )
        assert (r["group"] or None) == m.get("group")
    fifo = [m["body"] for m in got["received"] if m["group"]]
    assert fifo == [f"{producer}-f0", f"{producer}-f1"]  # one queue, received in order


@pytest.mark.parametrize("lang", LANGS)
def test_unacked_comes_again_after_its_invisible_time(endpoint: Endpoint, lang: str) -> None:
    require(lang)
    topic = f"V5Redeliver{lang.title()}"
    run_v5(lang, spec(endpoint, "produce", topic, messages=[{"body": "again", "props": {"k": "v"}}]))
    group = f"GR{lang}"
    first = run_v5(
        lang, spec(endpoint, "consume", topic, group=group, expect=1, await_s=2, invisible_s=1, ack=False)
    )
    assert [(m["body"], m["attempt"]) for m in first["received"]] == [("again", 1)]
    second = run_v5(
        lang, spec(endpoint, "consume", topic, group=group, expect=1, await_s=3, invisible_s=30, timeout_s=15)
    )
    assert [(m["body"], m["attempt"], m["props"]) for m in second["received"]] == [("again", 2, {"k": "v"})]
    third = run_v5(lang, spec(endpoint, "consume", topic, group=group, expect=1, await_s=1, timeout_s=1))
    assert third["received"] == []  # acked: never again


def test_changed_invisible_duration_holds_and_the_new_handle_acks(endpoint: Endpoint) -> None:
    require("python")
    topic = "V5Change"
    run_v5("python", spec(endpoint, "produce", topic, messages=[{"body": "c0"}, {"body": "c1"}]))
    # change c0 (then ack it with the new handle), ack c1: nothing comes back, even past 1 s
    got = run_v5(
        "python",
        spec(endpoint, "consume", topic, group="GC", expect=2, await_s=2, invisible_s=1, change_first_s=30),
    )
    assert sorted(m["body"] for m in got["received"]) == ["c0", "c1"]
    again = run_v5("python", spec(endpoint, "consume", topic, group="GC", expect=1, await_s=1, timeout_s=1.5))
    assert again["received"] == []
