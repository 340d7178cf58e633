"""The one exception tree of tidemq.

Names follow RocketMQ's (``MQClientException``, ``MQBrokerException``, ``RemotingException``...).
``TideMQError`` is the root; catch it to catch everything tidemq raises on purpose.
"""

from __future__ import annotations

from typing import ClassVar


class TideMQError(Exception):
    """Root of every error tidemq raises."""


class ProtocolError(TideMQError):
    """Bytes or JSON that do not form a valid RocketMQ remoting frame or body."""


class BodyError(ProtocolError):
    """A JSON body is not valid JSON, or lacks / mistypes a field its class needs."""


class LocalProtocolError(ProtocolError):
    """We were asked to build something the protocol cannot express (e.g. a frame over the cap)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something that is not valid RocketMQ remoting protocol."""


class RemotingError(TideMQError):
    """Transport failure. Mirrors RocketMQ's ``RemotingException``."""


class RemotingConnectError(RemotingError):
    """Could not connect to ``addr``."""


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response within the timeout. Mirrors ``RemotingTimeoutException``."""


class RemotingSendRequestError(RemotingError):
    """The request could not be written (connection closed)."""


class RemotingTooMuchRequestError(RemotingError):
    """Too many in-flight requests (semaphore exhausted)."""


class RemotingCommandError(RemotingError, RemoteProtocolError):
    """A malformed frame from the peer; the channel is closed afterwards."""


class ClientError(TideMQError):
    """Misuse or bad configuration of the client. Mirrors ``MQClientException``."""


class NoRouteError(ClientError):
    """The name server has no route for a topic."""


class StoreError(TideMQError):
    """The message store cannot do what was asked (corrupt file, not writable...)."""


class BrokerError(TideMQError):
    """A broker (or name server) answered with an error code. Mirrors ``MQBrokerException``.

    Attributes:
        code: the RocketMQ response code (see ``tidemq.protocol.codes.ResponseCode``).
        remark: the remark text the server sent.
        broker_addr: ``"host:port"`` of the server that answered, when known.
    """

    retriable: ClassVar[bool] = False
    _registry: ClassVar[dict[int, type[BrokerError]]] = {}
    code_value: ClassVar[int | None] = None

    def __init__(self, code: int, remark: str | None = None, broker_addr: str | None = None) -> None:
        self.code = code
        self.remark = remark or ""
        self.broker_addr = broker_addr
        where = f" from {broker_addr}" if broker_addr else ""
        super().__init__(f"broker error {code}{where}: {self.remark}")

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code_value is not None:
            BrokerError._registry[cls.code_value] = cls

    @classmethod
    def for_code(cls, code: int, remark: str | None = None, broker_addr: str | None = None) -> BrokerError:
        """Return an instance of the most specific subclass registered for ``code``."""
        klass = BrokerError._registry.get(code, BrokerError)
        return klass(code, remark, broker_addr)


class SystemError_(BrokerError):
    """SYSTEM_ERROR (1)."""

    code_value = 1
    retriable = True


class SystemBusyError(BrokerError):
    """SYSTEM_BUSY (2)."""

    code_value = 2
    retriable = True


class RequestCodeNotSupportedError(BrokerError):
    """REQUEST_CODE_NOT_SUPPORTED (3)."""

    code_value = 3


class MessageIllegalError(BrokerError):
    """MESSAGE_ILLEGAL (13)."""

    code_value = 13


class ServiceNotAvailableError(BrokerError):
    """SERVICE_NOT_AVAILABLE (14)."""

    code_value = 14
    retriable = True


class NoPermissionError(BrokerError):
    """NO_PERMISSION (16)."""

    code_value = 16


class TopicNotExistError(BrokerError):
    """TOPIC_NOT_EXIST (17)."""

    code_value = 17
    retriable = True


class QueryNotFoundError(BrokerError):
    """QUERY_NOT_FOUND (22)."""

    code_value = 22


class SubscriptionGroupNotExistError(BrokerError):
    """SUBSCRIPTION_GROUP_NOT_EXIST (26)."""

    code_value = 26


class ConsumerNotOnlineError(BrokerError):
    """CONSUMER_NOT_ONLINE (206)."""

    code_value = 206
