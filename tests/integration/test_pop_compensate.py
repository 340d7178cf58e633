"""A group that only pops (no heartbeat) is known to the broker as RocketMQ 5's
``PopMessageProcessor`` records it (``compensateBasicConsumerInfo`` / ``compensateSubscribeData``):
its consume type, its subscriptions to the topic and its pop retry topic, looked up by the admin
views; the subscriptions expire ``subscription_expired_timeout`` after the last pop."""

from __future__ import annotations

import time

from tests.integration.conftest import Wire
from tests.integration.test_broker_pull import heartbeat_body
from tests.integration.test_pop import _fill
from tidemq.protocol.body import ConsumeStats, ConsumeType, MessageModel
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.headers import GetConsumeStatsRequestHeader
from tidemq.protocol.headers.pop import PopMessageRequestHeader
from tidemq.protocol.message import MessageQueue
from tidemq.testing import Cluster


async def _pop(wire: Wire, group: str, topic: str, exp: str | None) -> int:
    header = PopMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=-1, max_msg_nums=4, invisible_time=60_000,
        poll_time=0, born_time=int(time.time() * 1000), init_mode=0, exp_type="TAG", exp=exp,
    )  # fmt: skip
    return (await wire.invoke(RequestCode.POP_MESSAGE, header.to_ext_fields())).code


async def test_a_pop_only_group_is_known_by_its_pops(cluster: Cluster, wire: Wire) -> None:
    await _fill(wire, "PopComp", 2, tag="TagA")
    cm = cluster.broker.consumer_manager
    assert await _pop(wire, "PopNoSuchGroup", "NoSuchTopic", None) == ResponseCode.TOPIC_NOT_EXIST
    assert cm.get_consumer_group_info("PopNoSuchGroup", True) is not None  # as Java: before the checks
    assert cm.find_subscription_data("PopNoSuchGroup", "NoSuchTopic") is None  # after them

    before = int(time.time() * 1000)
    assert await _pop(wire, "PopCompG", "PopComp", "TagA || TagB") == ResponseCode.SUCCESS
    assert cm.get_consumer_group_info("PopCompG") is None  # no member: not online
    info = cm.get_consumer_group_info("PopCompG", from_compensation_table=True)
    assert info is not None and not info.channel_info_table
    assert (info.consume_type, info.message_model) == (ConsumeType.CONSUME_POP, MessageModel.CLUSTERING)
    sub = cm.find_subscription_data("PopCompG", "PopComp")
    assert sub is not None and sub.sub_string == "TagA || TagB" and sub.tags_set == {"TagA", "TagB"}
    assert sub.sub_version >= before
    retry = cm.find_subscription_data("PopCompG", "%RETRY%PopCompG_PopComp")
    assert retry is not None and retry.sub_string == "*"
    assert cm.find_subscription_data("PopCompG", "PopComp", from_compensation_table=False) is None

    # a member heartbeating another topic: the popped topic still counts in the consume stats
    await wire.create_topic("PopCompOther", queues=1)
    r = await wire.invoke(RequestCode.HEART_BEAT, body=heartbeat_body("c1", "PopCompG", "PopCompOther"))
    assert r.code == ResponseCode.SUCCESS, r.remark
    h = GetConsumeStatsRequestHeader(consumer_group="PopCompG", topic="PopComp")
    r = await wire.invoke(RequestCode.GET_CONSUME_STATS, h.to_ext_fields())
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert MessageQueue("PopComp", "broker-a", 0) in ConsumeStats.decode(r.body).offset_table

    cm.remove_expire_consumer_group_info(sub.sub_version + 600_000)  # not yet
    assert cm.find_subscription_data("PopCompG", "PopComp") is not None
    cm.remove_expire_consumer_group_info(sub.sub_version + 600_001 + 5_000)
    assert cm.find_subscription_data("PopCompG", "PopComp") is None
    assert "PopCompG" not in cm.consumer_compensation_table
