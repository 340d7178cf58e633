"""Plain ACL end to end: tidemq clients with and without good credentials against an ACL broker."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.helpers import start_push_consumer, wait_for
from tidemq.acl import AclClientRPCHook, AclConfigError, SessionCredentials
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext
from tidemq.client.producer.producer import AsyncProducer
from tidemq.client.query import query_message_by_uniq_key
from tidemq.errors import BrokerError, ClientError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import GetMaxOffsetRequestHeader, SendMessageRequestHeader
from tidemq.protocol.message import Message, MessageExt
from tidemq.remoting import RemotingClient
from tidemq.testing import ServeProcess, run_cluster

ACL_YML = """\
accounts:
  - accessKey: AppAccessKey
    secretKey: AppSecretKey
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - Secret=DENY
  - accessKey: ReaderAccessKey
    secretKey: ReaderSecretKey
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""
APP: dict[str, Any] = {"access_key": "AppAccessKey", "secret_key": "AppSecretKey"}


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_YML)
    return path


async def test_good_credentials_produce_and_consume(tmp_path: Path, acl_file: Path) -> None:
    async with run_cluster(tmp_path, acl_enable=True, acl_file=str(acl_file)) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="acl-pg", **APP)
        await producer.start()
        sent = {(await producer.send(Message("AclTopic", f"m{i}", tags="T"))).msg_id for i in range(10)}
        got: dict[str, MessageExt] = {}

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            for m in msgs:
                got[m.msg_id] = m

        consumer = await start_push_consumer(cluster.namesrv_addr, "acl-cg", "AclTopic", listener, **APP)
        try:
            await wait_for(lambda: set(got) >= sent, 10, "all messages under ACL")
        finally:
            await consumer.shutdown()
            await producer.shutdown()
        assert {m.body for m in got.values()} == {f"m{i}".encode() for i in range(10)}


async def test_plain_listener_under_acl_pulls_on_the_signed_loop_path(tmp_path: Path, acl_file: Path) -> None:
    """A plain-function listener with ACL keys: no queue lane (its connection would not sign the
    pulls); messages sent before and after the queues are caught up all arrive."""
    async with run_cluster(tmp_path, acl_enable=True, acl_file=str(acl_file)) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="acl-pg", **APP)
        await producer.start()
        first = {(await producer.send(Message("AclTopic", f"a{i}", tags="T"))).msg_id for i in range(10)}
        got: dict[str, MessageExt] = {}

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
            for m in msgs:
                got[m.msg_id] = m

        consumer = await start_push_consumer(cluster.namesrv_addr, "acl-cg2", "AclTopic", listener, **APP)
        try:
            await wait_for(lambda: set(got) >= first, 10, "the first messages under ACL")
            later = {(await producer.send(Message("AclTopic", f"b{i}", tags="T"))).msg_id for i in range(10)}
            await wait_for(lambda: set(got) >= later, 10, "the later messages under ACL")
            assert consumer.kernel.lanes == {}
        finally:
            await consumer.shutdown()
            await producer.shutdown()


async def send_refused(namesrv: str, topic: str, **creds: Any) -> BrokerError:
    producer = AsyncProducer(namesrv_addr=namesrv, producer_group="bad-pg", **creds)
    await producer.start()
    try:
        with pytest.raises(BrokerError) as info:
            await producer.send(Message(topic, b"nope"))
    finally:
        await producer.shutdown()
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    return info.value


