"""The gRPC endpoint's contract with a raw apache.rocketmq.v2 stub (no client library): topic
message types, namespaces, cluster mode (``tidemq proxy``), ACL signatures and TLS."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rocketmq.grpc_protocol", reason="needs rocketmq-python-client (the grpc extra)")

import grpc

from tidemq.broker.topic_config import make_topic_config
from tidemq.proxy import codes
from tidemq.proxy.auth import sign
from tidemq.proxy.pb import d, grpc_service, s
from tidemq.proxy.server import GrpcProxy
from tidemq.testing import Cluster, run_cluster

ACL_YML = """\
accounts:
  - accessKey: AppAccessKey
    secretKey: AppSecretKey
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - Secret=DENY
"""


def message(topic: str, body: bytes, *, ns: str = "", group: str = "", i: int = 0) -> Any:
    msg = d.Message(topic=d.Resource(resource_namespace=ns, name=topic), body=body)
    msg.user_properties["color"] = "red"
    sp = msg.system_properties
    sp.message_id, sp.message_type, sp.body_encoding = f"0102FC00000001000000000000{i:08X}", 1, 1
    if group:
        sp.message_group, sp.message_type = group, 2
    sp.born_timestamp.FromMilliseconds(time.time_ns() // 1_000_000)
    return msg


def metadata(
    client: str = "test@1@0@x", ns: str = "", key: str = "", secret: str = ""
) -> list[tuple[str, str]]:
    now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    md = [("x-mq-client-id", client), ("x-mq-date-time", now), ("x-mq-namespace", ns)]
    if key:
        md.append(
            (
                "authorization",
                f"MQv2-HMAC-SHA1 Credential={key}, SignedHeaders=x-mq-date-time, Signature={sign(secret, now)}",
            )
        )
    return md


async def receive(
    stub: Any, topic: str, group: str, md: list[tuple[str, str]], ns: str = "", poll_s: int = 1
) -> list[Any]:
    request = s.ReceiveMessageRequest(
        group=d.Resource(resource_namespace=ns, name=group),
        message_queue=d.MessageQueue(
            topic=d.Resource(resource_namespace=ns, name=topic), broker=d.Broker(name="broker-a")
        ),
        filter_expression=d.FilterExpression(type=1, expression="*"),
        batch_size=16,
    )
    request.invisible_duration.FromSeconds(30)
    request.long_polling_timeout.FromSeconds(poll_s)
    return [r async for r in stub.ReceiveMessage(request, metadata=md, timeout=10)]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with run_cluster(tmp_path) as c:
        yield c


async def serving(proxy: GrpcProxy, credentials: Any = None) -> tuple[Any, Any]:
    port = await proxy.start()
    target = f"127.0.0.1:{port}" if credentials is None else f"localhost:{port}"
    channel = (
        grpc.aio.insecure_channel(target)
        if credentials is None
        else grpc.aio.secure_channel(target, credentials)
    )
    return channel, grpc_service.MessagingServiceStub(channel)


async def test_topic_types_namespaces_and_cluster_mode(cluster: Cluster) -> None:
    fifo = make_topic_config("FifoOnly", 2)
    fifo.attributes["message.type"] = "FIFO"
    cluster.broker.topic_config_manager.update_topic_config(fifo)
    await cluster.broker.register_broker_all()
    for proxy in (
        GrpcProxy.local(cluster.broker, "127.0.0.1", 0),
        GrpcProxy.cluster(cluster.namesrv_addr, "127.0.0.1", 0),
    ):
        channel, stub = await serving(proxy)
        try:
            orders = f"Orders{proxy.port}"
            eps = d.Endpoints(scheme=1, addresses=[d.Address(host="127.0.0.1", port=proxy.port)])
            route = await stub.QueryRoute(
                s.QueryRouteRequest(topic=d.Resource(name="FifoOnly"), endpoints=eps), metadata=metadata()
            )
            assert route.status.code == codes.OK and {
                q.broker.endpoints.addresses[0].port for q in route.message_queues
            } == {proxy.port}
            assert [list(q.accept_message_types) for q in route.message_queues] == [[2], [2]]
            refused = await stub.SendMessage(
                s.SendMessageRequest(messages=[message("FifoOnly", b"n")]), metadata=metadata()
            )
            assert refused.status.code == codes.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
            assert "expected type is FIFO, but actual type is NORMAL" in refused.status.message
            ok = await stub.SendMessage(
                s.SendMessageRequest(messages=[message("FifoOnly", b"f", group="g")]), metadata=metadata()
            )
            assert ok.status.code == codes.OK
            # a namespace from the resource or the header: stored as ns%Topic, received back without it
            sent = await stub.SendMessage(
                s.SendMessageRequest(messages=[message(orders, b"o", ns="ns1", i=1)]),
                metadata=metadata(ns="ns1"),
            )
            assert sent.status.code == codes.OK
            assert cluster.broker.topic_config_manager.select_topic_config(f"ns1%{orders}") is not None
            got = await receive(stub, orders, f"G-{type(proxy.backend).__name__}", metadata(ns="ns1"))
            assert got[0].status.code == codes.OK and got[1].HasField("delivery_timestamp")
            (msg,) = [r.message for r in got if r.HasField("message")]
            assert (msg.topic.resource_namespace, msg.topic.name, msg.body, dict(msg.user_properties)) == (
                "ns1",
                orders,
                b"o",
                {"color": "red"},
            )
            handle = msg.system_properties.receipt_handle
            change = s.ChangeInvisibleDurationRequest(
                group=d.Resource(name=f"G-{type(proxy.backend).__name__}"),
                topic=d.Resource(name=orders),
                receipt_handle=handle,
            )
            change.invisible_duration.FromSeconds(20)
            changed = await stub.ChangeInvisibleDuration(change, metadata=metadata(ns="ns1"))
            assert changed.status.code == codes.OK and changed.receipt_handle != handle
            ack = s.AckMessageRequest(
                group=change.group,
                topic=change.topic,
                entries=[
                    s.AckMessageEntry(
                        message_id=msg.system_properties.message_id, receipt_handle=changed.receipt_handle
                    )
                ],
            )
            assert (await stub.AckMessage(ack, metadata=metadata(ns="ns1"))).status.code == codes.OK
            expired = s.AckMessageRequest(
                group=change.group,
                topic=change.topic,
                entries=[s.AckMessageEntry(receipt_handle="0 1 1 0 0 broker-a 0 0")],
            )
            assert (
                await stub.AckMessage(expired, metadata=metadata(ns="ns1"))
            ).status.code == codes.INVALID_RECEIPT_HANDLE
            # ForwardMessageToDeadLetterQueue (a FIFO PushConsumer's last attempt): into %DLQ%<group>
            dead_topic, dead_group = f"Dead{proxy.port}", f"GDead{proxy.port}"
            sent = await stub.SendMessage(
                s.SendMessageRequest(messages=[message(dead_topic, b"dead", i=2)]), metadata=metadata()
            )
            (dead,) = [
                r.message
                for r in await receive(stub, dead_topic, dead_group, metadata())
                if r.HasField("message")
            ]
            forward = s.ForwardMessageToDeadLetterQueueRequest(
                group=d.Resource(name=dead_group),
                topic=d.Resource(name=dead_topic),
                receipt_handle=dead.system_properties.receipt_handle,
                message_id=dead.system_properties.message_id,
                delivery_attempt=1,
                max_delivery_attempts=1,
            )
            forwarded = await stub.ForwardMessageToDeadLetterQueue(forward, metadata=metadata())
            assert forwarded.status.code == codes.OK, forwarded.status.message
            assert cluster.broker.store.get_max_offset_in_queue(f"%DLQ%{dead_group}", 0) == 1
            assert [
                r.status.code for r in await receive(stub, dead_topic, dead_group, metadata(), poll_s=0)
            ] == [codes.MESSAGE_NOT_FOUND]
        finally:
            await channel.close()
            await proxy.stop()


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and its key (PEM)."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    return key, cert


async def test_acl_signatures_and_tls(tmp_path: Path, tls_files: tuple[Path, Path]) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YML)
    key, cert = tls_files
    async with run_cluster(tmp_path, acl_enable=True, acl_file=str(acl)) as c:
        proxy = GrpcProxy.local(c.broker, "127.0.0.1", 0, tls_cert=str(cert), tls_key=str(key))
        channel, stub = await serving(proxy, grpc.ssl_channel_credentials(cert.read_bytes()))
        try:
            request = s.QueryRouteRequest(topic=d.Resource(name="T"))
            unsigned = await stub.QueryRoute(request, metadata=metadata())
            assert unsigned.status.code == codes.UNAUTHORIZED
            bad = await stub.QueryRoute(request, metadata=metadata(key="AppAccessKey", secret="nope"))
            assert bad.status.code == codes.UNAUTHORIZED and "signature" in bad.status.message
            good = await stub.QueryRoute(
                request, metadata=metadata(key="AppAccessKey", secret="AppSecretKey")
            )
            assert good.status.code == codes.OK
            sent = await stub.SendMessage(
                s.SendMessageRequest(messages=[message("T", b"x")]),
                metadata=metadata(key="AppAccessKey", secret="AppSecretKey"),
            )
            assert sent.status.code == codes.OK
            denied = await stub.SendMessage(
                s.SendMessageRequest(messages=[message("Secret", b"x")]),
                metadata=metadata(key="AppAccessKey", secret="AppSecretKey"),
            )
            assert denied.status.code == codes.FORBIDDEN
            half = message("T", b"tx", i=9)
            half.system_properties.message_type = 4  # TRANSACTION
            md = metadata(key="AppAccessKey", secret="AppSecretKey")
            sent = await stub.SendMessage(s.SendMessageRequest(messages=[half]), metadata=md)
            assert sent.status.code == codes.OK and sent.entries[0].transaction_id
            end = s.EndTransactionRequest(
                topic=d.Resource(name="T"),
                message_id=half.system_properties.message_id,
                transaction_id=sent.entries[0].transaction_id,
                resolution=1,
                source=1,
            )
            ended = await stub.EndTransaction(end, metadata=md)  # the broker checks ACL on it too
            assert ended.status.code == codes.OK, ended.status.message
            again = await stub.EndTransaction(end, metadata=md)
            assert again.status.code == codes.INVALID_TRANSACTION_ID
        finally:
            await channel.close()
            await proxy.stop()


async def test_auto_renew_keeps_a_push_consumers_message_invisible_until_acked(cluster: Cluster) -> None:
    """An ``auto_renew`` receive (PushConsumer): the proxy renews the invisible time, so the message
    stays away past its first invisible time; the client's ack with its first handle is final."""
    from tidemq.proxy.consumer import ConsumerConfig

    config = ConsumerConfig(default_invisible_ms=1000, renew_ahead_ms=600, renew_interval_ms=50)
    proxy = GrpcProxy.local(cluster.broker, "127.0.0.1", 0, consumer_config=config)
    channel, stub = await serving(proxy)
    try:
        assert (
            await stub.SendMessage(
                s.SendMessageRequest(messages=[message("Renew", b"r")]), metadata=metadata()
            )
        ).status.code == codes.OK
        request = s.ReceiveMessageRequest(
            group=d.Resource(name="GRenew"),
            message_queue=d.MessageQueue(topic=d.Resource(name="Renew"), broker=d.Broker(name="broker-a")),
            filter_expression=d.FilterExpression(type=1, expression="*"),
            batch_size=16,
            auto_renew=True,
        )
        request.long_polling_timeout.FromSeconds(1)
        got = [r async for r in stub.ReceiveMessage(request, metadata=metadata(), timeout=10)]
        (msg,) = [r.message for r in got if r.HasField("message")]
        first = msg.system_properties.receipt_handle
        renewer = proxy.service.consumer.renewer
        deadline = time.monotonic() + 10
        while renewer.entries[first].visible_at < int(first.split(" ")[1]) + 2500:  # renewed twice
            assert time.monotonic() < deadline, "not renewed"
            await asyncio.sleep(0.05)
        request.long_polling_timeout.FromSeconds(0)
        again = [r async for r in stub.ReceiveMessage(request, metadata=metadata(), timeout=10)]
        assert [r.status.code for r in again] == [codes.MESSAGE_NOT_FOUND]  # past 1 s, still invisible
        entry = s.AckMessageEntry(message_id=msg.system_properties.message_id, receipt_handle=first)
        ack = s.AckMessageRequest(group=request.group, topic=d.Resource(name="Renew"), entries=[entry])
        assert (await stub.AckMessage(ack, metadata=metadata())).status.code == codes.OK
        assert renewer.entries == {}
    finally:
        await channel.close()
        await proxy.stop()


