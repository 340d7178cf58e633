"""The request plumbing every :class:`~tidemq.client.api.ClientAPI` method uses: build a request in
the client's language, invoke it on the shared ``RemotingClient``, check the response's code."""

from __future__ import annotations

from typing import Any

from tidemq.errors import BrokerError
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.remoting.client import RemotingClient

__all__ = ["APIBase"]


class APIBase:
    """Requests over one ``RemotingClient``.

    Args:
        remoting: the transport (shared by the whole ClientInstance).
        language: LanguageCode name put in request headers.
    """

    def __init__(self, remoting: RemotingClient, *, language: str = "PYTHON") -> None:
        self.remoting = remoting
        self.language = language

    def request(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b"", **kw: Any
    ) -> RemotingCommand:
        """A request ``code`` (RequestCode) with header fields ``ext`` and ``body`` in this client's
        language (``kw``: ``oneway`` and the other ``RemotingCommand.create_request`` options)."""
        cmd = RemotingCommand.create_request(code, ext, body, **kw)
        cmd.language = self.language
        return cmd

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """``request`` to ``addr`` (``host:port``); its answer within ``timeout`` s, whatever its code
        (``NettyRemotingClient.invokeSync``).

        Raises:
            RemotingError: no answer (connect failure, timeout, connection lost).
        """
        return await self.remoting.invoke(addr, request, timeout)

    @staticmethod
    def check(response: RemotingCommand, addr: str, *ok: int) -> RemotingCommand:
        """``response`` when its code is one of ``ok`` (default SUCCESS).

        Raises:
            BrokerError: another code (the subclass for it, with the remark and ``addr``).
        """
        if response.code not in (ok or (ResponseCode.SUCCESS,)):
            raise BrokerError.for_code(response.code, response.remark, addr)
        return response
