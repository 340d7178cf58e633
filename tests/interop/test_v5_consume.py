"""RocketMQ 5's official clients consuming through tidemq's gRPC endpoint (POP): across languages,
every body and property exact; an un-acked message comes again after its invisible time with its
delivery attempt + 1; a changed invisible duration holds and the new receipt handle acks.

The endpoint runs in-process (``GrpcProxy.local``) with a 1 s minimum invisible time (RocketMQ's is
10 s), so a redelivery takes a second instead of ten, and 1 s long polling (RocketMQ's is 20 s): a
Node PushConsumer's shutdown waits for its receive in flight.
"""

from __future__ import annotations

import time
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

    # transaction checks of halves older than 3 s, every 0.5 s, instead of RocketMQ's 6 s / 60 s: a
    # timeout of 0.5 s let a check reach a half whose END the client had not sent yet on a loaded
    # machine (the check's answer then decides, and the test saw the committed one checked too)
    tmp = tmp_path_factory.mktemp("v5c")
    with ClusterThread(tmp, transaction_time_out=3000, transaction_check_interval=500) as cluster:

        async def start() -> GrpcProxy:
            proxy = GrpcProxy.local(
                cluster.broker,
                "127.0.0.1",
                0,
                consumer_config=ConsumerConfig(min_invisible_ms=1000, long_polling_ms=1000),
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
    ] + ([DELAYED] if lang == "node" else [])


DELAYED = {"body": "node-d0", "tag": "TagA", "keys": ["d"], "delay_ms": 1000, "props": {"when": "later"}}
"""A delay message: sent with ``delivery_timestamp`` 1 s ahead, it arrives no sooner."""


