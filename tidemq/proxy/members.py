"""v5 clients as members of the brokers' producer and consumer groups (HEART_BEAT).

Mirrors RocketMQ 5's ``ClientActivity.registerProducer`` / ``registerConsumer``: each v5 producer
is registered as a producer of group = each topic it publishes (so the brokers' transaction checks
reach the proxy), and in local mode each v5 consumer as a member of its group with its
subscriptions (so ``tidemq admin consumerConnection`` and the dashboard list it; consume type
CONSUME_ACTIVELY for SimpleConsumers, CONSUME_PASSIVELY for PushConsumers, CLUSTERING). Sent on
each settings command and each Heartbeat (every 10 s), to every broker holding the topics. In
cluster mode a consumer's heartbeat goes over a connection of its own to each broker
(``cluster_members.py``: a broker keeps members by connection), a producer's over the proxy's
shared one (where the brokers send transaction checks).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tidemq.protocol.body import ConsumeFromWhere, ConsumeType, MessageModel
from tidemq.protocol.body.heartbeat import ConsumerData, HeartbeatData, ProducerData
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.filter import build_subscription_data
from tidemq.proxy import codes

if TYPE_CHECKING:
    from tidemq.proxy.backend import Backend
    from tidemq.proxy.channels import ClientState
    from tidemq.proxy.context import RequestContext

log = logging.getLogger(__name__)

PRODUCER, PUSH_CONSUMER, SIMPLE_CONSUMER = 1, 2, 3


def heartbeat_data(state: ClientState, consumers: bool) -> HeartbeatData | None:
    """The HEART_BEAT body for ``state`` (None when there is nothing to register)."""
    if state.client_type == PRODUCER and state.topics:
        return HeartbeatData(
            state.client_id, producer_data_set=[ProducerData(t) for t in sorted(state.topics)]
        )
    if not consumers or state.client_type not in (PUSH_CONSUMER, SIMPLE_CONSUMER) or not state.group:
        return None
    subscriptions = [
        build_subscription_data(topic, expression, expression_type=kind)
        for topic, (kind, expression) in sorted(state.subscriptions.items())
    ]
    kind_of = (
        ConsumeType.CONSUME_PASSIVELY if state.client_type == PUSH_CONSUMER else ConsumeType.CONSUME_ACTIVELY
    )
    data = ConsumerData(
        state.group,
        kind_of,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        subscriptions,
    )
    return HeartbeatData(state.client_id, consumer_data_set=[data])


async def register(backend: Backend, state: ClientState, ctx: RequestContext) -> None:
    """HEART_BEAT ``state`` to every broker holding its topics; failures are logged."""
    data = heartbeat_data(state, consumers=getattr(backend, "registers_consumers", False))
    if data is None:
        return
    body = data.encode()
    brokers: set[str] = set()
    for topic in state.topics:
        route = await backend.topic_route(topic)
        if route is not None:
            brokers.update(q.broker_name for q in route.queues)
    send = backend.invoke
    if data.consumer_data_set:  # cluster mode: over the client's own connection (cluster_members.py)
        send = getattr(backend, "invoke_as_member", send)
    for broker_name in sorted(brokers):
        request = RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, body)
        try:
            await send(broker_name, request, 3.0, state.client_id, ctx.remote_addr)
        except codes.ProxyError as exc:
            log.warning("heartbeat of %s to %s failed: %s", state.client_id, broker_name, exc)
