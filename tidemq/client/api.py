"""ClientAPI: one small method per request code a client sends. Mirrors RocketMQ's ``MQClientAPIImpl``.

Each method builds the request (custom header as ``extFields``), invokes it over the shared
``RemotingClient`` and turns the response into a Python value or a typed error:
``BrokerError.for_code(code, remark, addr)`` for an error code, ``NoRouteError`` for a topic
the name server does not know, and the transport's ``RemotingConnectError`` /
``RemotingTimeoutError`` / ``RemotingSendRequestError`` unchanged. Timeouts are seconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import NotRequired, TypedDict, Unpack

import orjson

from tidemq.client.api_offsets import OffsetAPI
from tidemq.errors import BrokerError, NoRouteError
from tidemq.protocol.body import (
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    SubscriptionData,
    TopicRouteData,
    UnlockBatchRequestBody,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand, next_opaque
from tidemq.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetRouteInfoRequestHeader,
    PullSysFlag,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    SendMessageRequestHeader,
    UnregisterClientRequestHeader,
    ViewMessageRequestHeader,
)
from tidemq.protocol.message import MessageExt, MessageQueue, SendResult
from tidemq.protocol.message_codec import decode_messages

__all__ = [
    "ClientAPI",
    "PullResult",
    "PullStatus",
    "PullSysFlag",
    "send_v2_ext_fields",
]

_STORED_OK = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}


class PullStatus(Enum):
    """Outcome of a pull. Mirrors ``PullStatus`` (codes 0 / 19 / 20 / 21)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    """A pull's answer. Mirrors ``PullResultExt``: ``body`` holds the raw stored records until decoded."""

    pull_status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int = 0
    body: bytes = b""
    msg_found_list: list[MessageExt] = field(default_factory=list)


PULL_MESSAGE = int(RequestCode.PULL_MESSAGE)
SEND_MESSAGE_V2 = int(RequestCode.SEND_MESSAGE_V2)
SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)
SEND_REPLY_MESSAGE_V2 = 325
_REPLY_PAIR = "MSG_TYPE\x01reply"
"""A reply (``MSG_TYPE=reply`` on ``<cluster>_REPLY_TOPIC``, as ``MessageUtil.createReplyMessage`` builds
it) goes out as SEND_REPLY_MESSAGE_V2, as Java's ``sendMessage`` does."""


def send_v2_ext_fields(h: SendMessageRequestHeader) -> dict[str, str]:
    """``h.to_v2_ext_fields()`` without the generic per-field walk (the send hot path).

    Same one-letter keys in the same order (declaration order: ``batch`` before
    ``maxReconsumeTimes``), ``None`` fields omitted, Java-style booleans.
    """
    ext = {
        "a": h.producer_group,
        "b": h.topic,
        "c": h.default_topic,
        "d": str(h.default_topic_queue_nums),
        "e": str(h.queue_id),
        "f": str(h.sys_flag),
        "g": str(h.born_timestamp),
        "h": str(h.flag),
    }
    if h.properties is not None:
        ext["i"] = h.properties
    if h.reconsume_times is not None:
        ext["j"] = str(h.reconsume_times)
    ext["k"] = "true" if h.unit_mode else "false"
    ext["m"] = "true" if h.batch else "false"
    if h.max_reconsume_times is not None:
        ext["l"] = str(h.max_reconsume_times)
    if h.broker_name is not None:
        ext["n"] = h.broker_name
    return ext


class PullRequestFields(TypedDict):
    """The keyword arguments of :meth:`ClientAPI.build_pull_message_request` (the fields of a
    PULL_MESSAGE request), which :meth:`ClientAPI.pull_message` takes too."""

    consumer_group: str
    mq: MessageQueue
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    subscription: str | None
    sub_version: int
    expression_type: NotRequired[str | None]


