"""Message lookups from the client side: by key, by unique key, by message id.

Mirrors the query half of RocketMQ's ``MQAdminImpl`` (what ``DefaultMQProducer.queryMessage`` /
``viewMessage`` and mqadmin ``queryMsgByKey`` / ``queryMsgByUniqueKey`` / ``queryMsgById`` use):

* :func:`query_message` asks QUERY_MESSAGE (12) of every broker serving the topic and keeps the
  messages whose ``KEYS`` hold the key (or, for a unique-key query, whose UNIQ_KEY is the key,
  keeping the earliest stored copy).
* :func:`view_message` takes either id a user may hold: the broker's offset msg id (store host +
  commit-log offset; answered by VIEW_MESSAGE_BY_ID (33) from that broker) or the client's UNIQ_KEY
  (both are 32 hex characters). An id whose host is not one of the topic's brokers, or whose record
  does not carry that id, is looked up as a UNIQ_KEY, as ``DefaultMQAdminExtImpl.viewMessage`` does.

Timestamps are milliseconds; timeouts seconds.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidemq.errors import BrokerError, ClientError, ProtocolError, RemotingError, TideMQError
from tidemq.protocol.message import MessageExt
from tidemq.protocol.message_codec import decode_offset_msg_id

if TYPE_CHECKING:
    from tidemq.client.instance import ClientInstance

__all__ = ["QueryResult", "query_message", "query_message_by_uniq_key", "view_message"]

log = logging.getLogger(__name__)

MAX_TIMESTAMP = 2**63 - 1
"""``Long.MAX_VALUE``: the open end of a time range."""


@dataclass(slots=True)
class QueryResult:
    """Answer of :func:`query_message`. Mirrors ``QueryResult``.

    ``index_last_update_timestamp`` (ms) is the newest index update among the brokers asked.
    """

    index_last_update_timestamp: int = 0
    message_list: list[MessageExt] = field(default_factory=list)


async def _broker_addrs(instance: ClientInstance, topic: str) -> list[str]:
    route = await instance.get_route(topic)
    instance.remember_brokers(route)
    addrs = [bd.select_broker_addr() for bd in route.broker_datas]
    return sorted({a for a in addrs if a})


async def query_message(
    instance: ClientInstance,
    topic: str,
    key: str,
    max_num: int,
    begin: int,
    end: int,
    *,
    unique_key: bool = False,
    timeout: float | None = None,
) -> QueryResult:
    """Messages of ``topic`` whose KEYS contain ``key`` (or whose UNIQ_KEY is ``key`` when
    ``unique_key``), stored within ``[begin, end]`` ms. Mirrors ``MQAdminImpl.queryMessage``.

    Each broker returns at most ``max_num`` (32 for a unique-key query, 64 at most); brokers that fail
    are skipped with a log line.

    Raises:
        NoRouteError: the topic is unknown to the name servers.
        ClientError: no broker holds a match (``query message by key finished, but no message.``).
    """
    timeout = instance.config.mq_client_api_timeout if timeout is None else timeout
    addrs = await _broker_addrs(instance, topic)
    if not addrs:
        raise ClientError(f"The topic[{topic}] not matched route info")

    async def one(addr: str) -> tuple[int, list[MessageExt]]:
        try:
            return await instance.api.query_message(
                addr, topic, key, max_num, begin, end, timeout * 3, unique_key=unique_key
            )
        except (BrokerError, RemotingError, ProtocolError) as exc:
            log.warning("query message by key %r on %s failed: %s", key, addr, exc)
            return 0, []

    result = QueryResult()
    for index_ts, msgs in await asyncio.gather(*(one(a) for a in addrs)):
        result.index_last_update_timestamp = max(result.index_last_update_timestamp, index_ts)
        for msg in msgs:
            if unique_key:
                if msg.msg_id != key:
                    log.warning("query by unique key %r found another message (hash collision)", key)
                elif not result.message_list or msg.store_timestamp < result.message_list[0].store_timestamp:
                    result.message_list = [msg]
            elif key in (msg.keys or "").split(" "):
                result.message_list.append(msg)
    if not result.message_list:
        raise ClientError("query message by key finished, but no message.")
    return result


async def query_message_by_uniq_key(
    instance: ClientInstance,
    topic: str,
    uniq_key: str,
    *,
    timeout: float | None = None,
) -> MessageExt | None:
    """The message whose UNIQ_KEY (client msg id) is ``uniq_key``, or None.

    Mirrors ``MQAdminImpl.queryMessageByUniqKey`` (which searches from the time in the id; tidemq
    searches all retained time).
    """
    try:
        result = await query_message(
            instance, topic, uniq_key, 32, 0, MAX_TIMESTAMP, unique_key=True, timeout=timeout
        )
    except ClientError:
        return None
    return result.message_list[0] if result.message_list else None


async def view_message(
    instance: ClientInstance,
    msg_id: str,
    topic: str | None = None,
    *,
    timeout: float | None = None,
) -> MessageExt:
    """The message with id ``msg_id``: an offset msg id, or a UNIQ_KEY (then ``topic`` is needed).

    Mirrors ``DefaultMQAdminExtImpl.viewMessage(topic, msgId)``: try the id as an offset msg id on
    the broker it names, else query ``topic`` by unique key.

    Raises:
        ClientError: no such message (or a UNIQ_KEY without ``topic``).
    """
    timeout = instance.config.mq_client_api_timeout if timeout is None else timeout
    known: set[str] = set()
    if topic is not None:
        known = set(await _broker_addrs(instance, topic))
    known |= {a for addrs in instance.broker_addr_table.values() for a in addrs.values()}
    try:
        host, offset = decode_offset_msg_id(msg_id)
    except ProtocolError:
        host, offset = "", -1
    if host in known:
        try:
            msg = await instance.api.view_message(host, offset, timeout)
        except TideMQError as exc:
            log.debug("view message %s by offset failed: %s", msg_id, exc)
        else:
            if msg_id.upper() in (msg.offset_msg_id.upper(), msg.msg_id.upper()):
                return msg
    if topic is None:
        raise ClientError(
            f"message {msg_id} not found: not an offset msg id of a known broker (give the topic)"
        )
    found = await query_message_by_uniq_key(instance, topic, msg_id, timeout=timeout)
    if found is None:
        raise ClientError(f"message {msg_id} not found in topic {topic}")
    return found