async def test_refusals_carry_the_reason_and_the_broker_keeps_serving(tmp_path: Path, acl_file: Path) -> None:
    async with run_cluster(tmp_path, acl_enable=True, acl_file=str(acl_file)) as cluster:
        ns = cluster.namesrv_addr
        good = AsyncProducer(namesrv_addr=ns, producer_group="good-pg", **APP)
        await good.start()
        try:
            await good.send(Message("AclTopic", b"first"))

            err = await send_refused(ns, "AclTopic", access_key="AppAccessKey", secret_key="WrongSecret")
            assert err.remark == "Check signature failed for accessKey=AppAccessKey"
            err = await send_refused(
                ns, "AclTopic", access_key="ReaderAccessKey", secret_key="ReaderSecretKey"
            )
            assert "No default permission for topic:AclTopic" in err.remark
            err = await send_refused(ns, "Secret", **APP)
            assert "No permission for topic:Secret" in err.remark
            err = await send_refused(ns, "AclTopic", access_key="UnknownKey1", secret_key="whatever1")
            assert err.remark == "No acl config for UnknownKey1"
            err = await send_refused(ns, "AclTopic")  # no credentials at all
            assert err.remark.startswith("No accessKey is configured")

            assert (await good.send(Message("AclTopic", b"still served"))).msg_id
        finally:
            await good.shutdown()


async def test_refused_oneway_gets_no_answer_and_is_not_stored(tmp_path: Path, acl_file: Path) -> None:
    async with run_cluster(tmp_path, acl_enable=True, acl_file=str(acl_file)) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="ow-pg", **APP)
        await producer.start()
        await producer.send(Message("OneWay", b"stored"))  # creates the topic
        await producer.shutdown()

        def send_request(oneway: bool) -> RemotingCommand:
            header = SendMessageRequestHeader(
                producer_group="ow-pg",
                topic="OneWay",
                default_topic="TBW102",
                default_topic_queue_nums=4,
                queue_id=0,
                sys_flag=0,
                born_timestamp=int(time.time() * 1000),
                flag=0,
                properties="",
            )
            return RemotingCommand.create_request(
                RequestCode.SEND_MESSAGE_V2, header.to_v2_ext_fields(), b"x", oneway=oneway
            )

        bad = RemotingClient()
        bad.register_rpc_hook(AclClientRPCHook(SessionCredentials("AppAccessKey", "WrongSecret")))
        good = RemotingClient()
        good.register_rpc_hook(AclClientRPCHook(SessionCredentials("AppAccessKey", "AppSecretKey")))
        try:
            max_offset = RemotingCommand.create_request(
                RequestCode.GET_MAX_OFFSET,
                GetMaxOffsetRequestHeader(topic="OneWay", queue_id=0).to_ext_fields(),
            )
            before = await good.invoke(cluster.broker_addr, max_offset, 5.0)
            assert before.code == ResponseCode.SUCCESS
            await bad.invoke_oneway(cluster.broker_addr, send_request(oneway=True))
            refused = await bad.invoke(cluster.broker_addr, send_request(oneway=False), 5.0)
            assert refused.code == ResponseCode.SYSTEM_ERROR
            assert refused.remark == "Check signature failed for accessKey=AppAccessKey"
            stored = await good.invoke(cluster.broker_addr, send_request(oneway=False), 5.0)
            assert stored.code == ResponseCode.SUCCESS
            max_offset = RemotingCommand.create_request(
                RequestCode.GET_MAX_OFFSET,
                GetMaxOffsetRequestHeader(topic="OneWay", queue_id=0).to_ext_fields(),
            )
            after = await good.invoke(cluster.broker_addr, max_offset, 5.0)
            # only the good send landed in queue 0: the refused oneway was dropped silently
            assert int(after.ext_fields["offset"]) == int(before.ext_fields["offset"]) + 1
        finally:
            await bad.close()
            await good.close()


async def test_acl_off_ignores_credentials(tmp_path: Path) -> None:
    async with run_cluster(tmp_path) as cluster:
        producer = AsyncProducer(
            namesrv_addr=cluster.namesrv_addr,
            producer_group="pg",
            access_key="Whoever1",
            secret_key="anything1",
        )
        await producer.start()
        try:
            assert (await producer.send(Message("NoAcl", b"x"))).msg_id
        finally:
            await producer.shutdown()


async def test_broker_refuses_to_start_without_its_acl_file(tmp_path: Path) -> None:
    with pytest.raises(AclConfigError, match=r"plain_acl\.yml does not exist"):
        async with run_cluster(tmp_path, acl_enable=True):
            pass