class ClientAPI(OffsetAPI):
    """Request/response helpers over one ``RemotingClient``. Mirrors ``MQClientAPIImpl``.

    Args:
        remoting: the transport (shared by the whole ClientInstance).
        language: LanguageCode name put in request headers.

    The request plumbing is :class:`~tidemq.client.api_base.APIBase`; the offset requests (queue
    min / max / by-time offsets, consumer offsets) are :class:`~tidemq.client.api_offsets.OffsetAPI`.
    """

    # -- name server -------------------------------------------------------------------------

    async def get_topic_route_info_from_name_server(
        self, addr: str, topic: str, timeout: float
    ) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC (105).

        Raises:
            NoRouteError: the name server has no route for ``topic``.
            BrokerError: any other error code.
        """
        req = self.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext_fields()
        )
        resp = await self.invoke(addr, req, timeout)
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            raise NoRouteError(
                f"no route for topic {topic} in name server {addr}: {resp.remark or ''}".rstrip(": ")
            )
        self.check(resp, addr)
        if not resp.body:
            raise NoRouteError(f"name server {addr} returned an empty route for topic {topic}")
        return TopicRouteData.decode(resp.body)

    # -- producer ----------------------------------------------------------------------------

    async def send_message(
        self,
        addr: str,
        broker_name: str,
        header: SendMessageRequestHeader,
        body: bytes,
        timeout: float,
        *,
        uniq_id: str,
    ) -> SendResult:
        """SEND_MESSAGE_V2 (310), or SEND_BATCH_MESSAGE (320) when ``header.batch``.

        Returns:
            SendResult; ``msg_id`` = ``uniq_id`` (comma-joined for a batch).

        Raises:
            BrokerError: the broker refused the message (code, remark, address).
        """
        resp = await self.invoke(addr, self.build_send_request(header, body), timeout)
        return self.process_send_response(broker_name, header.topic, resp, addr, uniq_id)

    def build_send_request(self, header: SendMessageRequestHeader, body: bytes) -> RemotingCommand:
        """The SEND_MESSAGE_V2 (310) or, when ``header.batch``, SEND_BATCH_MESSAGE (320) request.

        The ext-fields are :meth:`SendMessageRequestHeader.to_v2_ext_fields` (same keys, values and
        order), written out field by field: the per-send hot path builds no intermediate dicts.
        """
        code = SEND_BATCH_MESSAGE if header.batch else SEND_MESSAGE_V2
        if header.topic.endswith("_REPLY_TOPIC") and _REPLY_PAIR in (header.properties or ""):
            code = SEND_REPLY_MESSAGE_V2
        return RemotingCommand(
            code, self.language, opaque=next_opaque(), ext_fields=send_v2_ext_fields(header), body=body
        )

    async def send_message_oneway(self, addr: str, header: SendMessageRequestHeader, body: bytes) -> None:
        """SEND_MESSAGE_V2 as oneway: nothing comes back."""
        code = RequestCode.SEND_BATCH_MESSAGE if header.batch else RequestCode.SEND_MESSAGE_V2
        await self.remoting.invoke_oneway(
            addr, self.request(code, header.to_v2_ext_fields(), body, oneway=True)
        )

    @staticmethod
    def process_send_response(
        broker_name: str,
        topic: str,
        resp: RemotingCommand,
        addr: str,
        uniq_id: str,
        mq: MessageQueue | None = None,
    ) -> SendResult:
        """Turn a send response into a SendResult. Mirrors ``processSendResponse``.

        ``mq``, the queue the message was sent to, is reused as the result's queue when the
        broker stored it there (the usual case; queues are immutable values)."""
        status = _STORED_OK.get(resp.code)  # type: ignore[call-overload]
        if status is None:
            raise BrokerError.for_code(resp.code, resp.remark, addr)
        ext = resp.ext_fields
        queue_id = int(ext.get("queueId", "0"))
        if mq is None or mq.queue_id != queue_id or mq.topic != topic or mq.broker_name != broker_name:
            mq = MessageQueue(topic, broker_name, queue_id)
        return SendResult(
            send_status=status,
            msg_id=uniq_id,
            offset_msg_id=ext.get("msgId", ""),
            message_queue=mq,
            queue_offset=int(ext.get("queueOffset", "0")),
            region_id=ext.get("MSG_REGION", "DefaultRegion"),
            trace_on=ext.get("TRACE_ON", "true") != "false",
            transaction_id=ext.get("transactionId"),
            recall_handle=ext.get("recallHandle"),
        )

    # -- consumer ----------------------------------------------------------------------------

    async def pull_message(
        self, addr: str, *, timeout: float, **fields: Unpack[PullRequestFields]
    ) -> PullResult:
        """PULL_MESSAGE (11) of :meth:`build_pull_message_request` ``(**fields)``; the body stays
        undecoded (see ``pull_service.process_pull_result``).

        Raises:
            BrokerError: any code other than FOUND / NOT_FOUND / RETRY_IMMEDIATELY / OFFSET_MOVED.
        """
        request = self.build_pull_message_request(**fields)
        return await self.invoke_pull_message(addr, request, fields["queue_offset"], timeout)

    async def invoke_pull_message(
        self, addr: str, request: RemotingCommand, queue_offset: int, timeout: float
    ) -> PullResult:
        """Send a PULL_MESSAGE ``request`` (of :meth:`build_pull_message_request`, for
        ``queue_offset``) and parse its answer; errors as :meth:`pull_message`."""
        resp = await self.invoke(addr, request, timeout)
        return self.parse_pull_message_response(resp, queue_offset, addr)

    def build_pull_message_request(
        self,
        *,
        consumer_group: str,
        mq: MessageQueue,
        queue_offset: int,
        max_msg_nums: int,
        sys_flag: int,
        commit_offset: int,
        suspend_timeout_millis: int,
        subscription: str | None,
        sub_version: int,
        expression_type: str | None = "TAG",
    ) -> RemotingCommand:
        """The PULL_MESSAGE (11) request sent by :meth:`pull_message` (or on a caller's own
        connection by the blocking lite pull consumer)."""
        # PullMessageRequestHeader(...).to_ext_fields(), written out (same keys, order, values)
        ext = {
            "consumerGroup": consumer_group,
            "topic": mq.topic,
            "queueId": str(mq.queue_id),
            "queueOffset": str(queue_offset),
            "maxMsgNums": str(max_msg_nums),
            "sysFlag": str(sys_flag),
            "commitOffset": str(commit_offset),
            "suspendTimeoutMillis": str(suspend_timeout_millis),
        }
        if subscription is not None:
            ext["subscription"] = subscription
        ext["subVersion"] = str(sub_version)
        if expression_type is not None:
            ext["expressionType"] = expression_type
        return RemotingCommand(PULL_MESSAGE, self.language, opaque=next_opaque(), ext_fields=ext)

    @staticmethod
    def parse_pull_message_response(resp: RemotingCommand, queue_offset: int, addr: str) -> PullResult:
        """The :class:`PullResult` of a PULL_MESSAGE answer (``queue_offset``: the request's).

        Raises:
            BrokerError: any code other than FOUND / NOT_FOUND / RETRY_IMMEDIATELY / OFFSET_MOVED.
        """
        status = _PULL_STATUS.get(resp.code)  # type: ignore[call-overload]
        if status is None:
            raise BrokerError.for_code(resp.code, resp.remark, addr)
        e = resp.ext_fields
        return PullResult(
            pull_status=status,
            next_begin_offset=int(e.get("nextBeginOffset", queue_offset)),
            min_offset=int(e.get("minOffset", 0)),
            max_offset=int(e.get("maxOffset", 0)),
            suggest_which_broker_id=int(e.get("suggestWhichBrokerId", 0)),
            body=resp.body,
        )

    async def send_heartbeat(self, addr: str, heartbeat: HeartbeatData, timeout: float) -> int:
        """HEART_BEAT (34); returns the broker's version."""
        resp = self.check(
            await self.invoke(addr, self.request(RequestCode.HEART_BEAT, None, heartbeat.encode()), timeout),
            addr,
        )
        return resp.version

    async def check_client_config(
        self, addr: str, group: str, client_id: str, subscription: SubscriptionData, timeout: float
    ) -> tuple[int, str | None]:
        """CHECK_CLIENT_CONFIG (46): ``(response code, remark)`` for one subscription."""
        body = orjson.dumps(
            {"clientId": client_id, "group": group, "subscriptionData": subscription.to_json()}
        )
        resp = await self.invoke(addr, self.request(RequestCode.CHECK_CLIENT_CONFIG, None, body), timeout)
        return resp.code, resp.remark

    async def unregister_client(
        self,
        addr: str,
        client_id: str,
        *,
        producer_group: str | None = None,
        consumer_group: str | None = None,
        timeout: float,
    ) -> None:
        """UNREGISTER_CLIENT (35)."""
        ext = UnregisterClientRequestHeader(
            client_id=client_id, producer_group=producer_group, consumer_group=consumer_group
        ).to_ext_fields()
        self.check(await self.invoke(addr, self.request(RequestCode.UNREGISTER_CLIENT, ext), timeout), addr)

    async def get_consumer_id_list_by_group(self, addr: str, group: str, timeout: float) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP (38): the client ids of the group's live members."""
        req = self.request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            GetConsumerListByGroupRequestHeader(consumer_group=group).to_ext_fields(),
        )
        resp = self.check(await self.invoke(addr, req, timeout), addr)
        if not resp.body:
            return []
        return list(GetConsumerListByGroupResponseBody.decode(resp.body).consumer_id_list)

    async def consumer_send_message_back(
        self,
        addr: str,
        msg: MessageExt,
        group: str,
        delay_level: int,
        max_reconsume_times: int,
        timeout: float,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK (36): hand a failed message to the broker's retry machinery."""
        ext = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
        ).to_ext_fields()
        self.check(
            await self.invoke(addr, self.request(RequestCode.CONSUMER_SEND_MSG_BACK, ext), timeout), addr
        )

    async def lock_batch_mq(
        self,
        addr: str,
        group: str,
        client_id: str,
        mqs: Iterable[MessageQueue],
        timeout: float,
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ (41): returns the queues now locked by ``client_id``."""
        body = LockBatchRequestBody(consumer_group=group, client_id=client_id, mq_set=set(mqs)).encode()
        resp = self.check(
            await self.invoke(addr, self.request(RequestCode.LOCK_BATCH_MQ, None, body), timeout), addr
        )
        if not resp.body:
            return set()
        return set(LockBatchResponseBody.decode(resp.body).lock_ok_mq_set)

    async def unlock_batch_mq(
        self,
        addr: str,
        group: str,
        client_id: str,
        mqs: Iterable[MessageQueue],
        timeout: float,
        *,
        oneway: bool = False,
    ) -> None:
        """UNLOCK_BATCH_MQ (42)."""
        body = UnlockBatchRequestBody(consumer_group=group, client_id=client_id, mq_set=set(mqs)).encode()
        req = self.request(RequestCode.UNLOCK_BATCH_MQ, None, body, oneway=oneway)
        if oneway:
            await self.remoting.invoke_oneway(addr, req)
        else:
            self.check(await self.invoke(addr, req, timeout), addr)

    # -- message queries ---------------------------------------------------------------------

    async def query_message(
        self,
        addr: str,
        topic: str,
        key: str,
        max_num: int,
        begin_timestamp: int,
        end_timestamp: int,
        timeout: float,
        *,
        unique_key: bool = False,
    ) -> tuple[int, list[MessageExt]]:
        """QUERY_MESSAGE (12) on one broker: ``(indexLastUpdateTimestamp ms, messages)``.

        ``unique_key`` adds ``_UNIQUE_KEY_QUERY=true`` (``key`` is a UNIQ_KEY). QUERY_NOT_FOUND gives
        an empty list. Mirrors ``MQClientAPIImpl.queryMessage``.

        Raises:
            BrokerError: any other error code.
        """
        ext = QueryMessageRequestHeader(
            topic=topic,
            key=key,
            max_num=max_num,
            begin_timestamp=begin_timestamp,
            end_timestamp=end_timestamp,
            unique_key_query=unique_key,
        ).to_ext_fields()
        resp = self.check(
            await self.invoke(addr, self.request(RequestCode.QUERY_MESSAGE, ext), timeout),
            addr,
            ResponseCode.SUCCESS,
            ResponseCode.QUERY_NOT_FOUND,
        )
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return int(resp.ext_fields.get("indexLastUpdateTimestamp", 0) or 0), []
        header = QueryMessageResponseHeader.from_command(resp)
        return header.index_last_update_timestamp, decode_messages(resp.body)

    async def view_message(self, addr: str, phy_offset: int, timeout: float) -> MessageExt:
        """VIEW_MESSAGE_BY_ID (33): the stored message at commit-log ``phy_offset``.

        Mirrors ``MQClientAPIImpl.viewMessage``.

        Raises:
            BrokerError: not found (SYSTEM_ERROR ``can not find message by the offset, N``) or another error.
        """
        ext = ViewMessageRequestHeader(offset=phy_offset).to_ext_fields()
        resp = self.check(
            await self.invoke(addr, self.request(RequestCode.VIEW_MESSAGE_BY_ID, ext), timeout), addr
        )
        msgs = decode_messages(resp.body)
        if not msgs:
            raise BrokerError.for_code(ResponseCode.SYSTEM_ERROR, "empty VIEW_MESSAGE_BY_ID answer", addr)
        return msgs[0]
