"""gRPC status codes (``apache.rocketmq.v2.Code``) and the proxy's error.

Every v5 response carries ``Status{code, message}``; a handler raises :class:`ProxyError` with the
code and a message saying what was wrong, and the servicer answers with that status (never a gRPC
error: both clients read the status). Remoting answers from a broker are mapped with
:func:`code_of_remoting` (RocketMQ's ``ResponseBuilder.buildCode`` plus the send codes of
``SendMessageActivity``).
"""

from __future__ import annotations

from typing import Any, Final

from tidemq.protocol.codes import ResponseCode
from tidemq.proxy.pb import d

OK: Final = 20000
MULTIPLE_RESULTS: Final = 30000
BAD_REQUEST: Final = 40000
ILLEGAL_TOPIC: Final = 40002
ILLEGAL_CONSUMER_GROUP: Final = 40003
ILLEGAL_MESSAGE_TAG: Final = 40004
ILLEGAL_MESSAGE_KEY: Final = 40005
ILLEGAL_MESSAGE_GROUP: Final = 40006
ILLEGAL_MESSAGE_PROPERTY_KEY: Final = 40007
INVALID_TRANSACTION_ID: Final = 40008
ILLEGAL_MESSAGE_ID: Final = 40009
ILLEGAL_FILTER_EXPRESSION: Final = 40010
ILLEGAL_INVISIBLE_TIME: Final = 40011
ILLEGAL_DELIVERY_TIME: Final = 40012
INVALID_RECEIPT_HANDLE: Final = 40013
MESSAGE_PROPERTY_CONFLICT_WITH_TYPE: Final = 40014
UNRECOGNIZED_CLIENT_TYPE: Final = 40015
MESSAGE_CORRUPTED: Final = 40016
CLIENT_ID_REQUIRED: Final = 40017
ILLEGAL_POLLING_TIME: Final = 40018
UNAUTHORIZED: Final = 40100
FORBIDDEN: Final = 40300
MESSAGE_NOT_FOUND: Final = 40401
TOPIC_NOT_FOUND: Final = 40402
CONSUMER_GROUP_NOT_FOUND: Final = 40403
MESSAGE_BODY_TOO_LARGE: Final = 41301
MESSAGE_BODY_EMPTY: Final = 41302
TOO_MANY_REQUESTS: Final = 42900
MESSAGE_PROPERTIES_TOO_LARGE: Final = 43101
INTERNAL_SERVER_ERROR: Final = 50001
HA_NOT_AVAILABLE: Final = 50002
NOT_IMPLEMENTED: Final = 50100
PROXY_TIMEOUT: Final = 50400
MASTER_PERSISTENCE_TIMEOUT: Final = 50401
SLAVE_PERSISTENCE_TIMEOUT: Final = 50402

_REMOTING: Final[dict[int, int]] = {
    ResponseCode.SUCCESS: OK,
    ResponseCode.SYSTEM_BUSY: TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: MESSAGE_CORRUPTED,
    ResponseCode.FLUSH_DISK_TIMEOUT: MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: HA_NOT_AVAILABLE,
    ResponseCode.SERVICE_NOT_AVAILABLE: TOO_MANY_REQUESTS,
    ResponseCode.FLOW_CONTROL: TOO_MANY_REQUESTS,
    ResponseCode.NO_MESSAGE: INVALID_RECEIPT_HANDLE,
    ResponseCode.POLLING_FULL: TOO_MANY_REQUESTS,
    ResponseCode.INVALID_PARAMETER: BAD_REQUEST,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: ILLEGAL_FILTER_EXPRESSION,
}


def code_of_remoting(code: int) -> int:
    """The v5 code for a broker's remoting response code (INTERNAL_SERVER_ERROR when unmapped)."""
    return _REMOTING.get(code, INTERNAL_SERVER_ERROR)


class ProxyError(Exception):
    """A request the proxy refuses: answered with ``Status{code, message}``.

    Args:
        code: an ``apache.rocketmq.v2.Code`` value (e.g. :data:`BAD_REQUEST`).
        message: what was wrong, for the client's log.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: int = OK, message: str | None = None) -> Any:
    """A ``Status`` message; the message defaults to the code's name (as Java's ``buildStatus``)."""
    return d.Status(code=code, message=message if message is not None else d.Code.Name(code))