@pytest.mark.parametrize(("producer", "consumer"), [("python", "node"), ("node", "python")])
def test_cross_language_every_body_and_property_exact(
    endpoint: Endpoint, producer: str, consumer: str
) -> None:
    require(producer, consumer)
    topic = f"V5X{producer.title()}{consumer.title()}"
    msgs = sent_messages(producer)
    start = time.time()
    sent = run_v5(producer, spec(endpoint, "produce", topic, messages=msgs))["sent"]
    produced = time.time()
    # the consumer changes the first message's invisible duration, then acks it with the new handle
    got = run_v5(
        consumer,
        spec(
            endpoint,
            "consume",
            topic,
            group=f"G{topic}",
            expect=len(msgs),
            await_s=2,
            timeout_s=15,
            change_first_s=30,
        ),
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
    if DELAYED in msgs:  # the Python view says its type and delivery time
        delayed = by_body[DELAYED["body"]]
        # the producer process set its own now + 1 s, at some moment while it ran
        assert delayed["type"] == "DELAY"
        assert start + 1 - 0.01 <= delayed["delivery_ms"] / 1000 <= produced + 1 + 0.01
        assert got["received"][-1] is delayed and time.time() - start >= 1.0


def test_unacked_comes_again_and_a_changed_one_stays_invisible(endpoint: Endpoint) -> None:
    """Two messages received and not acked, invisible 1 s; the first's invisible duration is changed
    to 30 s: only the second comes again (delivery attempt 2), the first stays away. (Node's
    change-then-ack runs in the cross-language test.)"""
    lang = "python"
    require(lang)
    topic = f"V5Redeliver{lang.title()}"
    msgs = [{"body": "changed", "group": "g"}, {"body": "again", "group": "g", "props": {"k": "v"}}]
    run_v5(lang, spec(endpoint, "produce", topic, messages=msgs))  # one queue: received in this order
    group = f"GR{lang}"
    first = run_v5(
        lang,
        spec(
            endpoint,
            "consume",
            topic,
            group=group,
            expect=2,
            await_s=2,
            invisible_s=1,
            ack=False,
            change_first_s=30,
        ),
    )
    assert [(m["body"], m["attempt"]) for m in first["received"]] == [("changed", 1), ("again", 1)]
    second = run_v5(
        lang, spec(endpoint, "consume", topic, group=group, expect=1, await_s=3, invisible_s=30, timeout_s=15)
    )
    assert [(m["body"], m["attempt"], m["props"]) for m in second["received"]] == [("again", 2, {"k": "v"})]


@pytest.mark.parametrize("lang", LANGS)
def test_transactions_commit_rollback_and_server_check(endpoint: Endpoint, lang: str) -> None:
    """Committed and checked-then-committed messages are delivered; the rolled-back one never is."""
    require(lang, "python")
    topic = f"V5Tx{lang.title()}"
    msgs = [
        {"body": "tx-commit", "tx": "commit"},
        {"body": "tx-rollback", "tx": "rollback"},
        {"body": "tx-checked", "tx": "check-commit", "props": {"k": "v"}},
    ]
    out = run_v5(lang, spec(endpoint, "produce", topic, messages=msgs, check_wait_s=15))
    assert out["checked"] == [out["sent"][2]["message_id"]]  # the server asked about the open one
    # the rolled-back message is never stored in the topic; were it, it would come in the same batch
    got = run_v5(
        "python", spec(endpoint, "consume", topic, group=f"GT{lang}", expect=2, await_s=2, timeout_s=10)
    )
    assert sorted(m["body"] for m in got["received"]) == ["tx-checked", "tx-commit"]
    assert next(m for m in got["received"] if m["body"] == "tx-checked")["props"] == {"k": "v"}


def test_push_consumers_of_both_languages(endpoint: Endpoint) -> None:
    """PushConsumers (QueryAssignment, receives with auto_renew and no invisible duration) of two
    groups each get every message, properties exact, and ack them."""
    require("python", "node")
    topic = "V5Push"
    msgs = [{"body": f"p{i}", "tag": "TagA", "props": {"i": str(i)}} for i in range(3)]
    run_v5("python", spec(endpoint, "produce", topic, messages=msgs))
    for lang in LANGS:
        got = run_v5(lang, spec(endpoint, "push", topic, group=f"GPush{lang}", expect=3, timeout_s=15))
        assert sorted((m["body"], m["props"]["i"], m["tag"]) for m in got["received"]) == [
            (f"p{i}", str(i), "TagA") for i in range(3)
        ]


def test_fifo_group_gets_a_message_group_in_order_again_after_a_timeout(endpoint: Endpoint) -> None:
    """A FIFO consumer group (consumeMessageOrderly, ``updateSubGroup -o true``): the group's
    messages come in order; not acked in time, they all come again, in the same order, attempt 2,
    and a later message of the group only after them."""
    require("python")
    from tidemq.protocol.body.heartbeat import SubscriptionGroupConfig

    topic, group = "V5Fifo", "GFifo"
    cfg = SubscriptionGroupConfig(group_name=group, consume_message_orderly=True)
    endpoint.cluster.broker.subscription_group_manager.update_subscription_group_config(cfg)
    msgs = [{"body": f"f{i}", "group": "order-7"} for i in range(3)]
    run_v5("python", spec(endpoint, "produce", topic, messages=msgs))
    first = run_v5(
        "python", spec(endpoint, "consume", topic, group=group, expect=3, invisible_s=1, ack=False)
    )
    assert [(m["body"], m["attempt"]) for m in first["received"]] == [("f0", 1), ("f1", 1), ("f2", 1)]
    # f3 arrives while f0..f2 are in flight: a FIFO group gets it only after them
    run_v5("python", spec(endpoint, "produce", topic, messages=[{"body": "f3", "group": "order-7"}]))
    again = run_v5("python", spec(endpoint, "consume", topic, group=group, expect=4, await_s=2, timeout_s=15))
    assert [(m["body"], m["attempt"]) for m in again["received"]] == [
        ("f0", 2),
        ("f1", 2),
        ("f2", 2),
        ("f3", 1),
    ]
