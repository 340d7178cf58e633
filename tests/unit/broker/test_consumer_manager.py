"""ConsumerManager / ConsumerGroupInfo / ProducerManager: the broker's view of client groups."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tidemq.broker.consumer_manager import (
    ClientChannel,
    ClientChannelInfo,
    ConsumerGroupEvent,
    ConsumerManager,
)
from tidemq.broker.producer_manager import ProducerManager
from tidemq.protocol.body import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.filter import build_subscription_data

T0 = 1_700_000_000_000


@dataclass
class FakeChannel:
    remote_addr: str
    is_active: bool = True
    sent: list[RemotingCommand] = field(default_factory=list)
    closed: bool = False

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        self.sent.append(request)

    def close(self) -> None:
        self.closed = True


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[ConsumerGroupEvent, str, list[str]]] = []

    def __call__(self, event: ConsumerGroupEvent, group: str, channels: Sequence[ClientChannel]) -> None:
        self.events.append((event, group, sorted(c.remote_addr for c in channels)))

    def changes(self) -> list[tuple[str, list[str]]]:
        return [(g, chs) for e, g, chs in self.events if e is ConsumerGroupEvent.CHANGE]


def sub(topic: str, expression: str = "*", version: int = T0) -> SubscriptionData:
    return build_subscription_data(topic, expression, sub_version=version)


def member(addr: str, client_id: str, now: int = T0) -> ClientChannelInfo:
    return ClientChannelInfo(FakeChannel(addr), client_id, "CPP", 333, now)


def register(
    cm: ConsumerManager, group: str, info: ClientChannelInfo, subs: list[SubscriptionData], now: int = T0
) -> bool:
    return cm.register_consumer(
        group,
        info,
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        subs,
        True,
        now,
    )


def test_first_heartbeat_registers_member_and_subscriptions() -> None:
    rec = Recorder()
    cm = ConsumerManager(listener=rec)
    a = member("10.0.0.1:5000", "10.0.0.1@1#DEFAULT")
    assert register(cm, "G", a, [sub("T", "TagA || TagB"), sub("%RETRY%G")])
    info = cm.get_consumer_group_info("G")
    assert info is not None
    assert info.get_all_client_ids() == ["10.0.0.1@1#DEFAULT"]
    assert info.message_model == MessageModel.CLUSTERING
    found = cm.find_subscription_data("G", "T")
    assert found is not None and found.tags_set == {"TagA", "TagB"}
    assert cm.find_subscription_data("G", "Other") is None
    assert cm.find_subscription_data("NoGroup", "T") is None
    assert rec.changes() == [("G", ["10.0.0.1:5000"])]


def test_repeated_heartbeat_changes_nothing_and_notifies_nobody() -> None:
    rec = Recorder()
    cm = ConsumerManager(listener=rec)
    a = member("10.0.0.1:5000", "c1")
    register(cm, "G", a, [sub("T")])
    again = ClientChannelInfo(a.channel, "c1", "CPP", 333, T0 + 30_000)
    assert not register(cm, "G", again, [sub("T")], T0 + 30_000)
    assert len(rec.changes()) == 1
    info = cm.get_consumer_group_info("G")
    assert info is not None
    assert info.channel_info_table["10.0.0.1:5000"].last_update_timestamp == T0 + 30_000


def test_second_member_notifies_both_and_ids_are_sorted() -> None:
    rec = Recorder()
    cm = ConsumerManager(listener=rec)
    register(cm, "G", member("10.0.0.2:6000", "zz-client"), [sub("T")])
    register(cm, "G", member("10.0.0.1:5000", "aa-client"), [sub("T")])
    info = cm.get_consumer_group_info("G")
    assert info is not None
    assert info.get_all_client_ids() == ["aa-client", "zz-client"]
    assert rec.changes()[-1] == ("G", ["10.0.0.1:5000", "10.0.0.2:6000"])


def test_subscription_merge_rules() -> None:
    rec = Recorder()
    cm = ConsumerManager(listener=rec)
    a = member("10.0.0.1:5000", "c1")
    register(cm, "G", a, [sub("T", "TagA", T0 + 10), sub("U")])
    # same topic set, older version: kept; no notification
    assert not register(cm, "G", a, [sub("T", "TagB", T0 + 5), sub("U")])
    found = cm.find_subscription_data("G", "T")
    assert found is not None and found.sub_string == "TagA"
    # larger version replaces; still the same topic set: no notification
    assert not register(cm, "G", a, [sub("T", "TagB", T0 + 20), sub("U")])
    found = cm.find_subscription_data("G", "T")
    assert found is not None and found.sub_string == "TagB"
    assert len(rec.changes()) == 1
    # topic U dropped: topic set changed -> notify
    assert register(cm, "G", a, [sub("T", "TagB", T0 + 20)])
    assert cm.find_subscription_data("G", "U") is None
    assert len(rec.changes()) == 2
    assert cm.query_topic_consume_by_who("T") == {"G"}
    assert cm.query_topic_consume_by_who("U") == set()


def test_notify_disabled_by_group_config() -> None:
    rec = Recorder()
    cm = ConsumerManager(listener=rec)
    assert cm.register_consumer(
        "G",
        member("10.0.0.1:5000", "c1"),
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        [sub("T")],
        False,
        T0,
    )
    assert rec.changes() == []


def test_unregister_notifies_remaining_and_drops_empty_group() -> None:
    rec = Recorder()
    cm = ConsumerManager(listener=rec)
    a, b = member("10.0.0.1:5000", "c1"), member("10.0.0.2:6000", "c2")
    register(cm, "G", a, [sub("T")])
    register(cm, "G", b, [sub("T")])
    assert cm.unregister_consumer("G", a)
    assert rec.changes()[-1] == ("G", ["10.0.0.2:6000"])
    assert not cm.unregister_consumer("G", a)  # already gone
    assert cm.unregister_consumer("G", b)
    assert cm.get_consumer_group_info("G") is None
    assert rec.events[-1][0] is ConsumerGroupEvent.UNREGISTER


def test_channel_close_leaves_every_group() -> None:
    rec = Recorder()
    cm = ConsumerManager(listener=rec)
    a, b = member("10.0.0.1:5000", "c1"), member("10.0.0.2:6000", "c2")
    register(cm, "G1", a, [sub("T")])
    register(cm, "G2", a, [sub("T")])
    register(cm, "G2", b, [sub("T")])
    removed = cm.do_channel_close_event("10.0.0.1:5000")
    assert sorted(g for g, _ in removed) == ["G1", "G2"]
    assert cm.get_consumer_group_info("G1") is None
    info = cm.get_consumer_group_info("G2")
    assert info is not None and info.get_all_client_ids() == ["c2"]
    assert rec.changes()[-1] == ("G2", ["10.0.0.2:6000"])
    assert cm.do_channel_close_event(b.channel) == [("G2", b)]
    assert cm.groups() == []


def test_silent_members_expire_after_channel_timeout() -> None:
    rec = Recorder()
    cm = ConsumerManager(listener=rec, channel_expired_timeout_ms=120_000)
    a, b = member("10.0.0.1:5000", "c1", T0), member("10.0.0.2:6000", "c2", T0)
    register(cm, "G", a, [sub("T")], T0)
    register(cm, "G", b, [sub("T")], T0)
    # b keeps heartbeating, a goes silent
    register(cm, "G", ClientChannelInfo(b.channel, "c2", "CPP", 333, T0 + 100_000), [sub("T")], T0 + 100_000)
    assert cm.scan_not_active_channel(T0 + 120_000) == []
    removed = cm.scan_not_active_channel(T0 + 120_001)
    assert [(g, i.client_id) for g, i in removed] == [("G", "c1")]
    info = cm.get_consumer_group_info("G")
    assert info is not None and info.get_all_client_ids() == ["c2"]
    assert rec.changes()[-1] == ("G", ["10.0.0.2:6000"])


def test_listener_errors_do_not_break_registration() -> None:
    def broken(event: ConsumerGroupEvent, group: str, channels: Sequence[ClientChannel]) -> None:
        raise RuntimeError("boom")

    cm = ConsumerManager(listener=broken)
    assert register(cm, "G", member("10.0.0.1:5000", "c1"), [sub("T")])
    assert cm.get_consumer_group_info("G") is not None


def test_producer_manager_register_close_and_expire() -> None:
    pm = ProducerManager()
    a = member("10.0.0.1:5000", "p1", T0)
    b = member("10.0.0.2:6000", "p2", T0)
    pm.register_producer("PG", a)
    pm.register_producer("PG", b)
    pm.register_producer("PG", ClientChannelInfo(b.channel, "p2", "CPP", 333, T0 + 100_000))
    assert sorted(i.client_id for i in pm.get_producer_channels("PG")) == ["p1", "p2"]
    expired = pm.scan_not_active_channel(T0 + 130_000, 120_000)
    assert [i.client_id for i in expired] == ["p1"]
    assert pm.do_channel_close_event("10.0.0.2:6000") == ["PG"]
    assert pm.get_group_channel_table() == {}
    pm.unregister_producer("PG", a)  # unknown: no error
