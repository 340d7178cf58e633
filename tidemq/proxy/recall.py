"""RecallMessage: cancel a delay (timer) message before its delivery time (RocketMQ 5.3).

Mirrors ``RecallMessageActivity`` + ``ProducerProcessor.recallMessage``: the handle (the send
entry's ``recall_handle``) names the broker; the proxy asks that broker with RECALL_MESSAGE (370,
``tidemq/broker/recall.py``) and answers ``{status, message_id}``. Broker refusals keep their remark;
ILLEGAL_OPERATION (a bad handle, or a message already due, i.e. delivered) answers BAD_REQUEST
(RocketMQ's proxy leaves that code unmapped: INTERNAL_SERVER_ERROR).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers.recall import RecallMessageRequestHeader
from tidemq.protocol.recall import RecallHandle, RecallHandleError
from tidemq.proxy import codes
from tidemq.proxy.names import resource_name
from tidemq.proxy.pb import s

if TYPE_CHECKING:
    from tidemq.proxy.backend import Backend
    from tidemq.proxy.context import RequestContext

__all__ = ["RECALL_TIMEOUT_S", "recall_message"]

RECALL_TIMEOUT_S = 2.0
"""How long the proxy waits for the broker (the Java proxy's ``Duration.ofSeconds(2)``)."""


async def recall_message(backend: Backend, request: Any, ctx: RequestContext) -> Any:
    """The ``RecallMessageResponse`` to ``request`` (``{topic: Resource, recall_handle}``).

    Raises:
        ProxyError: ILLEGAL_TOPIC (no topic), BAD_REQUEST (a handle that does not decode, or the
            broker's ILLEGAL_OPERATION), TOPIC_NOT_FOUND, and the broker's other refusals mapped by
            :func:`~tidemq.proxy.codes.code_of_remoting`.
    """
    if not request.topic.name:
        raise codes.ProxyError(codes.ILLEGAL_TOPIC, "topic name cannot be empty")
    topic = resource_name(request.topic, ctx.namespace)
    try:
        handle = RecallHandle.decode(request.recall_handle)
    except RecallHandleError as exc:
        raise codes.ProxyError(codes.BAD_REQUEST, str(exc)) from None
    if await backend.topic_route(topic) is None:  # (cluster mode: learns the broker's address)
        raise codes.ProxyError(codes.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
    ext = RecallMessageRequestHeader(
        topic=topic, recall_handle=request.recall_handle, bname=handle.broker_name
    ).to_ext_fields()
    resp = await backend.invoke(
        handle.broker_name,
        RemotingCommand.create_request(RequestCode.RECALL_MESSAGE, ext),
        RECALL_TIMEOUT_S,
        ctx.client_id,
        ctx.remote_addr,
    )
    if resp.code != ResponseCode.SUCCESS:
        code = (
            codes.BAD_REQUEST
            if resp.code == ResponseCode.ILLEGAL_OPERATION
            else codes.code_of_remoting(resp.code)
        )
        raise codes.ProxyError(code, resp.remark or f"recall failed, code {resp.code}")
    return s.RecallMessageResponse(
        status=codes.status(), message_id=resp.ext_fields.get("msgId", handle.message_id)
    )
