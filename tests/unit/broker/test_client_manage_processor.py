"""ClientManageProcessor against in-memory managers (no sockets): HEART_BEAT and friends."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tidemq.broker.broker_to_client import Broker2Client
from tidemq.broker.config import BrokerConfig
from tidemq.broker.consumer_filter import ConsumerFilterManager
from tidemq.broker.consumer_manager import ClientHousekeepingService, ConsumerManager
from tidemq.broker.processor.client_manage import ClientManageProcessor
from tidemq.broker.producer_manager import ProducerManager
from tidemq.broker.rebalance_lock import RebalanceLockManager
from tidemq.protocol.body import GetConsumerListByGroupResponseBody, MessageModel, SubscriptionGroupConfig
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cpp_client"


@dataclass
class FakeChannel:
    remote_addr: str
    is_active: bool = True
    sent: list[RemotingCommand] = field(default_factory=list)
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        if not self.is_active:
            raise ConnectionError("closed")
        async with self.arrived:
            self.sent.append(request)
            self.arrived.notify_all()

    def close(self) -> None:
        self.is_active = False


@dataclass
class FakeConfig:
    channel_expired_timeout: int = 120_000
    notify_consumer_ids_changed_enable: bool = True


class FakeTopics:
    def __init__(self) -> None:
        self.created: dict[str, tuple[int, int, int]] = {}

    def select_topic_config(self, topic: str) -> Any:
        return self.created.get(topic)

    def create_topic_in_send_message_back_method(self, topic: str, nums: int, perm: int, flag: int) -> Any:
        self.created.setdefault(topic, (nums, perm, flag))
        return self.created[topic]


class FakeGroups:
    def __init__(self, auto_create: bool = True) -> None:
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {}

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        if group not in self.table and self.auto_create:
            self.table[group] = SubscriptionGroupConfig(group_name=group)
        return self.table.get(group)


class FakeBroker:
    def __init__(self) -> None:
        self.config = FakeConfig()
        self.loop = asyncio.get_running_loop()
        self.topic_config_manager = FakeTopics()
        self.subscription_group_manager = FakeGroups()
        self.consumer_manager = ConsumerManager(self)  # type: ignore[arg-type]
        self.producer_manager = ProducerManager()
        self.rebalance_lock_manager = RebalanceLockManager()
        self.broker2client = Broker2Client(self)  # type: ignore[arg-type]
        self.consumer_filter_manager = ConsumerFilterManager(BrokerConfig())
        self.registrar = self  # BrokerRegistrar's part the processor uses
        self.registrations = 0

    async def register_increment(self) -> None:
        self.registrations += 1


def heartbeat(client_id: str, group: str, topics: list[str], model: Any = 1) -> RemotingCommand:
    """A C++-style heartbeat: ordinal enums, string subVersion, no tagsSet/codeSet."""
    subs = [{"subString": "*", "subVersion": "1795221806882", "topic": t} for t in topics]
    body = {
        "clientID": client_id,
        "consumerDataSet": [
            {
                "consumeFromWhere": 0,
                "consumeType": 1,
                "groupName": group,
                "messageModel": model,
                "subscriptionDataSet": subs,
            }
        ],
        "producerDataSet": [{"groupName": "PG"}],
    }
    cmd = RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, orjson.dumps(body) + b"\n")
    cmd.language = "CPP"
    cmd.version = 63
    return cmd


async def notified(ch: FakeChannel, n: int) -> None:
    """Wait (at most 2 s) until ``ch`` received ``n`` oneway requests."""
    async with ch.arrived:
        await asyncio.wait_for(ch.arrived.wait_for(lambda: len(ch.sent) >= n), 2.0)


async def test_heartbeat_creates_retry_topic_registers_and_notifies() -> None:
    broker = FakeBroker()
    proc = ClientManageProcessor(broker)  # type: ignore[arg-type]
    a, b = FakeChannel("10.0.0.1:1"), FakeChannel("10.0.0.2:2")
    resp = await proc.process_request(a, heartbeat("c1", "G", ["T", "%RETRY%G"]))
    assert resp is not None and resp.code == ResponseCode.SUCCESS
    assert broker.topic_config_manager.created["%RETRY%G"] == (1, 6, 0)
    assert broker.registrations == 1
    await notified(a, 1)
    note = a.sent[0]
    assert note.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    assert note.is_oneway and note.ext_fields == {"consumerGroup": "G"}

    resp = await proc.process_request(b, heartbeat("c2", "G", ["T", "%RETRY%G"]))
    assert resp is not None and resp.code == ResponseCode.SUCCESS
    assert broker.registrations == 1  # the retry topic already existed
    await notified(a, 2)
    await notified(b, 1)

    info = broker.consumer_manager.get_consumer_group_info("G")
    assert info is not None
    assert info.message_model is MessageModel.CLUSTERING
    assert info.channel_info_table["10.0.0.1:1"].language == "CPP"
    assert info.channel_info_table["10.0.0.1:1"].version == 63
    assert [i.client_id for i in broker.producer_manager.get_producer_channels("PG")] == ["c1", "c2"]

    req = RemotingCommand.create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
    resp = await proc.process_request(a, req)
    assert resp is not None and resp.code == ResponseCode.SUCCESS
    assert GetConsumerListByGroupResponseBody.decode(resp.body).consumer_id_list == ["c1", "c2"]


async def test_channel_close_notifies_remaining_and_releases_locks() -> None:
    broker = FakeBroker()
    proc = ClientManageProcessor(broker)  # type: ignore[arg-type]
    house = ClientHousekeepingService(broker)  # type: ignore[arg-type]
    a, b = FakeChannel("10.0.0.1:1"), FakeChannel("10.0.0.2:2")
    await proc.process_request(a, heartbeat("c1", "G", ["T"]))
    await proc.process_request(b, heartbeat("c2", "G", ["T"]))
    await notified(a, 2)
    lock = {
        "clientId": "c2",
        "consumerGroup": "G",
        "mqSet": [{"brokerName": "b", "queueId": 0, "topic": "T"}],
    }
    resp = await proc.process_request(
        b, RemotingCommand.create_request(RequestCode.LOCK_BATCH_MQ, {}, orjson.dumps(lock))
    )
    assert resp is not None and json.loads(resp.body)["lockOKMQSet"] == lock["mqSet"]

    b.is_active = False
    house.on_channel_close(b)  # type: ignore[arg-type]
    await notified(a, 3)
    info = broker.consumer_manager.get_consumer_group_info("G")
    assert info is not None and info.get_all_client_ids() == ["c1"]
    assert broker.rebalance_lock_manager.lock_table() == {}
    assert broker.producer_manager.get_producer_channels("PG")[0].client_id == "c1"


async def test_scan_exception_channel_expires_silent_clients() -> None:
    broker = FakeBroker()
    proc = ClientManageProcessor(broker)  # type: ignore[arg-type]
    house = ClientHousekeepingService(broker)  # type: ignore[arg-type]
    a = FakeChannel("10.0.0.1:1")
    await proc.process_request(a, heartbeat("c1", "G", ["T"]))
    info = broker.consumer_manager.get_consumer_group_info("G")
    assert info is not None
    last = info.channel_info_table["10.0.0.1:1"].last_update_timestamp
    house.scan_exception_channel(last + 60_000)
    assert broker.consumer_manager.get_consumer_group_info("G") is not None
    house.scan_exception_channel(last + 120_001)
    assert broker.consumer_manager.get_consumer_group_info("G") is None
    assert broker.producer_manager.get_group_channel_table() == {}
    assert not a.is_active  # closed


async def test_no_group_config_still_registers_without_retry_topic() -> None:
    broker = FakeBroker()
    broker.subscription_group_manager.auto_create = False
    proc = ClientManageProcessor(broker)  # type: ignore[arg-type]
    a = FakeChannel("10.0.0.1:1")
    resp = await proc.process_request(a, heartbeat("c1", "G", ["T"]))
    assert resp is not None and resp.code == ResponseCode.SUCCESS
    assert broker.topic_config_manager.created == {}
    assert broker.consumer_manager.get_consumer_group_info("G") is not None


async def test_dead_channel_does_not_break_notification() -> None:
    broker = FakeBroker()
    proc = ClientManageProcessor(broker)  # type: ignore[arg-type]
    a, b = FakeChannel("10.0.0.1:1"), FakeChannel("10.0.0.2:2")
    await proc.process_request(a, heartbeat("c1", "G", ["T"]))
    a.is_active = False  # dead but not yet reported closed
    resp = await proc.process_request(b, heartbeat("c2", "G", ["T"]))
    assert resp is not None and resp.code == ResponseCode.SUCCESS
    await notified(b, 1)
    # raising invoke_oneway must not escape either
    a.is_active = True

    async def boom(request: RemotingCommand) -> None:
        raise ConnectionError("reset")

    a.invoke_oneway = boom  # type: ignore[method-assign]
    await broker.broker2client.notify_consumer_ids_changed(a, "G")


async def test_every_captured_cpp_heartbeat_is_accepted() -> None:
    broker = FakeBroker()
    proc = ClientManageProcessor(broker)  # type: ignore[arg-type]
    seen = 0
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") != "frame" or rec.get("direction") != "c2s" or rec["header"]["code"] != 34:
                continue
            cmd = RemotingCommand.create_request(
                RequestCode.HEART_BEAT, rec["header"]["extFields"], bytes.fromhex(rec.get("body_hex", ""))
            )
            resp = await proc.process_request(FakeChannel(f"127.0.0.1:{rec['conn']}"), cmd)
            assert resp is not None and resp.code == ResponseCode.SUCCESS, (
                path.name,
                resp.remark if resp else None,
            )
            seen += 1
    assert seen > 0


async def test_unregister_and_unknown_group() -> None:
    broker = FakeBroker()
    proc = ClientManageProcessor(broker)  # type: ignore[arg-type]
    a, b = FakeChannel("10.0.0.1:1"), FakeChannel("10.0.0.2:2")
    await proc.process_request(a, heartbeat("c1", "G", ["T"]))
    await proc.process_request(b, heartbeat("c2", "G", ["T"]))
    await notified(a, 2)
    req = RemotingCommand.create_request(
        RequestCode.UNREGISTER_CLIENT, {"clientID": "c2", "consumerGroup": "G", "producerGroup": "PG"}
    )
    resp = await proc.process_request(b, req)
    assert resp is not None and resp.code == ResponseCode.SUCCESS
    await notified(a, 3)
    assert [i.client_id for i in broker.producer_manager.get_producer_channels("PG")] == ["c1"]

    req = RemotingCommand.create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "X"})
    resp = await proc.process_request(a, req)
    assert resp is not None and resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "no consumer for this group, X"
    req = RemotingCommand.create_request(RequestCode.UNREGISTER_CLIENT, {})
    resp = await proc.process_request(a, req)
    assert resp is not None and resp.code == ResponseCode.SYSTEM_ERROR and "clientID" in (resp.remark or "")