async def test_telemetry_settings_answer_and_group_membership(cluster: Cluster) -> None:
    """A SimpleConsumer's settings on Telemetry: answered OK with the server's settings; the client
    joins its group on the broker (consumerConnection lists it) until its stream closes."""
    proxy = GrpcProxy.local(cluster.broker, "127.0.0.1", 0)
    channel, stub = await serving(proxy)
    try:
        call = stub.Telemetry(metadata=metadata(client="member@1@0@x"))
        sub = d.Subscription(
            group=d.Resource(name="GMember"),
            subscriptions=[
                d.SubscriptionEntry(
                    topic=d.Resource(name="MemberT"), expression=d.FilterExpression(type=1, expression="TagA")
                )
            ],
        )
        await call.write(s.TelemetryCommand(settings=d.Settings(client_type=3, subscription=sub)))
        reply = await call.read()
        assert reply.status.code == codes.OK and reply.settings.subscription.receive_batch_size == 32
        assert not reply.settings.metric.on and reply.settings.backoff_policy.max_attempts == 17
        info = cluster.broker.consumer_manager.get_consumer_group_info("GMember")
        assert info is not None and info.get_all_client_ids() == ["member@1@0@x"]
        assert info.find_subscription_data("MemberT").sub_string == "TagA"  # type: ignore[union-attr]
        await call.done_writing()
        while await call.read() is not grpc.aio.EOF:
            pass
        deadline = time.monotonic() + 5
        while cluster.broker.consumer_manager.get_consumer_group_info("GMember") is not None:
            assert time.monotonic() < deadline, "the client stayed in its group after its stream closed"
            await asyncio.sleep(0.02)
    finally:
        await channel.close()
        await proxy.stop()