async def test_tidemq_serve_acl_option(tmp_path: Path, acl_file: Path) -> None:
    """``tidemq serve --acl FILE`` enforces the file; a bad file stops the broker with a clear error."""
    with ServeProcess(tmp_path / "store", extra_args=["--acl", str(acl_file)]) as serve:
        no_creds: dict[str, Any] = {}
        for creds, ok in ((APP, True), (no_creds, False)):
            producer = AsyncProducer(namesrv_addr=serve.namesrv_addr, producer_group="cli-pg", **creds)
            await producer.start()
            try:
                if ok:
                    assert (await producer.send(Message("CliAcl", b"x"))).msg_id
                else:
                    with pytest.raises(BrokerError, match="No accessKey is configured"):
                        await producer.send(Message("CliAcl", b"x"))
            finally:
                await producer.shutdown()


def test_tidemq_serve_refuses_a_bad_acl_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad_acl.yml"
    bad.write_text("accounts:\n  - accessKey: short\n    secretKey: 12345678\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tidemq",
            "serve",
            "--store",
            str(tmp_path / "s2"),
            "--host",
            "127.0.0.1",
            "--namesrv-port",
            "0",
            "--broker-port",
            "0",
            "--acl",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "accessKey 'short' is too short" in result.stderr


async def test_query_by_key_and_unique_key_under_acl(tmp_path: Path, acl_file: Path) -> None:
    """QUERY_MESSAGE (with and without ``_UNIQUE_KEY_QUERY``) passes the signature check (#5310)."""
    async with run_cluster(tmp_path, acl_enable=True, acl_file=str(acl_file)) as cluster:
        producer = AsyncProducer(namesrv_addr=cluster.namesrv_addr, producer_group="q-pg", **APP)
        await producer.start()
        try:
            result = await producer.send(Message("AclQuery", b"findme", keys=["order-1"]))
            deadline = time.monotonic() + 10
            while True:  # the index is built asynchronously: wait (bounded) until the key is found
                try:
                    found = await producer.query_message("AclQuery", "order-1", 8, 0, 2**62)
                    break
                except ClientError:
                    assert time.monotonic() < deadline, "key never became queryable"
                    await asyncio.sleep(0.02)
            assert [m.body for m in found.message_list] == [b"findme"]
            # query by UNIQ_KEY: the request carries _UNIQUE_KEY_QUERY=true
            by_uniq = await query_message_by_uniq_key(producer.instance, "AclQuery", result.msg_id)
            assert by_uniq is not None and by_uniq.body == b"findme"
        finally:
            await producer.shutdown()


def test_cli_send_and_consume_with_credentials(tmp_path: Path, acl_file: Path) -> None:
    """`tidemq send/consume --access-key/--secret-key` work against an ACL broker; no keys are refused."""
    with ServeProcess(tmp_path / "store", extra_args=["--acl", str(acl_file)]) as serve:
        keys = ["--access-key", APP["access_key"], "--secret-key", APP["secret_key"]]
        base = [sys.executable, "-m", "tidemq"]
        sent = subprocess.run(
            [*base, "send", "--namesrv", serve.namesrv_addr, "--topic", "CliAclTopic", "--count", "3", *keys],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert sent.returncode == 0, sent.stderr
        assert [orjson.loads(line)["status"] for line in sent.stdout.splitlines()] == ["SEND_OK"] * 3
        got = subprocess.run(
            [
                *base,
                "consume",
                "--namesrv",
                serve.namesrv_addr,
                "--topic",
                "CliAclTopic",
                "--group",
                "cli-acl",
                "--from",
                "first",
                "--count",
                "3",
                "--duration",
                "30",
                "--json",
                *keys,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert got.returncode == 0, got.stderr
        bodies = sorted(
            event["body"]
            for event in map(orjson.loads, got.stdout.splitlines())
            if event["event"] == "message"
        )
        assert bodies == ["tidemq-msg-0", "tidemq-msg-1", "tidemq-msg-2"]
        refused = subprocess.run(
            [*base, "send", "--namesrv", serve.namesrv_addr, "--topic", "CliAclTopic"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode != 0
        assert "No accessKey is configured" in refused.stderr
