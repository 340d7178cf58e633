"""Client-side ACL: sign every outgoing request. Mirrors RocketMQ's ``AclClientRPCHook``.

Register on a :class:`~tidemq.remoting.client.RemotingClient` (the client instance does this when
``ClientConfig.access_key`` / ``secret_key`` are set). Before each request is sent the hook sets
``AccessKey`` (and ``SecurityToken`` when given), then ``Signature`` = HMAC-SHA1/Base64 over the
values of all other ext fields sorted by key + the body (protocol.md §9).

``_UNIQUE_KEY_QUERY`` is left out of the signed content, so the signature also verifies on a
stock Java broker (whose verifier leaves it out; apache/rocketmq #5310); tidemq's broker accepts
either form.
"""

from __future__ import annotations

from tidemq.acl.common import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    SessionCredentials,
    calculate_signature,
    combine_request_content,
)
from tidemq.protocol.command import RemotingCommand

__all__ = ["AclClientRPCHook"]


class AclClientRPCHook:
    """Adds ``AccessKey`` / ``SecurityToken`` / ``Signature`` to each request. Mirrors ``AclClientRPCHook``.

    Args:
        credentials: the account's keys.

    Signing again (a retried request object) replaces the previous signature: ``Signature`` is
    never part of the signed content.
    """

    def __init__(self, credentials: SessionCredentials) -> None:
        self.credentials = credentials

    def sign(self, request: RemotingCommand) -> None:
        """Add the credential fields and the signature to ``request`` in place."""
        ext = request.ext_fields
        ext[ACCESS_KEY] = self.credentials.access_key
        if self.credentials.security_token is not None:
            ext[SECURITY_TOKEN] = self.credentials.security_token
        content = combine_request_content(ext, request.body, exclude=(SIGNATURE, UNIQUE_KEY_QUERY))
        ext[SIGNATURE] = calculate_signature(content, self.credentials.secret_key)

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        """Sign ``request`` before it is sent to ``remote_addr``."""
        self.sign(request)

    def do_after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand
    ) -> None:
        """Nothing to do after the response."""
