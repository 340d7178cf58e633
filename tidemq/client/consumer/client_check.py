"""CHECK_CLIENT_CONFIG (46) at consumer start: a broker that cannot serve a subscription says so at
once. Mirrors ``MQClientInstance.checkClientInBroker``: for every non-TAG subscription, one master of
the topic's route is asked; anything but SUCCESS fails the start with the broker's remark (e.g.
``The broker does not support consumer to filter message by SQL92`` from a RocketMQ broker without
``enablePropertyFilter``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tidemq.errors import ClientError, TideMQError
from tidemq.protocol.body import EXPRESSION_TYPE_TAG, SubscriptionData

if TYPE_CHECKING:
    from tidemq.client.instance import ClientInstance

CHECK_TIMEOUT_S = 3.0
"""Java's 3000 ms."""


async def check_client_in_broker(
    instance: ClientInstance, group: str, client_id: str, subscriptions: Iterable[SubscriptionData]
) -> None:
    """Ask a master of each non-TAG subscription's topic whether it accepts the subscription.

    Raises:
        ClientError: a broker refused it (its remark included) or could not be asked.
    """
    for sub in subscriptions:
        if not sub.expression_type or sub.expression_type == EXPRESSION_TYPE_TAG:
            continue
        route = instance.topic_route_table.get(sub.topic)
        names = sorted(bd.broker_name for bd in route.broker_datas) if route is not None else []
        addr = next((a for a in map(instance.find_broker_address_in_publish, names) if a), None)
        if addr is None:
            continue  # no route yet: the pulls will tell (RocketMQ skips it too)
        try:
            code, remark = await instance.api.check_client_config(
                addr, group, client_id, sub, CHECK_TIMEOUT_S
            )
        except TideMQError as exc:
            raise ClientError(
                f"Check client in broker error, maybe because you use {sub.expression_type} to filter message, "
                f"but server has not been upgraded to support! ({addr}: {exc})"
            ) from exc
        if code != 0:
            raise ClientError(
                f"broker {addr} refuses the {sub.expression_type} subscription of group {group} to "
                f"{sub.topic} ({sub.sub_string!r}): code {code}, {remark}"
            )
